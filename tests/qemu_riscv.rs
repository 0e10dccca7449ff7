//! The firmware on a RISC-V CPU: builds the QEMU port (`ports/qemu-riscv`, its own workspace,
//! target `riscv32imac-unknown-none-elf`), writes its input image from the `workloads` crate's
//! generators, boots it on `qemu-system-riscv32 -machine virt -bios none`, and checks every
//! result it streamed through the firmware's rings bit for bit against the workloads'
//! references: all KNN distances and each query's top-k, and the SSSP distances after the
//! workload's default number of rounds. It also reports the image's code size and static RAM
//! (from the ELF's section headers), the stack it used, and the instructions per work item
//! (`rdinstret` under `-icount`) beside the emulator's cost model.
//!
//! Skipped, with a message, when QEMU or the RISC-V target is not installed (`.ci/run` installs
//! both when it can). Run it alone with
//! `cargo test --release --test qemu_riscv -- --nocapture`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use firmware::kernels::knn::squared_distance;
use workloads::knn::data::KnnData;
use workloads::sssp::reference::bellman_ford_rounds;
use workloads::sssp::SsspApplication;
use workloads::{Scale, WorkloadOptions};

const TARGET: &str = "riscv32imac-unknown-none-elf";
const QEMU: &str = "qemu-system-riscv32";
/// Where the port's `board::INPUT_BASE` expects the image.
const INPUT_BASE: u32 = 0x8020_0000;
/// The port's whole run takes a few seconds; a hung port fails the test instead of CI.
const QEMU_TIMEOUT: Duration = Duration::from_secs(120);

// The KNN instance: small, seeded, the workload's own generator and k.
const KNN_DIM: u32 = 64;
const KNN_ROWS: u32 = 256;
const KNN_QUERIES: u32 = 4;
const KNN_SEED: u64 = 42;

fn port_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ports/qemu-riscv")
}

/// Why the test cannot run here, if it cannot.
fn missing_tools() -> Option<String> {
    let qemu = Command::new(QEMU)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !qemu.is_ok_and(|status| status.success()) {
        return Some(format!(
            "{QEMU} not found (Debian: apt-get install qemu-system-misc)"
        ));
    }
    let libdir = Command::new("rustc")
        .current_dir(port_dir())
        .args(["--print", "target-libdir", "--target", TARGET])
        .output();
    match libdir {
        Ok(out) if out.status.success() => {
            let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if Path::new(&dir).join("libcore.rlib").exists()
                || std::fs::read_dir(&dir).is_ok_and(|mut entries| {
                    entries.any(|e| {
                        e.is_ok_and(|e| e.file_name().to_string_lossy().starts_with("libcore-"))
                    })
                })
            {
                None
            } else {
                Some(format!(
                    "the {TARGET} standard library is not installed (rustup target add {TARGET})"
                ))
            }
        }
        _ => Some(format!("rustc cannot print the {TARGET} target-libdir")),
    }
}

// ---------------------------------------------------------------------------------------------
// The input image (layout: ports/qemu-riscv/src/image.rs)
// ---------------------------------------------------------------------------------------------

struct Inputs {
    knn: KnnData,
    k: u32,
    sssp: SsspApplication,
    rounds: u32,
}

fn inputs() -> Inputs {
    let options = WorkloadOptions {
        scale: Scale::Small,
        ..WorkloadOptions::default()
    };
    Inputs {
        knn: KnnData::generate(KNN_DIM, KNN_ROWS, KNN_QUERIES, KNN_SEED),
        k: workloads::knn::DEFAULT_K,
        sssp: SsspApplication::new(&options).expect("the small SSSP instance builds"),
        rounds: workloads::sssp::DEFAULT_ITERATIONS,
    }
}

fn image(inputs: &Inputs) -> Vec<u8> {
    let graph = inputs.sssp.graph();
    let mut payload = Vec::new();
    for value in inputs
        .knn
        .database()
        .iter()
        .chain(inputs.knn.query_vectors())
    {
        payload.extend_from_slice(&value.to_le_bytes());
    }
    for word in graph
        .offsets()
        .iter()
        .chain(graph.targets())
        .chain(graph.weights())
    {
        payload.extend_from_slice(&word.to_le_bytes());
    }
    let mut image = Vec::new();
    image.extend_from_slice(b"AXLEQIMG");
    let header = [
        1, // version
        64,
        KNN_DIM,
        KNN_ROWS,
        KNN_QUERIES,
        inputs.k,
        graph.vertices(),
        graph.arcs(),
        workloads::sssp::SOURCE,
        inputs.rounds,
        u32::try_from(payload.len()).expect("a small image"),
        0,
        0,
        0,
    ];
    for word in header {
        image.extend_from_slice(&word.to_le_bytes());
    }
    assert_eq!(image.len(), 64);
    image.extend_from_slice(&payload);
    image
}

