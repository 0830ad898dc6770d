//! Every output README.md quotes comes from running the command here, so the README cannot drift from the binary
//! (issue 26: the calibration example's crossovers had).
//!
//! Two markers, each an HTML comment on a line of its own (invisible in the rendered README):
//!
//! * `<!-- readme-output -->` before a fenced block whose first line is `$ [VAR=value ...] planner ARGS`: the rest
//!   of the block is that command's stdout, exactly; a line `...` elides output, and then the quoted lines must
//!   appear in the output in order, each equal to an output line. `<!-- readme-output: exit=N -->` expects exit N
//!   (default 0). `<!-- readme-output: planner A; planner B -->` before a block without a `$` line: A runs first
//!   (setup, must succeed), the block quotes B.
//! * `<!-- readme-quotes: planner A; planner B => QUOTE | QUOTE -->` before a paragraph: each QUOTE is in B's stdout
//!   and in the paragraph (up to the next blank line, whitespace joined), so prose numbers are the printed ones.
//!
//! Commands run in one scratch directory (setup files such as `cal.json` stay for later markers) that links the
//! repository's `bench`, `tests`, `fixtures` and `tuning-tables`, with a clean NCCL environment; stdout is a pipe,
//! so tables are plain ASCII, as the README says they are.

use crate::common::planner;
use std::path::{Path, PathBuf};

const README: &str = include_str!("../../README.md");

/// One marker and what it checks.
#[derive(Debug)]
struct Check {
    /// 1-based README line of the marker.
    line: usize,
    /// Commands before the checked one.
    setup: Vec<String>,
    command: String,
    exit: i32,
    what: Quoted,
}

#[derive(Debug)]
enum Quoted {
    /// A fenced block: the lines quoted (with `...` elisions).
    Block(Vec<String>),
    /// Strings of the paragraph after the marker.
    Quotes(Vec<String>),
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("planner-readme-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for link in ["bench", "tests", "fixtures", "tuning-tables"] {
        std::os::unix::fs::symlink(root.join(link), dir.join(link)).unwrap();
    }
    dir
}

/// The marker's body after `readme-output`/`readme-quotes`, without the comment's ends.
fn marker_body<'a>(line: &'a str, kind: &str) -> Option<&'a str> {
    let body = line
        .trim()
        .strip_prefix("<!-- ")?
        .strip_suffix(" -->")?
        .strip_prefix(kind)?;
    Some(body.strip_prefix(':').unwrap_or(body).trim())
}

fn commands(text: &str) -> Vec<String> {
    text.split(';')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// Every marker of the README, parsed.
fn checks() -> Vec<Check> {
    let lines: Vec<&str> = README.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(body) = marker_body(line, "readme-output") {
            let (exit, setup) = match body.strip_prefix("exit=") {
                Some(rest) => {
                    let (n, rest) = rest.split_once(' ').unwrap_or((rest, ""));
                    (n.parse().expect("exit=N"), rest)
                }
                None => (0, body),
            };
            let mut setup = commands(setup);
            let fence = lines[i + 1..]
                .iter()
                .position(|l| !l.trim().is_empty())
                .map(|p| i + 1 + p)
                .expect("a block after the marker");
            assert_eq!(
                lines[fence].trim(),
                "```",
                "README.md:{}: no fenced block after the marker",
                i + 1
            );
            let end = lines[fence + 1..]
                .iter()
                .position(|l| l.trim() == "```")
                .map(|p| fence + 1 + p)
                .expect("the block's end");
            let mut block: Vec<String> = lines[fence + 1..end]
                .iter()
                .map(|l| l.to_string())
                .collect();
            let command = if block.first().is_some_and(|l| l.starts_with("$ ")) {
                block.remove(0)[2..].to_string()
            } else {
                setup
                    .pop()
                    .expect("readme-output without a $ line names its command")
            };
            out.push(Check {
                line: i + 1,
                setup,
                command,
                exit,
                what: Quoted::Block(block),
            });
        } else if let Some(body) = marker_body(line, "readme-quotes") {
            let (cmds, quotes) = body
                .split_once("=>")
                .expect("readme-quotes: COMMANDS => QUOTES");
            let mut setup = commands(cmds);
            let command = setup.pop().expect("a command");
            let quotes: Vec<String> = quotes.split(" | ").map(|q| q.trim().to_string()).collect();
            let paragraph: Vec<&str> = lines[i + 1..]
                .iter()
                .take_while(|l| !l.trim().is_empty())
                .map(|l| l.trim())
                .collect();
            let paragraph = paragraph.join(" ");
            for q in &quotes {
                assert!(
                    paragraph.contains(q.as_str()),
                    "README.md:{}: the quote '{q}' is not in the paragraph after the marker: {paragraph}",
                    i + 1
                );
            }
            out.push(Check {
                line: i + 1,
                setup,
                command,
                exit: 0,
                what: Quoted::Quotes(quotes),
            });
        }
    }
    out
}

