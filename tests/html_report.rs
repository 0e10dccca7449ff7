//! `axle eval`'s `index.html`: self-contained (nothing fetched, no script), every chart inline
//! with its links, tables and the paper's values; and, when Chromium is installed, loaded in
//! a real browser: every inline SVG is parsed into the DOM with its bars, and a screenshot
//! shows the charts drawn in their colours.
//!
//! The browser test is skipped, with a printed message, when no `chromium` (Debian package
//! `chromium`) or `chromium-browser` is on the PATH.
//!
//! Run: `cargo test --release --test html_report`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const AXLE: &str = env!("CARGO_BIN_EXE_axle");

/// A fresh directory under the system's temporary directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let path = std::env::temp_dir().join(format!("axle-html-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("scratch directory");
        Scratch(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `axle eval --scale small --no-data` of every figure into `out`; the names of the SVG files
/// it wrote, sorted.
fn evaluate(out: &Path) -> Vec<String> {
    let output = Command::new(AXLE)
        .args(["eval", "--scale", "small", "--no-data", "--quiet", "--out"])
        .arg(out)
        .env_remove("RUST_LOG")
        .output()
        .expect("axle runs");
    assert!(
        output.status.success(),
        "axle eval failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut svgs: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".svg"))
        .collect();
    svgs.sort();
    svgs
}

/// The Okabe-Ito colours of the first three bars of a chart (src/eval/plot.rs): orange, sky
/// blue, bluish green.
const BAR_COLOURS: [[u8; 3]; 3] = [[0xe6, 0x9f, 0x00], [0x56, 0xb4, 0xe9], [0x00, 0x9e, 0x73]];

#[test]
fn the_report_is_one_self_contained_page_with_every_chart_table_and_claim() {
    let scratch = Scratch::new("page");
    let svgs = evaluate(&scratch.0);
    assert!(svgs.len() >= 10, "{svgs:?}");
    let html = std::fs::read_to_string(scratch.0.join("index.html")).expect("index.html");
    assert!(html.starts_with("<!DOCTYPE html>"));
    // Nothing to fetch: no script, stylesheet link, image or frame, no remote address.
    for forbidden in ["<script", "<link", "<img", "<iframe", "@import", "url("] {
        assert!(!html.contains(forbidden), "the page contains {forbidden}");
    }
    for remote in ["src=\"http", "href=\"http", "href=\"//"] {
        assert!(!html.contains(remote), "the page refers to {remote}");
    }
    // Every chart inline, as its SVG file draws it, and linked.
    assert_eq!(html.matches("<svg").count(), svgs.len(), "{svgs:?}");
    for name in &svgs {
        let svg = std::fs::read_to_string(scratch.0.join(name)).unwrap();
        assert!(
            html.contains(svg.trim()),
            "{name} is not inline as its file has it"
        );
        assert!(
            html.contains(&format!("href=\"{name}\"")),
            "no link to {name}"
        );
    }
    // Every relative link names a file that is there.
    for link in html.split("href=\"").skip(1) {
        let target = link.split('"').next().unwrap();
        if target.starts_with('#') {
            continue;
        }
        assert!(
            scratch.0.join(target).is_file(),
            "a link to missing {target}"
        );
    }
    for figure in 10..=16 {
        assert!(
            html.contains(&format!("id=\"figure-{figure}\"")),
            "Figure {figure}"
        );
        assert!(html.contains(&format!("href=\"fig{figure}.json\"")));
    }
    // The tables, the paper's values beside ours, the inputs, the configuration, the build.
    for text in [
        "<table id=\"table-fig10\"",
        "<table id=\"table-fig12-reductions\"",
        "The paper beside ours",
        "214.64",
        "seeded generator (uniform f32 vectors), seed 42",
        "poll_interval_ns = 50",
        env!("CARGO_PKG_VERSION"),
    ] {
        assert!(html.contains(text), "the page lacks {text}");
    }
    let commit = html
        .split("<code id=\"commit\">")
        .nth(1)
        .and_then(|rest| rest.split('<').next())
        .expect("the commit");
    assert!(
        commit == "unknown" || commit.len() >= 40,
        "the commit is {commit}"
    );
}

/// The Chromium binary on the PATH, if any.
fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for name in ["chromium", "chromium-browser"] {
        for directory in std::env::split_paths(&path) {
            let candidate = directory.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Runs headless Chromium with `args` and `page`, killing it after a minute; its standard
/// output.
fn run_chromium(binary: &Path, profile: &Path, args: &[&str], page: &Path) -> Vec<u8> {
    let mut child = Command::new(binary)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts");
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = stdout.read_to_end(&mut bytes);
        bytes
    });
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for chromium") {
            assert!(status.success(), "chromium {args:?} failed: {status}");
            break;
        }
        if started.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {args:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().expect("reader")
}

/// The RGB pixels of an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes), row by
/// row: (width, height, pixels).
fn decode_png(bytes: &[u8]) -> (usize, usize, Vec<[u8; 3]>) {
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "not a PNG");
    let be32 = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let (width, height) = (be32(16), be32(20));
    let (depth, colour, interlace) = (bytes[24], bytes[25], bytes[28]);
    assert!(
        depth == 8 && (colour == 2 || colour == 6) && interlace == 0,
        "PNG depth {depth} colour type {colour} interlace {interlace}"
    );
    let channels = if colour == 2 { 3 } else { 4 };
    let mut data = Vec::new();
    let mut at = 8;
    while at + 8 <= bytes.len() {
        let length = be32(at);
        if &bytes[at + 4..at + 8] == b"IDAT" {
            data.extend_from_slice(&bytes[at + 8..at + 8 + length]);
        }
        at += 12 + length;
    }
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&data[..])
        .read_to_end(&mut raw)
        .expect("the PNG's data inflates");
    let stride = width * channels;
    assert_eq!(raw.len(), height * (stride + 1), "PNG data length");
    let mut previous = vec![0u8; stride];
    let mut pixels = Vec::with_capacity(width * height);
    for row in 0..height {
        let filter = raw[row * (stride + 1)];
        let mut line = raw[row * (stride + 1) + 1..(row + 1) * (stride + 1)].to_vec();
        for i in 0..stride {
            let a = if i >= channels { line[i - channels] } else { 0 };
            let b = previous[i];
            let c = if i >= channels {
                previous[i - channels]
            } else {
                0
            };
            let predicted = match filter {
                0 => 0,
                1 => a,
                2 => b,
                3 => ((u16::from(a) + u16::from(b)) / 2) as u8,
                4 => {
                    let p = i16::from(a) + i16::from(b) - i16::from(c);
                    let (pa, pb, pc) = (
                        (p - i16::from(a)).abs(),
                        (p - i16::from(b)).abs(),
                        (p - i16::from(c)).abs(),
                    );
                    if pa <= pb && pa <= pc {
                        a
                    } else if pb <= pc {
                        b
                    } else {
                        c
                    }
                }
                other => panic!("PNG filter {other}"),
            };
            line[i] = line[i].wrapping_add(predicted);
        }
        pixels.extend(line.chunks(channels).map(|p| [p[0], p[1], p[2]]));
        previous = line;
    }
    (width, height, pixels)
}

