//! One vocabulary everywhere (issue 14): busbw as nccl-tests means it, one JSON schema with `schema_version`,
//! one flag per concept with conflicts refused, binary sizes, one-line errors, ASCII tables when piped, and the
//! same no-GPU error in `run` and `verify`.

use crate::common::{golden, planner, run_ok};
use serde_json::Value;

const CALIBRATION: &str = "bench/results/calibration-cv-2026-12-01/calibration-nccl.json";
const VERIFY_RUN: &str = "bench/results/verify-h200x2-both-eager.json";
const VERIFY_RUN_GRAPH: &str = "bench/results/verify-h200x2-both-graph-1proc.json";

/// (stderr, exit code) of a command that must fail.
fn run_err(args: &[&str]) -> (String, i32) {
    let out = planner().args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    (
        String::from_utf8(out.stderr).unwrap(),
        out.status.code().unwrap_or(-1),
    )
}

/// Every command's `--json` (one per output shape), on fixtures and committed files only.
fn json_commands(tmp: &std::path::Path) -> Vec<Vec<String>> {
    let topo = golden("topo.xml");
    let log = golden("nccl-init-rank0.log");
    let plan = tmp.join("plan.json").to_string_lossy().into_owned();
    let list: Vec<Vec<&str>> = vec![
        vec!["fixtures", "--json"],
        vec!["topo", "--fixture", "hgx-h200-8", "--json"],
        vec!["channels", "--fixture", "hgx-h200-8", "--json"],
        vec![
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--size",
            "16M",
            "--json",
        ],
        vec![
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--sweep",
            "8..1M",
            "--json",
        ],
        vec![
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--nccl-table",
            "--json",
        ],
        vec![
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--nccl-calls",
            "--sweep",
            "1M..4M",
            "--json",
        ],
        vec![
            "explain",
            "--topo",
            &topo,
            "--calibration",
            CALIBRATION,
            "--size",
            "1M",
            "--json",
        ],
        vec![
            "explain",
            "--topo",
            &topo,
            "--calibration",
            CALIBRATION,
            "--sweep",
            "1M..4M",
            "--json",
        ],
        vec!["audit", &log, "--topo", &topo, "--json"],
        vec![
            "diff",
            "--fixture",
            "hgx-h200-8",
            "--nccl-version",
            "2.28",
            "--against",
            "2.30",
            "--sweep",
            "1M..4M",
            "--json",
        ],
        vec!["diff", VERIFY_RUN, VERIFY_RUN_GRAPH, "--json"],
        vec!["verify", "--load", VERIFY_RUN, "--json"],
        vec![
            "verify",
            "--load",
            VERIFY_RUN,
            "--calibration",
            CALIBRATION,
            "--json",
        ],
        vec!["calibrate", VERIFY_RUN, "--json"],
        vec!["tune", "--from", VERIFY_RUN, "-o", &plan, "--json"],
        vec!["tune", "--show", &plan, "--json"],
    ];
    list.into_iter()
        .map(|a| a.into_iter().map(String::from).collect())
        .collect()
}

/// Every key anywhere in `v`, with its path, and every string value.
fn walk<'a>(v: &'a Value, path: &str, keys: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                let p = format!("{path}.{k}");
                keys.push((p.clone(), x));
                walk(x, &p, keys);
            }
        }
        Value::Array(items) => {
            for x in items {
                walk(x, &format!("{path}[]"), keys);
            }
        }
        _ => {}
    }
}

#[test]
fn every_json_output_follows_the_schema() {
    let tmp = std::env::temp_dir().join(format!("planner-vocab-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for args in json_commands(&tmp) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = planner()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(&args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"));
        assert_eq!(v["schema_version"], 1, "{args:?}");
        let mut keys = Vec::new();
        walk(&v, "", &mut keys);
        for (path, value) in &keys {
            let key = path.rsplit('.').next().unwrap();
            assert!(!key.ends_with("_gbps"), "{args:?}: {path} (GB/s is _gbs)");
            assert!(
                !key.ends_with("_percent"),
                "{args:?}: {path} (percent is _pct)"
            );
            for old in ["algo", "proto", "coll", "function", "cpus", "bus_factor"] {
                assert_ne!(key, old, "{args:?}: {path}");
            }
            if let Value::String(s) = value {
                // A numeric string: the only strings that parse as numbers are versions and hashes.
                // (`diff` compares the machines' records, versions among them, as text.)
                let versionish = key.contains("version")
                    || path.contains(".machine[]")
                    || key.contains("family")
                    || key.contains("hash")
                    || key.contains("fnv")
                    || key == "compute_capability"
                    // `nccl_env` echoes NCCL_* variables exactly as the environment holds them (strings, as a
                    // shell's; NCCL parses them itself, "0x1" and " 1" included): docs/json.md.
                    || path.contains(".nccl_env.");
                assert!(
                    versionish || s.trim().parse::<f64>().is_err(),
                    "{args:?}: {path} = {s:?} is a number in a string"
                );
                if key == "collective" {
                    assert!(
                        [
                            "AllReduce",
                            "AllGather",
                            "ReduceScatter",
                            "Broadcast",
                            "Reduce"
                        ]
                        .contains(&s.as_str()),
                        "{args:?}: {path} = {s}"
                    );
                }
                if key.starts_with("type") {
                    assert_eq!(s, &s.to_ascii_uppercase(), "{args:?}: {path}");
                }
            }
            if let Value::Number(n) = value {
                // Floats rounded: an f32's shortest spelling (at most 9 digits) or 7 significant digits, never
                // the 17 of an f32 widened to f64 (370.79998779296875).
                if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                    let text = n.to_string();
                    let digits = text
                        .split(['e', 'E'])
                        .next()
                        .unwrap()
                        .chars()
                        .filter(char::is_ascii_digit)
                        .collect::<String>();
                    let significant = digits.trim_start_matches('0').trim_end_matches('0').len();
                    assert!(
                        significant <= 9 || f == f.trunc(),
                        "{args:?}: {path} = {text}"
                    );
                }
            }
        }
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}

