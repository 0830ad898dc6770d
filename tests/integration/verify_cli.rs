//! `planner verify` from the outside: no GPU is a runtime error (exit 1),
//! bad flags are input errors (exit 2), and `--load` re-renders a recorded
//! file anywhere, with --json, --csv and --plot.

use crate::verify_data;

use crate::common::planner;

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn bad_flags_exit_2() {
    let cases: [(&[&str], &str); 7] = [
        (&["--size", "16Q"], "16Q"),
        (&["--coll", "alltoall"], "unknown collective 'alltoall'"),
        (&["--pair", "Ring/LL64"], "invalid pair 'Ring/LL64'"),
        (&["--backend", "mpi"], "unknown backend 'mpi'"),
        (&["--dtype", "f8"], "unknown data type 'f8'"),
        (&["--iters", "0"], "--iters 0"),
        (&["--timeout", "0"], "--timeout 0"),
    ];
    for (args, expected) in cases {
        let out = planner().arg("verify").args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(expected), "{args:?}: {}", text(&out));
    }
}

#[test]
fn no_gpu_is_a_clear_runtime_error() {
    // This test machine has no CUDA driver; on a GPU machine it is skipped.
    // SAFETY: is_culib_present only probes with dlopen.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return;
    }
    let out = planner()
        .args([
            "verify",
            "--sweep",
            "8..64",
            "--fixture",
            "h200x2-nvswitch-vm",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("no usable CUDA driver"),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains("--load"), "{}", text(&out));
}

#[test]
fn load_re_renders_a_recorded_file() {
    let dir = std::env::temp_dir().join(format!("planner-verify-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("recorded.json");
    verify_data::recorded_run()
        .save(file.to_str().unwrap())
        .unwrap();
    let csv = dir.join("rows.csv");
    let svg = dir.join("plot.svg");
    let out = planner()
        .args(["verify", "--load", file.to_str().unwrap()])
        .args([
            "--csv",
            csv.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    // the machine line, the NCCL table, the marks and the summaries
    assert!(t.contains("2 x NVIDIA H200 (sm 9.0)"), "{t}");
    assert!(t.contains("NCCL 2.28.3"), "{t}");
    assert!(t.contains("auto = Ring/Simple [0..23]"), "{t}");
    assert!(t.contains("model pick (+33.3% slower)"), "{t}");
    assert!(t.contains("2/3 (67%)"), "{t}");
    assert!(t.contains("+33.3% at 1 MiB"), "{t}");
    assert!(
        t.contains("worst regret at 1 MiB: the model picked Ring/LL, the best was Ring/Simple"),
        "{t}"
    );
    assert!(t.contains("NCCL refuses it: ncclInvalidUsage"), "{t}");
    // CSV: a header and one line per row (17 rows)
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), 18);
    assert!(
        csv_text
            .lines()
            .any(|l| l.starts_with("nccl,Ring/Simple,1048576,ok,20,3,30,31,,39,30")),
        "{csv_text}"
    );
    // SVG: a panel per pair, measured per backend and the prediction in the legend
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        svg_text.starts_with("<svg"),
        "{}",
        &svg_text[..100.min(svg_text.len())]
    );
    for label in [
        "\nRing/LL\n",
        "\nRing/Simple\n",
        "NCCL (measured)",
        "model&apos;s prediction",
    ] {
        assert!(svg_text.contains(label), "{label}");
    }

    let json = planner()
        .args(["verify", "--load", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(json.status.success(), "{}", text(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["summaries"][1]["backend"], "nccl");
    assert_eq!(v["summaries"][1]["hits"], 2);
    assert_eq!(v["machine"]["nccl_version"], "2.28.3");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn load_of_a_missing_or_foreign_file_exits_2() {
    let out = planner()
        .args(["verify", "--load", "/nonexistent/x.json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("/nonexistent/x.json"));
}

/// A verify whose NCCL child crashed exits 1 (a runtime failure), and the result file keeps the sizes measured
/// before the crash (the fake backend's child aborts after 1 size: `PLANNER_FAKE_FAULT=crash:1`).
#[test]
fn a_crashed_nccl_child_exits_1_and_keeps_the_file() {
    let dir = std::env::temp_dir().join(format!("planner-verify-crash-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("crash.json");
    let mut cmd = planner();
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("NCCL_") {
            cmd.env_remove(var);
        }
    }
    let out = cmd
        .env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DELAY_MS", "1")
        .env("PLANNER_FAKE_FAULT", "crash:1")
        .args([
            "verify",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--backend",
            "nccl",
            "--pair",
            "Ring/LL",
            "--sweep",
            "1K..4K",
            "--out",
        ])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("the run stopped early (child crashed: "),
        "{stderr}"
    );
    let kept: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept["complete"], false);
    assert_eq!(kept["stopped"]["reason"], "child_crashed");
    let _ = std::fs::remove_dir_all(&dir);
}