/// Run `VAR=value ... planner ARGS` in `dir`: (exit code, stdout, stderr).
fn run(dir: &Path, command: &str) -> (Option<i32>, String, String) {
    let mut words = command.split_whitespace();
    let mut cmd = planner();
    cmd.current_dir(dir);
    for w in words.by_ref() {
        if w == "planner" {
            break;
        }
        let (var, value) = w
            .split_once('=')
            .unwrap_or_else(|| panic!("'{command}': expected VAR=value or planner, got '{w}'"));
        cmd.env(var, value);
    }
    let out = cmd.args(words).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The quoted lines against the output: exactly, or in order where `...` elides.
fn compare(line: usize, command: &str, quoted: &[String], stdout: &str) {
    let output: Vec<&str> = stdout.lines().map(str::trim_end).collect();
    if !quoted.iter().any(|l| l.trim() == "...") {
        let quoted: Vec<&str> = quoted.iter().map(|l| l.trim_end()).collect();
        assert_eq!(
            quoted, output,
            "README.md:{line}: `{command}` prints other lines than the README quotes"
        );
        return;
    }
    let mut at = 0;
    for q in quoted
        .iter()
        .map(|l| l.trim_end())
        .filter(|l| l.trim() != "...")
    {
        match output[at..].iter().position(|o| *o == q) {
            Some(p) => at += p + 1,
            None => panic!(
                "README.md:{line}: `{command}` does not print, in this order, the quoted line\n{q}\noutput:\n{stdout}"
            ),
        }
    }
}

#[test]
fn every_quoted_output_is_what_the_command_prints() {
    let checks = checks();
    // The examples that quote output: planner expect, check, the calibration's table, its explain lines and
    // crossovers, the symmetric kernels' bands, diff's changed band, tune's 2 MiB decision, doctor.
    assert!(checks.len() >= 9, "{} markers: {checks:?}", checks.len());
    let dir = scratch();
    for c in &checks {
        for s in &c.setup {
            let (code, _, err) = run(&dir, s);
            assert_eq!(
                code,
                Some(0),
                "README.md:{}: setup `{s}` failed: {err}",
                c.line
            );
        }
        let (code, stdout, err) = run(&dir, &c.command);
        assert_eq!(
            code,
            Some(c.exit),
            "README.md:{}: `{}`: {err}",
            c.line,
            c.command
        );
        match &c.what {
            Quoted::Block(lines) => compare(c.line, &c.command, lines, &stdout),
            Quoted::Quotes(quotes) => {
                for q in quotes {
                    assert!(
                        stdout.contains(q.as_str()),
                        "README.md:{}: `{}` does not print '{q}':\n{stdout}",
                        c.line,
                        c.command
                    );
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The markers themselves: a block without a `$` line must name its command, and `...` is the only elision.
#[test]
fn markers_parse() {
    assert_eq!(
        marker_body("<!-- readme-output -->", "readme-output"),
        Some("")
    );
    assert_eq!(
        marker_body("<!-- readme-output: exit=1 -->", "readme-output"),
        Some("exit=1")
    );
    assert_eq!(marker_body("<!-- other -->", "readme-output"), None);
    assert_eq!(
        commands("planner a b; planner c"),
        vec!["planner a b", "planner c"]
    );
    let all = checks();
    assert!(all.iter().any(|c| c.exit == 1), "the check example exits 1");
    assert!(
        all.iter().any(|c| !c.setup.is_empty()),
        "the calibration example has a setup"
    );
}
