//! The commands in README.md and `docs/*.md` cannot go stale.
//!
//! Every `sh` code block of those files is read line by line; a line that calls `axle` (or
//! `cargo run --release --`, read as `axle`) is checked in one of two ways:
//!
//! - **Cheap commands run.** `axle list`, `axle config`, anything with `--help`, and `axle run`
//!   or `axle eval` at `--scale small` are run, in the order of the page, in one scratch
//!   directory per page (so `axle config > my.toml` makes the file a later `--config my.toml`
//!   reads), with `/tmp/` paths moved into that directory. Each must exit with status 0.
//! - **The others are checked against the CLI.** A paper-scale evaluation, an emulator that
//!   serves until stopped, an attached host, pipelines: their subcommand must exist and every
//!   `--flag` they use must be one that `axle <subcommand> --help` lists (or one of the few
//!   hidden flags the docs describe on purpose).
//!
//! A page whose commands all got skipped would prove nothing, so the README must have at least
//! [`README_RUNS_AT_LEAST`] commands that ran.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The README's tour has more cheap commands than this; fewer means the test lost them.
const README_RUNS_AT_LEAST: usize = 6;

/// Hidden flags the docs describe deliberately (they do not show in `--help`).
const HIDDEN_FLAGS: &[&str] = &["--stress-seed"];

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn axle() -> &'static str {
    env!("CARGO_BIN_EXE_axle")
}

/// The lines of every ```sh block of `page`, with the line number of each.
fn shell_lines(page: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(page)
        .unwrap_or_else(|error| panic!("reading {}: {error}", page.display()));
    let mut lines = Vec::new();
    let mut in_shell = false;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        if let Some(info) = trimmed.strip_prefix("```") {
            in_shell = !in_shell && (info.trim() == "sh" || info.trim() == "bash");
            continue;
        }
        if in_shell {
            lines.push((index + 1, line.to_string()));
        }
    }
    lines
}

/// The command of a line without its trailing `# comment`, with `cargo run --release --`
/// read as `axle`; `None` when the line does not call `axle`.
fn axle_command(line: &str) -> Option<String> {
    let command = match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    }
    .trim();
    let command = match command.strip_prefix("cargo run --release --") {
        Some(rest) => format!("axle{rest}"),
        None => command.to_string(),
    };
    (command == "axle" || command.starts_with("axle ")).then_some(command)
}

/// How one command line is handled.
enum Plan {
    /// Run it; `stdout_to` names the file a `>` redirect writes.
    Run {
        arguments: Vec<String>,
        stdout_to: Option<String>,
    },
    /// Only check its subcommand and flags, for this reason.
    Check {
        arguments: Vec<String>,
        reason: &'static str,
    },
}

fn plan(command: &str) -> Plan {
    let (command, stdout_to) = match command.split_once(" > ") {
        Some((left, right)) if !right.contains(' ') => (left, Some(right.to_string())),
        _ => (command, None),
    };
    let words = shlex::split(command)
        .unwrap_or_else(|| panic!("the README's command `{command}` does not parse as sh"));
    let arguments: Vec<String> = words.into_iter().skip(1).collect();
    let shell = ["|", "$(", "&&", ";", "&"];
    if shell.iter().any(|token| command.contains(token)) {
        return Plan::Check {
            arguments,
            reason: "a shell pipeline",
        };
    }
    let has = |flag: &str| arguments.iter().any(|a| a == flag);
    let small = arguments
        .windows(2)
        .any(|pair| pair[0] == "--scale" && pair[1] == "small");
    let subcommand = arguments.first().map(String::as_str).unwrap_or("");
    let cheap = has("--help")
        || has("-h")
        || matches!(subcommand, "list" | "config")
        || (matches!(subcommand, "run" | "eval") && small && !has("--attach"));
    if cheap {
        Plan::Run {
            arguments,
            stdout_to,
        }
    } else {
        let reason = match subcommand {
            "emu" => "serves until stopped",
            _ if has("--attach") => "needs a running `axle emu`",
            "bench" => "a wall-clock benchmark",
            _ => "paper scale",
        };
        Plan::Check { arguments, reason }
    }
}

/// The output of `axle <path...> --help`, or `None` when the CLI refuses it.
fn help(path: &[String]) -> Option<String> {
    let output = Command::new(axle())
        .args(path)
        .arg("--help")
        .output()
        .expect("axle runs");
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// The subcommands a `--help` text lists in its "Commands:" section.
fn subcommands_in(help: &str) -> BTreeSet<String> {
    help.lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| !line.trim().is_empty())
        .filter_map(|line| line.split_whitespace().next().map(str::to_string))
        .collect()
}