#[test]
fn busbw_is_the_nccl_tests_figure_in_explain() {
    // Tree all-reduce on 8 ranks: NCCL's model converts with 2, nccl-tests' busbw is algbw x 2*7/8 = 1.75.
    let out = run_ok(&[
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--size",
        "16M",
        "--algo",
        "tree",
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let tree = &v["winner"];
    assert_eq!(tree["algorithm"], "Tree");
    let algbw = tree["algbw_gbs"].as_f64().unwrap();
    let busbw = tree["busbw_gbs"].as_f64().unwrap();
    assert!((busbw / algbw - 1.75).abs() < 1e-4, "{busbw} / {algbw}");
    assert_eq!(tree["model_bus_factor"], 2.0);
    let text = run_ok(&["explain", "--fixture", "hgx-h200-8", "--size", "16M"]);
    assert!(
        text.contains("busbw = algbw x 1.750, the AllReduce factor of nccl-tests"),
        "{text}"
    );
}

#[test]
fn conflicting_and_ignored_flags_are_refused_naming_both() {
    let log = golden("nccl-init-rank0.log");
    let cases: Vec<(Vec<&str>, [&str; 2])> = vec![
        (
            vec!["explain", "--size", "16M", "--sweep", "8..1M"],
            ["--size", "--sweep"],
        ),
        (
            vec!["explain", "--nccl-table", "--sweep", "8..1M"],
            ["--nccl-table", "--sweep"],
        ),
        (
            vec!["explain", "--nccl-table", "--size", "1M"],
            ["--nccl-table", "--size"],
        ),
        (
            vec!["verify", "--load", VERIFY_RUN, "--fixture", "hgx-h200-8"],
            ["--load", "--fixture"],
        ),
        (
            vec!["verify", "--load", VERIFY_RUN, "--sweep", "8..64"],
            ["--load", "--sweep"],
        ),
        (
            vec!["diff", VERIFY_RUN, VERIFY_RUN, "--fixture", "hgx-h200-8"],
            ["RUN.json", "--fixture"],
        ),
        (
            vec!["run", "--size", "1M", "--sweep", "8..64"],
            ["--size", "--sweep"],
        ),
        (
            vec!["explain", "--nccl-log", &log, "--nodes", "2"],
            ["--nccl-log", "--nodes"],
        ),
    ];
    for (args, flags) in cases {
        let (err, code) = run_err(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        for f in flags {
            assert!(err.contains(f), "{args:?} must name {f}: {err}");
        }
    }
    // A flag a command does not act on is not one of its flags. (`audit --nodes` is one of audit's flags since issue
    // 27; against a log that says nNodes 1 it is refused as a contradiction, tests/integration/audit_shape.rs.)
    for (args, flag) in [
        (vec!["audit", log.as_str(), "--nodes", "4"], "--nodes"),
        (vec!["fixtures", "--fixture", "hgx-h200-8"], "--fixture"),
        (vec!["topo", "--graph", "x.xml"], "--graph"),
    ] {
        let (err, code) = run_err(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains(flag) && err.contains(args[0]),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn one_flag_name_per_concept() {
    for (command, flags) in [
        (
            "explain",
            &[
                "--size",
                "--sweep",
                "--nvls <on|off>",
                "--fixture",
                "--graph",
            ][..],
        ),
        ("run", &["--size", "--sweep", "--pair"][..]),
        ("verify", &["--size", "--sweep", "--pair", "-o, --out"][..]),
        ("diff", &["--size", "--sweep", "--nvls <on|off>"][..]),
        ("channels", &["--nvls <on|off>"][..]),
        ("topo", &["-o, --out"][..]),
        ("calibrate", &["-o, --out", "--pair"][..]),
        ("tune", &["-o, --out"][..]),
    ] {
        let help = run_ok(&[command, "--help"]);
        for f in flags {
            assert!(help.contains(f), "{command} --help lacks {f}");
        }
        for old in ["--sizes", "--pairs", "--output"] {
            assert!(!help.contains(old), "{command} --help still has {old}");
        }
    }
    let help = run_ok(&["fixtures", "--help"]);
    assert!(
        !help.contains("--fixture") && !help.contains("--nodes"),
        "{help}"
    );
}

#[test]
fn sizes_are_binary_and_their_rules_explained() {
    // MiB spellings agree.
    let a = run_ok(&[
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--size",
        "16M",
        "--json",
    ]);
    for spelling in ["16Mi", "16MiB", "16777216"] {
        let b = run_ok(&[
            "explain",
            "--fixture",
            "hgx-h200-8",
            "--size",
            spelling,
            "--json",
        ]);
        assert_eq!(a, b, "{spelling}");
    }
    // Decimal spellings are refused with the binary one.
    for bad in ["16MB", "16mb"] {
        let (err, code) = run_err(&["explain", "--fixture", "hgx-h200-8", "--size", bad]);
        assert_eq!(code, 2);
        assert!(
            err.contains("binary") && err.contains("16M or 16MiB"),
            "{err}"
        );
    }
    // 3 is refused, 1001 runs as 1000: the error says both rules.
    let (err, code) = run_err(&["explain", "--fixture", "hgx-h200-8", "--size", "3"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("1001 B runs as 1000 B") && err.contains("at least 4 B"),
        "{err}"
    );
    let v: Value = serde_json::from_str(&run_ok(&[
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--size",
        "1001",
        "--json",
    ]))
    .unwrap();
    assert_eq!(v["call_bytes"], 1000);
    let (err, _) = run_err(&[
        "explain",
        "--fixture",
        "hgx-h200-8",
        "--size",
        "3",
        "--coll",
        "all-gather",
    ]);
    assert!(err.contains("at least 128 B"), "{err}");
}

#[test]
fn every_error_is_one_line() {
    for args in [
        vec!["explain", "--size", "-5"],
        vec!["explain", "--fixture", "hgx-h200-8", "--net-latency", "-1"],
        vec!["explain", "--sizes", "1M"],
        vec!["explain", "--nvls", "maybe"],
        vec![
            "verify",
            "--load",
            VERIFY_RUN,
            "--fixture",
            "x",
            "--nodes",
            "2",
        ],
        vec!["nonsense"],
    ] {
        let (err, code) = run_err(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("planner: error: "), "{args:?}: {err}");
        assert!(!err.contains("Usage:"), "{args:?}: {err}");
    }
    let (err, _) = run_err(&["explain", "--size", "-5"]);
    assert!(err.contains("'-5'") && err.contains("positive"), "{err}");
}

#[test]
fn piped_tables_are_ascii_and_labelled() {
    // stdout of a test is a pipe, not a terminal.
    for args in [
        vec!["explain", "--fixture", "hgx-h200-8", "--size", "16M"],
        vec!["verify", "--load", VERIFY_RUN],
        vec!["topo", "--fixture", "hgx-h200-8"],
        vec!["channels", "--fixture", "hgx-h200-8"],
        vec!["diff", VERIFY_RUN, VERIFY_RUN_GRAPH],
    ] {
        let out = planner()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(&args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.is_ascii(),
            "{args:?}: {:?}",
            text.chars().find(|c| !c.is_ascii())
        );
        assert!(!text.contains("µs"), "{args:?}");
    }
    let text = run_ok(&["explain", "--fixture", "hgx-h200-8", "--size", "16M"]);
    let header = text.lines().find(|l| l.contains("algorithm")).unwrap();
    assert!(header.starts_with("| pick |"), "{header}");
    // The picks table of verify fits 120 columns, with the stock model's rows too.
    for extra in [&[][..], &["--calibration", CALIBRATION][..]] {
        let out = planner()
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["verify", "--load", VERIFY_RUN])
            .args(extra)
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let picks: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("picks:"))
            .skip(1)
            .take_while(|l| l.starts_with('+') || l.starts_with('|'))
            .collect();
        assert!(picks.len() >= 5, "{text}");
        for line in picks {
            assert!(
                line.chars().count() <= 120,
                "{} columns: {line}",
                line.chars().count()
            );
            assert!(!line.contains("|  |"), "an unlabelled column: {line}");
        }
    }
}

#[test]
fn no_gpu_errors_agree_in_run_and_verify() {
    // Only on a machine without a CUDA driver (this check's own precondition, not skipped silently elsewhere).
    if planner::gpu::libs::require_driver().is_ok() {
        eprintln!("a CUDA driver is present: the no-GPU message cannot be seen here");
        return;
    }
    let (run, run_code) = run_err(&["run", "--size", "1M"]);
    let (verify, verify_code) = run_err(&["verify", "--size", "1M", "--pair", "Ring/LL"]);
    assert_eq!((run_code, verify_code), (1, 1));
    let strip = |s: &str, c: &str| s.replace(&format!("`planner {c}`"), "`planner X`");
    assert_eq!(strip(&run, "run"), strip(&verify, "verify"));
    assert!(run.starts_with("planner: error: no GPU: "), "{run}");
}