#[test]
fn chromium_parses_every_chart_and_draws_them() {
    let Some(binary) = chromium() else {
        println!(
            "skipped: no chromium on the PATH (Debian: apt-get install chromium); the page was not loaded in a browser"
        );
        return;
    };
    let scratch = Scratch::new("browser");
    let out = scratch.0.join("axle-eval");
    let svgs = evaluate(&out);
    let page = out.join("index.html");
    let profile = scratch.0.join("profile");

    // The DOM after parsing: one <svg> element per chart, each with its bars (<rect>) and
    // texts.
    let dom = String::from_utf8(run_chromium(&binary, &profile, &["--dump-dom"], &page))
        .expect("the DOM is UTF-8");
    // Each chart's <div id="chart-ID">, and the <svg> element in it.
    let parsed: Vec<(&str, &str)> = dom
        .split("id=\"chart-")
        .skip(1)
        .map(|rest| {
            let id = rest.split('"').next().unwrap_or("");
            let svg = rest
                .split("<svg")
                .nth(1)
                .and_then(|svg| svg.split("</svg>").next())
                .unwrap_or("");
            (id, svg)
        })
        .collect();
    assert_eq!(
        parsed.len(),
        svgs.len(),
        "the browser parsed {} charts for {} SVG files",
        parsed.len(),
        svgs.len()
    );
    assert_eq!(dom.matches("<svg").count(), svgs.len());
    // Each with every bar, line and label of its file.
    for (id, svg) in parsed {
        let file = std::fs::read_to_string(out.join(format!("{id}.svg")))
            .unwrap_or_else(|error| panic!("{id}.svg: {error}"));
        for element in ["<rect", "<text", "<polyline"] {
            assert_eq!(
                svg.matches(element).count(),
                file.matches(element).count(),
                "{id}: the browser's DOM has another number of {element} than the file"
            );
        }
        assert!(svg.contains("<text"), "{id} has no text in the DOM");
    }
    for figure in 10..=16 {
        assert!(
            dom.contains(&format!("id=\"figure-{figure}\"")),
            "Figure {figure}"
        );
    }

    // A screenshot of the top of the page: Figure 10's chart drawn, in the palette's colours.
    let png = scratch.0.join("page.png");
    run_chromium(
        &binary,
        &profile,
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1400,1800",
        ],
        &page,
    );
    let (width, height, pixels) = decode_png(&std::fs::read(&png).expect("the screenshot"));
    assert_eq!((width, height), (1400, 1800));
    let mut colours: Vec<[u8; 3]> = pixels.clone();
    colours.sort_unstable();
    colours.dedup();
    assert!(
        colours.len() > 16,
        "the screenshot has {} colours: not a rendered page",
        colours.len()
    );
    for colour in BAR_COLOURS {
        let count = pixels.iter().filter(|p| **p == colour).count();
        assert!(
            count > 200,
            "the screenshot has {count} pixels of bar colour {colour:02x?}: the charts were not drawn"
        );
    }
}