// ---------------------------------------------------------------------------------------------
// Build, size, run
// ---------------------------------------------------------------------------------------------

fn build_port() -> PathBuf {
    let dir = port_dir();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(&dir)
        .args(["build", "--release", "--locked", "--target-dir"])
        .arg(dir.join("target"));
    // The outer build's settings are for the host; the port's `.cargo/config.toml` sets its own.
    for variable in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WRAPPER",
    ] {
        command.env_remove(variable);
    }
    let status = command.status().expect("cargo runs");
    assert!(status.success(), "building ports/qemu-riscv failed");
    dir.join("target")
        .join(TARGET)
        .join("release/axle-qemu-riscv")
}

/// Bytes of the ELF32 sections by name.
fn section_sizes(elf: &[u8]) -> Vec<(String, u64)> {
    let u16_at = |at: usize| u16::from_le_bytes(elf[at..at + 2].try_into().unwrap()) as usize;
    let u32_at = |at: usize| u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) as usize;
    assert_eq!(&elf[..5], b"\x7fELF\x01", "a 32-bit ELF");
    let (shoff, shentsize, shnum, shstrndx) =
        (u32_at(0x20), u16_at(0x2e), u16_at(0x30), u16_at(0x32));
    let header = |index: usize| shoff + index * shentsize;
    let strings = u32_at(header(shstrndx) + 16);
    (0..shnum)
        .map(|index| {
            let name_at = strings + u32_at(header(index));
            let end = elf[name_at..].iter().position(|b| *b == 0).unwrap();
            let name = String::from_utf8_lossy(&elf[name_at..name_at + end]).into_owned();
            (name, u32_at(header(index) + 20) as u64)
        })
        .collect()
}

fn run_qemu(elf: &Path, image: &Path) -> (i32, String) {
    let mut child = Command::new(QEMU)
        .args([
            "-machine",
            "virt",
            "-nographic",
            "-bios",
            "none",
            "-icount",
            "shift=0",
        ])
        .arg("-kernel")
        .arg(elf)
        .arg("-device")
        .arg(format!(
            "loader,file={},addr={INPUT_BASE:#x},force-raw=on",
            image.display()
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("QEMU starts");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).map(|_| text)
    });
    let deadline = Instant::now() + QEMU_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("QEMU can be waited for") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("QEMU did not end within {QEMU_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let text = reader.join().unwrap().expect("QEMU's output is text");
    assert!(stderr.trim().is_empty(), "QEMU complained: {stderr}");
    (status.code().unwrap_or(-1), text.replace('\r', ""))
}

// ---------------------------------------------------------------------------------------------
// Reading the port's output
// ---------------------------------------------------------------------------------------------

/// The words of every `<label> <first> <hex...>` line, in order.
fn words(output: &str, label: &str) -> Vec<u32> {
    let mut words = Vec::new();
    for line in output.lines() {
        let mut parts = line.split(' ');
        if parts.next() != Some(label) {
            continue;
        }
        let first: usize = parts.next().unwrap().parse().unwrap();
        assert_eq!(first, words.len(), "{label} lines in order");
        let hex = parts.next().unwrap_or("");
        for chunk in hex.as_bytes().chunks(8) {
            words.push(u32::from_str_radix(std::str::from_utf8(chunk).unwrap(), 16).unwrap());
        }
    }
    words
}

