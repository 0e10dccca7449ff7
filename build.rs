//! Build script of the `axle` package: the commit it is built from, for the provenance every
//! JSON result records (`src/provenance.rs`).
//!
//! Sets `AXLE_GIT_COMMIT` to `git rev-parse HEAD`, with `-dirty` appended when the work tree
//! has changes to tracked files (`git status --porcelain --untracked-files=no` prints
//! anything; the suffix is `git describe --dirty`'s), or `unknown` outside a git checkout or
//! without a `git` command (a source tarball, `cargo install` from a registry).
//!
//! It runs again when HEAD moves (the files `git rev-parse --git-path` names for `HEAD`, the
//! branch's ref and `packed-refs`), when the index changes, and when a source directory of
//! the workspace changes (so that `-dirty` follows an edit).

use std::path::Path;
use std::process::Command;

/// `git ARGS` in the package's directory: its standard output, trimmed, if it succeeded.
fn git(directory: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(directory)
        .output()
        .ok()?;
    if !output.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    println!("cargo:rerun-if-changed=build.rs");
    let commit = match git(root, &["rev-parse", "HEAD"]) {
        Some(head) if !head.is_empty() => {
            // What moves HEAD: HEAD itself, the branch's ref (loose or packed), the index.
            let mut watched = vec![
                "HEAD".to_owned(),
                "packed-refs".to_owned(),
                "index".to_owned(),
            ];
            if let Some(reference) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
                watched.push(reference);
            }
            for name in watched {
                if let Some(path) = git(root, &["rev-parse", "--git-path", &name]) {
                    let path = root.join(path);
                    if path.exists() {
                        println!("cargo:rerun-if-changed={}", path.display());
                    }
                }
            }
            // An edit of a tracked source makes the tree dirty: watch the sources (cargo
            // compares the newest modification time under each directory).
            for directory in [
                "src",
                "tests",
                "benches",
                "Cargo.toml",
                "Cargo.lock",
                "shared-abi",
                "kernel-arith",
                "firmware",
                "cosim-link",
                "emulator",
                "host-driver",
                "host-runtime",
                "workloads",
                "fuzz-checks",
            ] {
                if root.join(directory).exists() {
                    println!("cargo:rerun-if-changed={directory}");
                }
            }
            let dirty = git(root, &["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|status| !status.is_empty());
            if dirty {
                format!("{head}-dirty")
            } else {
                head
            }
        }
        _ => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=AXLE_GIT_COMMIT={commit}");
}