/// The subcommand path of `arguments` (`run`, `bench ring`, ...) and the flags its `--help`
/// lists; an error names what the CLI does not have.
fn check_flags(page: &Path, line: usize, arguments: &[String]) -> Result<(), String> {
    let place = format!("{}:{line}: `axle {}`", page.display(), arguments.join(" "));
    let mut path: Vec<String> = Vec::new();
    let mut text = help(&path).ok_or_else(|| format!("{place}: `axle --help` fails"))?;
    for word in arguments {
        if !subcommands_in(&text).contains(word) {
            break;
        }
        path.push(word.clone());
        text = help(&path)
            .ok_or_else(|| format!("{place}: `axle {} --help` fails", path.join(" ")))?;
    }
    if path.is_empty() {
        return Err(format!("{place}: no such subcommand"));
    }
    let listed: BTreeSet<&str> = text
        .split(|c: char| c.is_whitespace() || c == ',' || c == '[' || c == ']')
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().unwrap_or(word))
        .collect();
    for flag in arguments.iter().filter(|a| a.starts_with("--")) {
        let name = flag.split('=').next().unwrap_or(flag);
        if !listed.contains(name) && !HIDDEN_FLAGS.contains(&name) {
            return Err(format!(
                "{place} uses {name}, which `axle {} --help` does not list",
                path.join(" ")
            ));
        }
    }
    Ok(())
}

/// Runs and checks every command of `page`; returns how many ran.
fn exercise(page: &Path) -> usize {
    let scratch = std::env::temp_dir().join(format!(
        "axle-readme-{}-{}",
        std::process::id(),
        page.file_stem().and_then(|s| s.to_str()).unwrap_or("page")
    ));
    std::fs::create_dir_all(&scratch).expect("scratch directory");
    let into_scratch = |word: &str| match word.strip_prefix("/tmp/") {
        Some(rest) => scratch.join(rest).display().to_string(),
        None => word.to_string(),
    };
    let mut ran = 0;
    for (line, text) in shell_lines(page) {
        let Some(command) = axle_command(&text) else {
            continue;
        };
        match plan(&command) {
            Plan::Run {
                arguments,
                stdout_to,
            } => {
                if let Err(problem) = check_flags(page, line, &arguments) {
                    panic!("{problem}");
                }
                let arguments: Vec<String> = arguments.iter().map(|a| into_scratch(a)).collect();
                let output = Command::new(axle())
                    .args(&arguments)
                    .current_dir(&scratch)
                    .stdin(Stdio::null())
                    .output()
                    .expect("axle runs");
                assert!(
                    output.status.success(),
                    "{}:{line}: `{command}` exited with {}\n{}",
                    page.display(),
                    output.status,
                    String::from_utf8_lossy(&output.stderr)
                );
                if let Some(file) = stdout_to {
                    std::fs::write(scratch.join(into_scratch(&file)), &output.stdout)
                        .expect("writing the redirected output");
                }
                ran += 1;
            }
            Plan::Check { arguments, reason } => {
                eprintln!(
                    "{}:{line}: checked, not run ({reason}): {command}",
                    page.display()
                );
                if let Err(problem) = check_flags(page, line, &arguments) {
                    panic!("{problem}");
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    ran
}

#[test]
fn the_readme_commands_run() {
    let ran = exercise(&repository().join("README.md"));
    assert!(
        ran >= README_RUNS_AT_LEAST,
        "only {ran} README commands ran (expected at least {README_RUNS_AT_LEAST}): did the tour lose its small-scale commands?"
    );
}

#[test]
fn the_docs_commands_run_or_name_real_flags() {
    let docs = repository().join("docs");
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&docs)
        .expect("docs/ exists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    assert!(!pages.is_empty(), "no pages in docs/");
    for page in pages {
        exercise(&page);
    }
}

#[test]
fn a_stale_flag_or_subcommand_is_caught() {
    // The checker itself: what the CLI does not have must fail the check.
    let words = |line: &str| -> Vec<String> { line.split(' ').map(str::to_string).collect() };
    let check = |line: &str| check_flags(Path::new("example.md"), 1, &words(line));
    let stale = check("run knn-a --no-such-flag").expect_err("an unknown flag was accepted");
    assert!(stale.contains("--no-such-flag"), "{stale}");
    check("frobnicate --mode axle").expect_err("an unknown subcommand was accepted");
    check("bench ring --no-such-flag")
        .expect_err("an unknown flag of a nested subcommand was accepted");
    check("run knn-a --mode axle --scale small").expect("a real command was refused");
    check("bench ring --quick --json").expect("a real nested command was refused");
}
