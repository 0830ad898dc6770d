//! `planner doctor` on the fake backend (PLANNER_FAKE_BACKEND=1, PLANNER_FAKE_DOCTOR=SCENARIO): four H100 SXM on
//! NVSwitch whose figures sit at 97 % of their expectation unless the scenario degrades them. Each scenario's
//! verdict names its cause; the result file re-renders with --load; bad files and flags are one line, exit 2.

use crate::common::{assert_exit, json_of, planner};
use std::process::Output;

fn doctor(scenario: &str, extra: &[&str]) -> Output {
    planner()
        .args(["doctor", "--repeats", "2", "--timeout", "1"])
        .args(extra)
        .env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DOCTOR", scenario)
        .output()
        .unwrap()
}

/// The verdict's findings as (severity, cause).
fn findings(json: &serde_json::Value) -> Vec<(String, String)> {
    json["verdict"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_string(),
                f["cause"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn culprits(json: &serde_json::Value) -> Vec<String> {
    findings(json)
        .into_iter()
        .filter(|(s, _)| s == "culprit")
        .map(|(_, c)| c)
        .collect()
}

#[test]
fn a_healthy_machine_is_healthy() {
    let out = doctor("healthy", &["--json"]);
    assert_exit(&out, 0);
    let json = json_of(&out);
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["format"], "planner-doctor");
    assert_eq!(json["verdict"]["summary"], "healthy");
    assert!(culprits(&json).is_empty(), "{:?}", findings(&json));
    // 4 GPUs: 3 host tests each, 4 one-way tests per ordered pair (12) and 4 two-way tests per pair (6).
    assert_eq!(
        json["links"].as_array().unwrap().len(),
        4 * 3 + 4 * 12 + 4 * 6
    );
    assert_eq!(json["verdict"]["figures_slow"], 0);
    // Host to device beside the H200 run's Gen5 x16 figure: 54.5 GB/s expected, 97 % of it measured.
    let h2d = &json["links"][0];
    assert_eq!(h2d["test"], "host_to_device_memcpy_ce");
    let expected = h2d["figure"]["expected_gbs"].as_f64().unwrap();
    assert!((expected - 54.5).abs() < 0.05, "{expected}");
    assert_eq!(h2d["figure"]["status"], "ok");
    // NVLink 4 through NVSwitch: 0.8649 x 25 GB/s x 18 links = 389.2 GB/s.
    let peer = json["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["test"] == "device_to_device_memcpy_write_ce")
        .unwrap();
    let expected = peer["figure"]["expected_gbs"].as_f64().unwrap();
    assert!((expected - 389.2).abs() < 0.1, "{expected}");
}

#[test]
fn a_degraded_pcie_link_is_named_and_explains_the_slow_copies() {
    let out = doctor("pcie-degraded", &["--json"]);
    assert_exit(&out, 1);
    let json = json_of(&out);
    assert_eq!(json["verdict"]["summary"], "unhealthy");
    assert_eq!(
        culprits(&json),
        vec!["GPU 2: PCIe link trained at Gen4 x8 of Gen5 x16".to_string()],
        "the three slow host copies of GPU 2 are explained by the link, not listed apart"
    );
    assert_eq!(json["verdict"]["figures_slow"], 3);
    let evidence = json["verdict"]["findings"][0]["evidence"].to_string();
    assert!(evidence.contains("read under load"), "{evidence}");
    assert!(
        evidence.contains("host -> GPU 2: 13.2 GB/s measured, 54.5 expected (24 %)"),
        "{evidence}"
    );
}

#[test]
fn an_nvlink_down_is_counted() {
    let out = doctor("nvlink-down", &["--json"]);
    assert_exit(&out, 1);
    let json = json_of(&out);
    assert_eq!(
        culprits(&json),
        vec!["GPU 1: NVLink 3 of 18 down".to_string()]
    );
    // GPU 1 takes part in 4 x 6 one-way tests and 4 x 3 two-way ones, each at 15/18 x 97 % = 81 % of expected.
    assert_eq!(json["verdict"]["figures_slow"], 24 + 12);
    let evidence = json["verdict"]["findings"][0]["evidence"][0]
        .as_str()
        .unwrap();
    assert_eq!(evidence, "NVML: links 4, 9, 13 inactive, 15 active");
}

#[test]
fn a_throttled_gpu_is_named_with_its_reason() {
    let out = doctor("throttled", &["--json"]);
    assert_exit(&out, 1);
    let json = json_of(&out);
    assert_eq!(
        culprits(&json),
        vec!["GPU 2 throttled: HW slowdown".to_string()]
    );
    let evidence = json["verdict"]["findings"][0]["evidence"].to_string();
    assert!(
        evidence.contains("SM clock 990 MHz of 1980 MHz"),
        "{evidence}"
    );
    // Only the SM-kernel copies slow down (the copy engines do not run on the SM clock): 2 x 6 + 2 x 3.
    assert_eq!(json["verdict"]["figures_slow"], 18);
}

#[test]
fn a_refused_p2p_pair_is_named_once() {
    let out = doctor("p2p-refused", &["--json"]);
    assert_exit(&out, 1);
    let json = json_of(&out);
    assert_eq!(
        culprits(&json),
        vec!["P2P refused between GPU 0 and 1".to_string()]
    );
    let refused = json["links"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["status"] == "refused")
        .count();
    // Both directions of the 4 one-way tests and the 4 two-way tests.
    assert_eq!(refused, 8 + 4);
}

#[test]
fn a_hung_copy_trips_the_watchdog_and_the_file_keeps_what_was_measured() {
    let dir = tempdir("hang");
    let file = dir.join("doctor.json");
    let started = std::time::Instant::now();
    let out = doctor("hang", &["-o", file.to_str().unwrap()]);
    assert_exit(&out, 1);
    assert!(
        started.elapsed().as_secs() < 20,
        "the watchdog (1 s) did not fire"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "GPU 0: copy hung (device_to_host_memcpy_ce GPU 0 -> host did not finish within 1 s)"
        ),
        "{text}"
    );
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved["complete"], false);
    assert_eq!(
        saved["links"][0]["status"], "ok",
        "the test before the hang is kept"
    );
    assert_eq!(saved["links"][1]["status"], "hung");
    assert_eq!(saved["links"][2]["status"], "not_run");
    assert!(
        saved["nccl"].as_array().unwrap().is_empty(),
        "no NCCL sweep after a hang"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_gpu_lost_mid_run_is_the_cause_and_its_later_tests_are_skipped() {
    let out = doctor("lost", &["--json", "--no-nccl"]);
    assert_exit(&out, 1);
    let json = json_of(&out);
    let causes = culprits(&json);
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert!(
        causes[0].starts_with("GPU 3: device_to_host_memcpy_ce GPU 3 -> host failed"),
        "{causes:?}"
    );
    let links = json["links"].as_array().unwrap();
    let skipped = links
        .iter()
        .filter(|l| l["status"] == "not_run")
        .filter(|l| {
            l["note"]
                .as_str()
                .unwrap()
                .contains("GPU 3 failed an earlier test")
        })
        .count();
    // GPU 3's bidirectional host test and its 4 x 6 one-way and 4 x 3 two-way peer tests.
    assert_eq!(skipped, 1 + 24 + 12);
}

#[test]
fn counters_a_vm_does_not_report_say_not_reported_never_zero() {
    let out = doctor("vm", &[]);
    assert_exit(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("not reported"), "{text}");
    assert!(!text.contains("0 errors"), "{text}");
    assert!(
        text.contains("GPU 0: not reported by NVML (a VM or an older driver?): throttle reasons, ECC error counts, PCIe replay counter"),
        "{text}"
    );
    assert!(text.contains("one rank: no link is crossed"), "{text}");
    assert!(text.contains("Verdict: healthy"), "{text}");
}

#[test]
fn a_saved_run_re_renders_the_same_anywhere() {
    let dir = tempdir("load");
    let file = dir.join("doctor.json");
    let live = doctor("nvlink-down", &["-o", file.to_str().unwrap()]);
    assert_exit(&live, 1);
    let loaded = planner()
        .args(["doctor", "--load", file.to_str().unwrap()])
        .output()
        .unwrap();
    assert_exit(&loaded, 1);
    assert_eq!(
        String::from_utf8_lossy(&loaded.stdout),
        String::from_utf8_lossy(&live.stdout)
    );
    // The library reader (`check` uses it) gives the same verdict.
    let run = planner::doctor::DoctorRun::load(file.to_str().unwrap()).unwrap();
    assert_eq!(
        run.verdict.unwrap().findings[0].cause,
        "GPU 1: NVLink 3 of 18 down"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_files_and_settings_are_one_line_exit_2() {
    let dir = tempdir("bad");
    let good = dir.join("good.json");
    assert_exit(&doctor("healthy", &["-o", good.to_str().unwrap()]), 0);
    let text = std::fs::read_to_string(&good).unwrap();
    let cases = [
        (
            "notjson.json",
            "{".to_string(),
            "not a planner doctor result file",
        ),
        (
            "format.json",
            text.replacen("\"planner-doctor\"", "\"planner-verify\"", 1),
            "format is \"planner-verify\"",
        ),
        (
            "negative.json",
            text.replacen("\"times_ms\": [\n", "\"times_ms\": [\n -1.0,\n", 1),
            "links[0] (host_to_device_memcpy_ce host -> GPU 0): time -1 ms is not positive",
        ),
        (
            "gpu.json",
            text.replacen("\"gpu\": 0,", "\"gpu\": 7,", 1),
            "GPU 7 / peer None is not a GPU of the file's 4",
        ),
    ];
    for (name, body, expected) in cases {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        let out = planner()
            .args(["doctor", "--load", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_exit(&out, 2);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(expected), "{name}: {err}");
    }
    let out = doctor("bogus", &[]);
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("PLANNER_FAKE_DOCTOR=bogus: expected one of healthy"));
    let out = doctor("healthy", &["--size", "12K"]);
    assert_exit(&out, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_gpu_doctor_says_so_in_one_line() {
    if planner::gpu::libs::require_driver().is_ok() {
        return; // a machine with a CUDA driver: nothing to check here
    }
    let out = planner().args(["doctor"]).output().unwrap();
    assert_exit(&out, 1);
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("planner: error: no GPU: "), "{err}");
}

#[test]
fn an_interrupted_run_keeps_what_it_measured() {
    let dir = tempdir("sigint");
    let file = dir.join("doctor.json");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("planner"))
        .args(["doctor", "--repeats", "2", "-o", file.to_str().unwrap()])
        .env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DELAY_MS", "20")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Signal once the result file holds a finished link test (it is rewritten, atomically, after every test), not
    // after a fixed sleep.
    let start = std::time::Instant::now();
    let tests_in = |file: &std::path::Path| -> usize {
        std::fs::read_to_string(file)
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .and_then(|v| v["links"].as_array().map(|a| a.len()))
            .unwrap_or(0)
    };
    while tests_in(&file) == 0 {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(60),
            "no link test saved in {} after 60 s",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // SAFETY: sends SIGINT to the child we started (its pid), nothing else.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    // Exits as verify does after Ctrl-C: 128 + SIGINT.
    assert_exit(&out, 130);
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(saved["complete"], false);
    let stopped = saved["stopped"].as_str().unwrap();
    assert!(
        stopped.starts_with("stopped by SIGINT (Ctrl-C) after "),
        "{stopped}"
    );
    let ran = saved["links"].as_array().unwrap().len();
    assert!(ran > 0 && ran < 84, "{ran} tests kept");
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Incomplete: stopped by SIGINT"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempdir(what: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("planner-doctor-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The README's quoted lines of the committed H200 run.
#[test]
fn the_readme_quotes_the_committed_h200_run() {
    let file = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/bench/results/doctor-2026-12-01-h200/doctor-h200.json"
    );
    let out = planner().args(["doctor", "--load", file]).output().unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8(out.stdout).unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme.find("### planner doctor").unwrap()..];
    let quoted = &section[section.find("```\n$ planner doctor --load").unwrap()..];
    let quoted = &quoted[..quoted[4..].find("```").unwrap()];
    for line in quoted
        .lines()
        .skip(2)
        .filter(|l| *l != "..." && !l.is_empty())
    {
        assert!(
            text.contains(line),
            "README line not in the output: {line}\n{text}"
        );
    }
}
