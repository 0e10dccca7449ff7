//! shared-abi, kernel-arith and firmware must stay `#![no_std]`: this machine has no bare-metal
//! target to build them for, so this test proves it from the dependency graph instead. For
//! every crate in their normal (non-dev, non-build) dependency trees it checks that the crate's
//! library root declares `no_std` (plainly or under `cfg_attr`) and that cargo resolved it
//! without a `std` feature. Procedural-macro crates run on the build host, not on the device,
//! and are skipped.

use serde_json::Value;
use std::collections::BTreeMap;
use std::process::Command;

/// The triple of the machine running the tests (what `rustc -vV` calls the host).
fn host_triple() -> String {
    let output = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV runs");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .find_map(|line| line.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .trim()
        .to_string()
}

fn metadata() -> Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--filter-platform",
            &host_triple(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// Library root of every package in the metadata, by "name vVERSION".
fn library_roots(meta: &Value) -> BTreeMap<String, String> {
    let mut roots = BTreeMap::new();
    for package in meta["packages"].as_array().expect("packages") {
        let name = package["name"].as_str().expect("name");
        let version = package["version"].as_str().expect("version");
        for target in package["targets"].as_array().expect("targets") {
            let kinds: Vec<&str> = target["kind"]
                .as_array()
                .expect("kind")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if kinds.iter().any(|k| *k == "lib" || *k == "rlib") {
                if let Some(path) = target["src_path"].as_str() {
                    roots.insert(format!("{name} v{version}"), path.to_string());
                }
            }
        }
    }
    roots
}

/// The crates a build of `root` compiles for the target, with their enabled features, as
/// `cargo tree` resolves them for that build alone (dev-dependencies excluded). Subtrees of
/// procedural macros are left out: they run on the build host.
fn target_crates(root: &str) -> BTreeMap<String, Vec<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args([
            "tree",
            "-p",
            root,
            "-e",
            "normal",
            "--prefix",
            "depth",
            "-f",
            "{p}|{f}",
            "--target",
            &host_triple(),
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    let mut crates = BTreeMap::new();
    let mut skip_deeper_than: Option<usize> = None;
    for line in text.lines() {
        let digits = line.chars().take_while(char::is_ascii_digit).count();
        let Ok(depth) = line[..digits].parse::<usize>() else {
            continue;
        };
        if let Some(limit) = skip_deeper_than {
            if depth > limit {
                continue;
            }
            skip_deeper_than = None;
        }
        let rest = &line[digits..];
        let (package, features) = rest.split_once('|').unwrap_or((rest, ""));
        if package.contains("(proc-macro)") {
            skip_deeper_than = Some(depth);
            continue;
        }
        // "name vX.Y.Z", possibly followed by " (path)" and " (*)".
        let mut words = package.split_whitespace();
        let id = match (words.next(), words.next()) {
            (Some(name), Some(version)) => format!("{name} {version}"),
            _ => continue,
        };
        let features = features
            .trim_end_matches(" (*)")
            .split(',')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        crates.insert(id, features);
    }
    crates
}

fn declares_no_std(source: &str) -> bool {
    source.lines().any(|line| {
        let line = line.trim();
        line.starts_with("#![") && line.contains("no_std") && !line.starts_with("//")
    })
}

fn check(root: &str) -> Vec<String> {
    let roots = library_roots(&metadata());
    let mut problems = Vec::new();
    for (id, features) in target_crates(root) {
        if features.iter().any(|f| f == "std") {
            problems.push(format!("{id} is built with its `std` feature"));
        }
        let Some(lib) = roots.get(&id) else {
            problems.push(format!("{id}: no library target found"));
            continue;
        };
        let source = std::fs::read_to_string(lib).unwrap_or_default();
        if !declares_no_std(&source) {
            problems.push(format!("{id} ({lib}) does not declare no_std"));
        }
    }
    problems
}

#[test]
fn shared_abi_dependency_tree_holds_no_std_only_crate() {
    let problems = check("shared-abi");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn kernel_arith_dependency_tree_holds_no_std_only_crate() {
    let problems = check("kernel-arith");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn firmware_dependency_tree_holds_no_std_only_crate() {
    let problems = check("firmware");
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_check_rejects_a_std_crate() {
    // The check itself must be able to fail: the host runtime needs std.
    let problems = check("host-runtime");
    assert!(!problems.is_empty());
}

#[test]
fn no_std_detection_reads_attributes_not_comments() {
    assert!(declares_no_std("#![no_std]\n"));
    assert!(declares_no_std("#![cfg_attr(not(test), no_std)]\n"));
    assert!(!declares_no_std(
        "// #![no_std] is not here\nfn main() {}\n"
    ));
}
