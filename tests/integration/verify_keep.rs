//! Measurements are never lost (issue 15, item 3): `planner verify` rewrites its result file after
//! every finished size, so Ctrl-C, a crashed or hanging NCCL child, or a killed planner leaves a
//! file that `--load` reads, marked incomplete. CPU only: the hidden fake backend
//! (PLANNER_FAKE_BACKEND=1) stands in for both executors; its NCCL side runs in real children.

use crate::common::planner;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A fresh directory `name` in this test's scratch directory.
fn dir(name: &str) -> PathBuf {
    crate::common::with_scratch(|s| s.subdir(name))
}

/// `planner verify` on the fake backend, NCCL only, Ring/LL pinned plus NCCL's free choice.
fn fake_verify(out: &Path, sizes: &str, delay_ms: u64, fault: Option<&str>) -> Command {
    fake_verify_with_timeout(out, sizes, delay_ms, fault, 2)
}

/// `fake_verify` with its `--timeout` (seconds a child may go without reporting a size).
fn fake_verify_with_timeout(
    out: &Path,
    sizes: &str,
    delay_ms: u64,
    fault: Option<&str>,
    timeout_s: u64,
) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin!("planner"));
    for (var, _) in std::env::vars_os() {
        if var.to_string_lossy().starts_with("NCCL_") {
            cmd.env_remove(var);
        }
    }
    cmd.env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DELAY_MS", delay_ms.to_string())
        .env_remove("PLANNER_FAKE_FAULT")
        .args([
            "verify",
            "--fixture",
            "h200x2-nvswitch-vm",
            "--backend",
            "nccl",
        ])
        .args([
            "--pair",
            "Ring/LL",
            // `sizes` is one size or a range LO..HI.
            if sizes.contains("..") {
                "--sweep"
            } else {
                "--size"
            },
            sizes,
            "--timeout",
        ])
        .arg(timeout_s.to_string())
        .arg("--out")
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if let Some(f) = fault {
        cmd.env("PLANNER_FAKE_FAULT", f);
    }
    cmd
}

fn read(path: &Path) -> Option<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