/// `key=value` of the line starting with `prefix`.
fn field(output: &str, prefix: &str, key: &str) -> u64 {
    let line = output
        .lines()
        .find(|line| line.starts_with(prefix))
        .unwrap_or_else(|| panic!("no `{prefix}` line in the port's output"));
    line.split(' ')
        .find_map(|part| part.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in `{line}`"))
        .parse()
        .unwrap()
}

fn fnv1a(words: &[u32]) -> u64 {
    words
        .iter()
        .flat_map(|word| word.to_le_bytes())
        .fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
}

fn digest(output: &str, label: &str) -> u64 {
    let line = output
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{label} ")))
        .unwrap_or_else(|| panic!("no {label} line"));
    u64::from_str_radix(line.trim(), 16).unwrap()
}

#[test]
fn qemu_port_streams_knn_and_sssp_results_bit_exact_to_the_references() {
    if let Some(reason) = missing_tools() {
        println!("skipped: the QEMU RISC-V port test needs {reason}");
        return;
    }
    let inputs = inputs();
    let image_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("qemu-riscv-input.bin");
    std::fs::write(&image_path, image(&inputs)).unwrap();
    let elf = build_port();
    let (status, output) = run_qemu(&elf, &image_path);
    assert!(
        status == 0
            && output.lines().any(|line| line == "PASS")
            && output.lines().any(|line| {
                line.starts_with("conformance ok")
                    && line.contains("dma_completion_order")
                    && line.contains("interrupt_delivery")
            }),
        "the port failed (QEMU status {status}):\n{output}"
    );

    // KNN: every distance, bit for bit, and each query's top-k (rows and distances).
    let knn = &inputs.knn;
    let expected: Vec<u32> = (0..KNN_QUERIES)
        .flat_map(|q| (0..KNN_ROWS).map(move |r| (q, r)))
        .map(|(q, r)| squared_distance(knn.row(r), knn.query(q)).to_bits())
        .collect();
    let distances = words(&output, "knn.distances");
    assert_eq!(
        distances.len(),
        expected.len(),
        "every KNN distance printed"
    );
    if let Some(i) = (0..expected.len()).find(|&i| distances[i] != expected[i]) {
        panic!(
            "KNN distance {i} (query {}, row {}): device {:#010x}, reference {:#010x}",
            i as u32 / KNN_ROWS,
            i as u32 % KNN_ROWS,
            distances[i],
            expected[i]
        );
    }
    assert_eq!(digest(&output, "knn.digest"), fnv1a(&expected));
    let top = workloads::knn::reference::brute_force(knn, inputs.k as usize);
    for (query, neighbours) in top.iter().enumerate() {
        let printed = output
            .lines()
            .find_map(|line| line.strip_prefix(&format!("knn.topk {query} ")))
            .unwrap_or_else(|| panic!("no top-k of query {query}"));
        let want: Vec<String> = neighbours
            .iter()
            .map(|n| format!("{}:{:08x}", n.row, n.distance.to_bits()))
            .collect();
        assert_eq!(printed, want.join(" "), "top-{} of query {query}", inputs.k);
    }

    // SSSP: the distances after the workload's default number of Jacobi rounds.
    let graph = inputs.sssp.graph();
    let expected = bellman_ford_rounds(graph, workloads::sssp::SOURCE, inputs.rounds);
    let distances = words(&output, "sssp.distances");
    assert_eq!(
        distances.len(),
        expected.len(),
        "every SSSP distance printed"
    );
    if let Some(v) = (0..expected.len()).find(|&v| distances[v] != expected[v]) {
        panic!(
            "SSSP vertex {v} after {} rounds: device {}, reference {}",
            inputs.rounds, distances[v], expected[v]
        );
    }
    assert_eq!(digest(&output, "sssp.digest"), fnv1a(&expected));
    assert!(
        expected.iter().filter(|d| **d != u32::MAX).count() > 1,
        "the rounds reached more than the source"
    );

    // The report: image size, RAM, stack, instructions per item.
    let sections = section_sizes(&std::fs::read(&elf).unwrap());
    let size = |prefix: &str| -> u64 {
        sections
            .iter()
            .filter(|(name, _)| name == prefix || name.starts_with(&format!("{prefix}.")))
            .map(|(_, bytes)| bytes)
            .sum()
    };
    let (text, rodata, data, bss) = (size(".text"), size(".rodata"), size(".data"), size(".bss"));
    assert!(text > 0, "the image has code");
    println!("qemu-riscv port ({TARGET}, release, LTO):");
    println!(
        "  image: .text {text} B, .rodata {rodata} B; static RAM .data + .bss = {} B",
        data + bss
    );
    println!(
        "  stack: {} B deepest of {} B; a launch's main loop (Firmware::step, engines, host poll) {} B; one work item {} B (KNN) / {} B (SSSP); Firmware struct {} B, HAL struct {} B (on the stack)",
        field(&output, "stack", "high_water"),
        field(&output, "sizes", "stack_size"),
        field(&output, "items knn", "loop_stack_bytes").max(field(&output, "items sssp", "loop_stack_bytes")),
        field(&output, "items knn", "stack_bytes"),
        field(&output, "items sssp", "stack_bytes"),
        field(&output, "sizes", "firmware_struct"),
        field(&output, "sizes", "hal_struct"),
    );
    for kernel in ["knn", "sssp"] {
        let prefix = format!("items {kernel}");
        let measured = field(&output, &prefix, "instret_mean");
        let modelled = field(&output, &prefix, "model_mean");
        println!(
            "  {kernel}: {} items, instructions per item: {measured} measured (rdinstret, min {} max {}), {modelled} in the cost model (ItemCost::instructions): {:.1}x",
            field(&output, &prefix, "count"),
            field(&output, &prefix, "instret_min"),
            field(&output, &prefix, "instret_max"),
            measured as f64 / modelled.max(1) as f64
        );
    }
}
