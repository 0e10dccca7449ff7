//! Graph files crafted to mislead or exhaust the readers (written by each test into a temp
//! directory): each is refused with an error that names the value and the limit, quickly,
//! without a panic and without reading more than the bound.

use std::io::{BufReader, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::datafile::{MAX_LINE_BYTES, MAX_TAR_ENTRIES, MAX_XZ_DECODER_BYTES};
use crate::testing::{chain, tar_gz, xz, TempDir};

const BANNER: &str = "%%MatrixMarket matrix coordinate pattern symmetric\n";

/// A reader that counts the bytes taken from it.
struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let count = self.inner.read(buf)?;
        self.count.fetch_add(count as u64, Ordering::Relaxed);
        Ok(count)
    }
}

fn pace_xz(dir: &TempDir, text: &str) -> PathBuf {
    dir.file("g.gr.xz", &xz([text.as_bytes()]))
}

fn mtx_tar_gz(dir: &TempDir, text: &str) -> PathBuf {
    dir.file("g.tar.gz", &tar_gz(&[("g/g.mtx", text.as_bytes())]))
}

#[test]
fn huge_header_counts_are_refused_before_allocating_naming_value_and_limit() {
    let dir = TempDir::new("huge-header");
    let start = Instant::now();
    // Edges beyond the model's limit (arcs are counted by u32 offsets).
    let error = chain(&read_pace_gr_xz(&pace_xz(&dir, "p tw 5 1000000000000\n1 2\n")).unwrap_err());
    assert!(
        error.contains("edge count is 1000000000000") && error.contains(&MAX_EDGES.to_string()),
        "{error}"
    );
    // Vertices beyond the model's limit, in a Matrix Market size line.
    let error = chain(
        &read_mtx_tar_gz(&mtx_tar_gz(
            &dir,
            &format!("{BANNER}5000000000 5000000000 1\n2 1\n"),
        ))
        .unwrap_err(),
    );
    assert!(
        error.contains("vertex count is 5000000000")
            && error.contains(&MAX_VERTICES.to_string())
            && error.contains("g/g.mtx"),
        "{error}"
    );
    // A count past u64 is not a count at all.
    let error = chain(&parse_pace_gr("p tw 99999999999999999999999 1\n".as_bytes()).unwrap_err());
    assert!(error.contains("not a vertex count"), "{error}");
    // Within the model's limits but beyond this machine's memory (4e9 vertices of 32 bytes
    // are 128 GB), when that is so.
    let footprint = 4_000_000_000 * HOST_BYTES_PER_VERTEX;
    if cosim_link::limits::Machine::get().memory_budget < footprint {
        let error = chain(&parse_pace_gr("p tw 4000000000 1\n1 2\n".as_bytes()).unwrap_err());
        assert!(
            error.contains("vertex count is 4000000000") && error.contains("available"),
            "{error}"
        );
    }
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_header_that_overstates_its_edges_costs_only_the_edges_read() {
    // Twenty million edges announced (within the model's and the machine's limits), one
    // present: refused as a truncated file, having reserved RESERVE_AHEAD edges (8 MiB), not
    // the 160 MB the header asks for.
    const { assert!(20_000_000 > RESERVE_AHEAD) };
    let error = chain(&parse_pace_gr("p tw 5 20000000\n1 2\n".as_bytes()).unwrap_err());
    assert!(
        error.contains("1 edges, the header says 20000000"),
        "{error}"
    );
}

#[test]
fn a_long_line_in_a_small_xz_is_refused_at_the_line_limit_without_reading_it() {
    // 4 MiB of digits on one line, 600 bytes compressed.
    let digits = vec![b'1'; 1 << 20];
    let chunks = [b"p tw 5 1\n".as_slice()]
        .into_iter()
        .chain(std::iter::repeat_n(digits.as_slice(), 4))
        .chain([b"\n".as_slice()]);
    let compressed = xz(chunks);
    assert!(compressed.len() < 4096, "{} bytes", compressed.len());
    let dir = TempDir::new("long-line");
    let path = dir.file("long.gr.xz", &compressed);
    let error = chain(&read_pace_gr_xz(&path).unwrap_err());
    assert!(
        error.contains("length of line 2") && error.contains(&format!("limit of {MAX_LINE_BYTES}")),
        "{error}"
    );
    // The error quotes no part of the line.
    assert!(error.len() < 400, "{} bytes of error", error.len());
    // Only the line limit plus one buffer of the line was decompressed, not its 4 MiB.
    let count = Arc::new(AtomicU64::new(0));
    let stream = Counting {
        inner: xz2::read::XzDecoder::new(compressed.as_slice()),
        count: Arc::clone(&count),
    };
    assert!(parse_pace_gr(BufReader::new(stream)).is_err());
    let read = count.load(Ordering::Relaxed);
    assert!(read < 64 << 10, "{read} bytes decompressed");
    // The bound is the line limit: a lower one refuses a 20-byte comment the default takes.
    let text = "c twenty bytes long.\np tw 2 1\n1 2\n";
    assert!(parse_pace_gr(text.as_bytes()).is_ok());
    let low = ReadLimits {
        line_bytes: 16,
        ..ReadLimits::default()
    };
    let error = chain(&parse_pace_gr_with(text.as_bytes(), low).unwrap_err());
    assert!(
        error.contains("line 1") && error.contains("is 20") && error.contains("limit of 16"),
        "{error}"
    );
}

#[test]
fn a_decompression_bomb_is_refused_at_the_decompressed_limit() {
    // 8 MiB of short comment lines (every line within the line limit), a few KiB compressed.
    let comments = "c padding\n".repeat(1 << 16);
    let chunks = [b"p tw 2 1\n".as_slice()]
        .into_iter()
        .chain(std::iter::repeat_n(comments.as_bytes(), 13))
        .chain([b"1 2\n".as_slice()]);
    let dir = TempDir::new("bomb");
    let path = dir.file("bomb.gr.xz", &xz(chunks));
    assert!(read_pace_gr_xz(&path).is_ok(), "within the default limit");
    let low = ReadLimits {
        decompressed_bytes: 1 << 20,
        ..ReadLimits::default()
    };
    let error = chain(&read_pace_gr_xz_with(&path, low).unwrap_err());
    assert!(
        error.contains("decompressed size")
            && error.contains("is 1048577")
            && error.contains("limit of 1048576"),
        "{error}"
    );
    // The same for a tarball: the bytes of entries before the .mtx count too.
    let padding = vec![0_u8; 2 << 20];
    let tarball = tar_gz(&[
        ("g/padding.bin", &padding),
        ("g/g.mtx", format!("{BANNER}2 2 1\n2 1\n").as_bytes()),
    ]);
    let path = dir.file("bomb.tar.gz", &tarball);
    assert!(read_mtx_tar_gz(&path).is_ok());
    let error = chain(&read_mtx_tar_gz_with(&path, low).unwrap_err());
    assert!(error.contains("limit of 1048576"), "{error}");
}

#[test]
fn a_tarball_of_many_entries_is_refused_at_the_entry_limit() {
    let names: Vec<String> = (0..MAX_TAR_ENTRIES + 1)
        .map(|i| format!("g/{i}.txt"))
        .collect();
    let mut entries: Vec<(&str, &[u8])> = names
        .iter()
        .map(|name| (name.as_str(), &b"x"[..]))
        .collect();
    let mtx = format!("{BANNER}2 2 1\n2 1\n");
    entries.push(("g/g.mtx", mtx.as_bytes()));
    let error =
        chain(&read_mtx_tar(std::io::Cursor::new(strip_gzip(&tar_gz(&entries)))).unwrap_err());
    assert!(
        error.contains(&format!("is {}", MAX_TAR_ENTRIES + 1))
            && error.contains(&format!("limit of {MAX_TAR_ENTRIES}")),
        "{error}"
    );
}

/// The tar stream inside a gzip file.
fn strip_gzip(compressed: &[u8]) -> Vec<u8> {
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(compressed)
        .read_to_end(&mut tar)
        .unwrap();
    tar
}

#[test]
fn edge_counts_other_than_the_header_and_truncated_files_are_refused() {
    // More edges than announced: refused at the first extra line.
    let error = chain(&parse_pace_gr("p tw 4 1\n1 2\n2 3\n3 4\n".as_bytes()).unwrap_err());
    assert!(
        error.contains("line 3") && error.contains("more edges than the header's 1"),
        "{error}"
    );
    let error = chain(&parse_mtx(format!("{BANNER}4 4 1\n2 1\n3 1\n").as_bytes()).unwrap_err());
    assert!(error.contains("more edges than the header's 1"), "{error}");
    // Fewer.
    let error = chain(&parse_mtx(format!("{BANNER}4 4 3\n2 1\n").as_bytes()).unwrap_err());
    assert!(error.contains("1 entries, the size line says 3"), "{error}");
    // A compressed file cut short: an error, not a panic, for both formats.
    let dir = TempDir::new("truncated");
    let whole = xz([b"p tw 4 3\n1 2\n2 3\n3 4\n".as_slice()]);
    let path = dir.file("cut.gr.xz", &whole[..whole.len() / 2]);
    assert!(read_pace_gr_xz(&path).is_err());
    let whole = tar_gz(&[(
        "g/g.mtx",
        format!("{BANNER}4 4 3\n2 1\n3 1\n4 3\n").as_bytes(),
    )]);
    let path = dir.file("cut.tar.gz", &whole[..whole.len() / 2]);
    assert!(read_mtx_tar_gz(&path).is_err());
    // Empty files.
    assert!(read_pace_gr_xz(&dir.file("empty.gr.xz", b"")).is_err());
    assert!(read_mtx_tar_gz(&dir.file("empty.tar.gz", b"")).is_err());
}

#[test]
fn vertex_ids_out_of_range_name_the_id_and_the_header_count() {
    for (text, id) in [
        ("p tw 5 1\n1 6\n", "vertex 6"),
        ("p tw 5 1\n0 2\n", "vertex 0"),
        ("p tw 5 1\n4294967295 2\n", "vertex 4294967295"),
    ] {
        let error = chain(&parse_pace_gr(text.as_bytes()).unwrap_err());
        assert!(
            error.contains(id) && error.contains("1..=5"),
            "{text:?}: {error}"
        );
    }
    let error = chain(&parse_pace_gr("p tw 5 1\n1 99999999999\n".as_bytes()).unwrap_err());
    assert!(
        error.contains("`99999999999` is not a vertex id"),
        "{error}"
    );
}

#[test]
fn a_device_is_not_read_as_a_graph() {
    let error = chain(&read_pace_gr_xz(Path::new("/dev/zero")).unwrap_err());
    assert!(error.contains("not a regular file"), "{error}");
    let error = chain(&read_mtx_tar_gz(Path::new("/dev/zero")).unwrap_err());
    assert!(error.contains("not a regular file"), "{error}");
}

#[test]
fn the_description_of_a_file_names_what_was_read_and_whether_it_is_the_papers() {
    let dir = TempDir::new("describe");
    let path = pace_xz(&dir, "p tw 5 4\n1 2\n2 3\n3 4\n4 5\n");
    let graph = read_pace_gr_xz(&path).unwrap();
    let text = file_description(&path, &graph, crate::datafile::NY_ROAD);
    assert!(
        text.contains("g.gr.xz: 5 vertices, 4 edges = 8 arcs read")
            && text.contains("WARNING")
            && text.contains("not the paper's data set")
            && text.contains(crate::datafile::NY_ROAD.sha256),
        "{text}"
    );
    assert!(!text.contains("264346 vertices, 365050 edges = 730100 arcs read"));
}

#[test]
fn an_xz_header_asking_for_a_huge_dictionary_is_refused_before_it_is_allocated() {
    let mut compressed = xz([b"p tw 2 1\n1 2\n".as_slice()]);
    assert!(parse_pace_gr(BufReader::new(
        crate::datafile::xz_decoder(compressed.as_slice()).unwrap()
    ))
    .is_ok());
    // The block header follows the 12-byte stream header: its size byte ((size / 4) - 1), its
    // flags, then the LZMA2 filter (id 0x21, one property byte: the dictionary size), padding
    // and a CRC32 of the header.
    let size = (usize::from(compressed[12]) + 1) * 4;
    assert_eq!(compressed[14..16], [0x21, 0x01]);
    compressed[16] = 40; // 4 GiB - 1, the largest dictionary LZMA2 can name
    let mut crc = flate2::Crc::new();
    crc.update(&compressed[12..12 + size - 4]);
    compressed[12 + size - 4..12 + size].copy_from_slice(&crc.sum().to_le_bytes());
    let dir = TempDir::new("dictionary");
    let error = chain(&read_pace_gr_xz(&dir.file("dict.gr.xz", &compressed)).unwrap_err());
    assert!(
        error.to_lowercase().contains("memory")
            && error.contains(&MAX_XZ_DECODER_BYTES.to_string()),
        "{error}"
    );
}