fn ok_rows(file: &Value) -> usize {
    file["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "ok")
        .count()
}

/// Wait until the file holds at least `n` measured rows; every version read must parse.
fn wait_rows(path: &Path, n: usize, child: &mut Child) -> Value {
    let start = Instant::now();
    loop {
        if let Some(file) = read(path) {
            if ok_rows(&file) >= n {
                return file;
            }
        } else if path.exists() {
            // Written through a temporary file and a rename: never half a document.
            let text = std::fs::read_to_string(path).unwrap_or_default();
            assert!(
                text.is_empty(),
                "unparsable result file while running: {text:.200}"
            );
        }
        assert!(child.try_wait().unwrap().is_none(), "planner ended early");
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {n} rows after 60 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Wait until every thread of `child` is asleep (state S in /proc) at 5 looks in a row, 20 ms apart.
fn wait_asleep(child: &Child) {
    let tasks = format!("/proc/{}/task", child.id());
    let all_asleep = || {
        let Ok(entries) = std::fs::read_dir(&tasks) else {
            return false;
        };
        entries.flatten().all(|task| {
            let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
            // pid (comm) STATE ...: the command name may hold spaces or parentheses, the state follows the last ')'.
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('S'))
        })
    };
    let start = Instant::now();
    let mut in_a_row = 0;
    while in_a_row < 5 {
        in_a_row = if all_asleep() { in_a_row + 1 } else { 0 };
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "planner never slept"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid; no memory is involved.
    let rc = unsafe { libc::kill(child.id() as i32, sig) };
    assert_eq!(rc, 0);
}

fn wait_exit(child: &mut Child, limit: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            use std::io::Read;
            child
                .stderr
                .take()
                .unwrap()
                .read_to_string(&mut err)
                .unwrap();
            return (status.code(), err);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("planner still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn load(path: &Path) -> (Option<i32>, String, String) {
    let out = planner()
        .args(["verify", "--load"])
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_finished_run_is_complete_and_loads_without_a_note() {
    let d = dir("complete");
    let out = d.join("run.json");
    let mut child = fake_verify(&out, "1K..4K", 5, None).spawn().unwrap();
    let (code, err) = wait_exit(&mut child, Duration::from_secs(60));
    assert_eq!(code, Some(0), "{err}");
    let file = read(&out).unwrap();
    assert_eq!(file["complete"], true);
    assert!(file.get("stopped").is_none());
    // 3 sizes x (Ring/LL, auto); fake times with 5 repeats: a max, no p99 below 100 samples
    assert_eq!(ok_rows(&file), 6);
    let row = &file["rows"][0];
    assert_eq!(row["times_us"].as_array().unwrap().len(), 5);
    assert!(row["max_us"].as_f64().unwrap() >= row["median_us"].as_f64().unwrap());
    assert!(row.get("p99_us").is_none(), "{row}");
    assert!(!d.join("run.json.tmp").exists());
    let (code, stdout, stderr) = load(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains("incomplete"), "{stderr}");
    assert!(stdout.contains("max us"), "{stdout}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn ctrl_c_after_some_sizes_keeps_them_marks_the_file_and_exits_130() {
    let d = dir("sigint");
    let out = d.join("run.json");
    // 11 sizes x 3 NCCL jobs, 100 ms each: more than 3 s of work.
    let mut child = fake_verify(&out, "1K..1M", 100, None).spawn().unwrap();
    let during = wait_rows(&out, 3, &mut child);
    assert_eq!(
        during["complete"], false,
        "the file says incomplete while running"
    );
    signal(&child, libc::SIGINT);
    let (code, err) = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("stopping after the current size"), "{err}");
    let file = read(&out).unwrap();
    assert_eq!(file["complete"], false);
    assert_eq!(file["stopped"]["reason"], "interrupted");
    let kept = ok_rows(&file);
    assert!((3..33).contains(&kept), "{kept} rows kept");
    // Only measured sizes are rows: nothing made up for the sizes never run.
    assert!(file["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["status"] == "ok"));
    let (code, _, stderr) = load(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("incomplete run (interrupted: ") && stderr.contains("sizes measured: "),
        "{stderr}"
    );
    assert!(stderr.contains("1 KiB, 2 KiB, 4 KiB"), "{stderr}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_second_ctrl_c_exits_at_once_with_the_file_valid() {
    let d = dir("sigint2");
    let out = d.join("run.json");
    // Deterministic under any load: the NCCL child reports its first size, then hangs (it would be killed only
    // by the 120 s --timeout), so once that size is in the file the first Ctrl-C can only wait: the size in
    // progress never finishes. Only the second Ctrl-C can end the run, and it must end it before the timeout.
    let mut child = fake_verify_with_timeout(&out, "1K..1M", 5, Some("hang:1"), 120)
        .spawn()
        .unwrap();
    wait_rows(&out, 1, &mut child);
    // The row is in the file before planner asks whether to stop after that size: a signal in between stops the
    // run there, correctly. So the first Ctrl-C waits until every thread of planner sleeps (waiting on the hung
    // child), which it does only past that question.
    wait_asleep(&child);
    signal(&child, libc::SIGINT);
    // The first signal is taken (its message is written) before the second is sent: the handler that reads the
    // second one is then the one that exits at once.
    std::thread::sleep(Duration::from_millis(200));
    if let Some(status) = child.try_wait().unwrap() {
        let (_, err) = wait_exit(&mut child, Duration::from_secs(1));
        panic!(
            "planner ended on the first Ctrl-C ({status}): {err}; file: {:?}",
            read(&out)
        );
    }
    signal(&child, libc::SIGINT);
    let start = Instant::now();
    let (code, err) = wait_exit(&mut child, Duration::from_secs(100));
    // Far below the child's 120 s timeout, the only other way this run could end.
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("stopping after the current size"), "{err}");
    // The file holds the finished size; it was never closed, so it says nothing of why.
    let file = read(&out).unwrap();
    assert_eq!(file["complete"], false);
    assert!(file.get("stopped").is_none(), "{}", file["stopped"]);
    assert_eq!(ok_rows(&file), 1);
    let (code, _, stderr) = load(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("without saying why"), "{stderr}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_killed_planner_leaves_a_valid_incomplete_file() {
    let d = dir("sigkill");
    let out = d.join("run.json");
    let mut child = fake_verify(&out, "1K..1M", 50, None).spawn().unwrap();
    wait_rows(&out, 4, &mut child);
    child.kill().unwrap(); // SIGKILL: no handler runs
    let _ = wait_exit(&mut child, Duration::from_secs(10));
    let file = read(&out).expect("a complete JSON document");
    assert_eq!(file["complete"], false);
    assert!(ok_rows(&file) >= 4);
    let (code, _, stderr) = load(&out);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("incomplete run (it ended without saying why"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_crashed_or_hanging_child_is_recorded_as_the_reason() {
    for (fault, reason, says) in [
        (
            "crash:2",
            "child_crashed",
            "child crashed: nccl Ring/LL: the child ended (signal: 6",
        ),
        (
            "hang:2",
            "timeout",
            "timeout: nccl Ring/LL: no result within --timeout 2 s at 4 KiB",
        ),
    ] {
        let d = dir(reason);
        let out = d.join("run.json");
        let mut child = fake_verify(&out, "1K..16K", 5, Some(fault))
            .spawn()
            .unwrap();
        let (code, err) = wait_exit(&mut child, Duration::from_secs(60));
        // A runtime failure: exit 1, the file kept (issue 26).
        assert_eq!(code, Some(1), "{fault}: {err}");
        assert!(err.contains("the run stopped early"), "{fault}: {err}");
        let file = read(&out).unwrap();
        assert_eq!(file["complete"], false, "{fault}");
        assert_eq!(file["stopped"]["reason"], reason, "{fault}");
        // Each child reported 1 and 2 KiB before the fault: Ring/LL and auto rows.
        assert_eq!(ok_rows(&file), 4, "{fault}");
        let (code, _, stderr) = load(&out);
        assert_eq!(code, Some(0), "{stderr}");
        assert!(stderr.contains(says), "{fault}: {stderr}");
        assert!(
            stderr.contains("sizes measured: 2 of 5: 1 KiB, 2 KiB"),
            "{stderr}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }
}

#[test]
fn a_bad_fake_setting_is_bad_input() {
    let d = dir("badfake");
    let out = d.join("run.json");
    let mut child = fake_verify(&out, "1K", 5, Some("explode:1"))
        .spawn()
        .unwrap();
    let (code, err) = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("PLANNER_FAKE_FAULT=explode:1"), "{err}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn committed_files_load_as_complete_and_their_p99_becomes_max() {
    let path = format!(
        "{}/bench/results/verify-h200x2-final-2026-11-30/verify.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(raw.get("complete").is_none(), "an old file");
    let old = &raw["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["status"] == "ok")
        .unwrap()
        .clone();
    assert!(old["p99_us"].is_number(), "old files carry p99_us");
    let out = planner()
        .args(["verify", "--load", &path, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("incomplete"));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report.get("complete").is_none() && report.get("stopped").is_none());
    let rows = report["rows"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| {
            // The file keeps its own keys (algo/proto); --json prints the schema's (algorithm/protocol).
            r["bytes"] == old["bytes"]
                && r["backend"] == old["backend"]
                && r["pair"]["algorithm"] == old["pair"]["algo"]
                && r["pair"]["protocol"] == old["pair"]["proto"]
        })
        .unwrap();
    // 5 repeats: the old "p99" was the slowest repeat; it is now called max_us.
    let slowest = old["times_us"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(old["p99_us"].as_f64(), Some(slowest));
    // --json prints the f32 CUDA-event time at its shortest (5.976, not 5.976000055670738).
    assert_eq!(
        row["max_us"].as_f64(),
        Some(planner::report::json::round_float(slowest)),
        "{row}"
    );
    assert!(row.get("p99_us").is_none(), "{row}");
}

#[test]
fn a_partial_file_round_trips_with_its_reason() {
    use planner::result_file::{StopReason, Stopped};
    use planner::verify::keep::incomplete_line;
    let mut run = crate::verify_data::recorded_run();
    assert_eq!(incomplete_line(&run), None);
    run.rows.retain(|r| r.bytes == 1024);
    run.complete = false;
    run.stopped = Some(Stopped {
        reason: StopReason::RankLost,
        detail: "during nccl Ring/LL: rank 1 closed the connection".into(),
    });
    let d = dir("partial");
    let path = d.join("partial.json");
    run.save(path.to_str().unwrap()).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("\"complete\": false"));
    assert!(text.contains("\"reason\": \"rank_lost\""));
    let back = planner::result_file::VerifyRun::load(path.to_str().unwrap()).unwrap();
    assert_eq!(back, run);
    // recorded_run measures 1 KiB, 1 MiB and 64 MiB
    assert_eq!(
        incomplete_line(&back).unwrap(),
        "incomplete run (rank lost: during nccl Ring/LL: rank 1 closed the connection); \
         sizes measured: 1 of 3: 1 KiB"
    );
    let (code, stdout, stderr) = load(&path);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains("incomplete run (rank lost"), "{stderr}");
    assert!(stdout.contains("1 KiB"), "{stdout}");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn an_interrupted_file_never_says_every_size_was_measured() {
    use planner::result_file::{StopReason, Stopped};
    use planner::verify::keep::incomplete_line;
    let mut run = crate::verify_data::recorded_run();
    run.complete = false;
    run.stopped = Some(Stopped {
        reason: StopReason::Interrupted,
        detail: "SIGHUP (terminal or ssh connection closed)".into(),
    });
    // Every size has rows, but the run stopped: it does not say "3 of 3".
    let line = incomplete_line(&run).unwrap();
    assert!(!line.contains("3 of 3"), "{line}");
    assert!(line.contains("stopped before its end"), "{line}");
    // Only the sizes that have an ok row count when some are missing.
    run.rows.retain(|r| r.bytes != 64 * crate::verify_data::MIB);
    let line = incomplete_line(&run).unwrap();
    assert!(
        line.ends_with("sizes measured: 2 of 3: 1 KiB, 1 MiB"),
        "{line}"
    );
}

#[test]
fn sighup_a_dropped_ssh_connection_stops_like_sigterm() {
    let d = dir("sighup");
    let out = d.join("run.json");
    let mut child = fake_verify(&out, "1K..1M", 100, None).spawn().unwrap();
    wait_rows(&out, 2, &mut child);
    signal(&child, libc::SIGHUP);
    let (code, err) = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(128 + libc::SIGHUP), "{err}");
    let file = read(&out).unwrap();
    assert_eq!(file["complete"], false);
    assert_eq!(file["stopped"]["reason"], "interrupted");
    assert!(
        file["stopped"]["detail"]
            .as_str()
            .unwrap()
            .contains("SIGHUP"),
        "{}",
        file["stopped"]
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn sigterm_stops_the_same_way_with_143() {
    let d = dir("sigterm");
    let out = d.join("run.json");
    let mut child = fake_verify(&out, "1K..1M", 100, None).spawn().unwrap();
    wait_rows(&out, 2, &mut child);
    signal(&child, libc::SIGTERM); // what `timeout` sends
    let (code, err) = wait_exit(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(143), "{err}");
    let file = read(&out).unwrap();
    assert_eq!(file["stopped"]["reason"], "interrupted");
    assert!(
        file["stopped"]["detail"]
            .as_str()
            .unwrap()
            .contains("SIGTERM"),
        "{}",
        file["stopped"]
    );
    // --json of an incomplete file says so; of a complete one nothing changes (no key).
    let report = planner()
        .args(["verify", "--json", "--load"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(report.status.success());
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["complete"], false);
    assert_eq!(report["stopped"]["reason"], "interrupted");
    let _ = std::fs::remove_dir_all(&d);
}
