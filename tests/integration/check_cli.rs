//! `planner check` on public nccl-tests outputs and NCCL logs with known causes (tests/data/check/, each file's
//! source and known cause in the `.source.md` beside it).

use crate::common::{assert_exit, json_of, planner};
use planner::check::{self, causes, evidence, CauseKind, MachineFacts};
use planner::nccl_env::NcclEnv;

fn data(name: &str) -> String {
    format!("{}/tests/data/check/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn check_json(args: &[&str]) -> (serde_json::Value, std::process::Output) {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let out = planner().args(&all).output().unwrap();
    (json_of(&out), out)
}

fn causes_of(v: &serde_json::Value) -> Vec<(String, bool)> {
    v["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap().to_string(),
                c["likely"].as_bool().unwrap(),
            )
        })
        .collect()
}

/// Cause: TCP sockets (NCCL_IB_DISABLE=1) between two 8x H200 nodes whose NICs are IB: 92 GB/s at 8 GiB.
#[test]
fn sockets_between_h200_nodes_are_slow_and_named() {
    let file = data("h200-2node-sockets-e09.txt");
    let (v, out) = check_json(&[
        "--fixture",
        "hgx-h200-8",
        "--nodes",
        "2",
        "--coll",
        "all-reduce",
        &file,
    ]);
    assert_exit(&out, 1);
    assert_eq!(v["verdict"], "slow");
    assert_eq!(v["exit_code"], 1);
    let causes = causes_of(&v);
    assert_eq!(
        causes[0],
        ("socket-transport".to_string(), true),
        "{causes:?}"
    );
    // The command line's NCCL_IB_HCA=mlx5_0 names one of the 8 NICs.
    assert!(
        causes.contains(&("fewer-nics".to_string(), true)),
        "{causes:?}"
    );
    // 8 GiB: 92.35 GB/s measured (the file's own busbw column), far below the band.
    let sizes = v["sizes"].as_array().unwrap();
    let big = sizes
        .iter()
        .find(|s| s["size_bytes"] == 8589934592u64)
        .unwrap();
    assert!((big["measured_busbw_gbs"].as_f64().unwrap() - 92.35).abs() < 0.05);
    assert_eq!(big["status"], "slow");
    assert!(big["expected"]["expected_low_busbw_gbs"].as_f64().unwrap() > 200.0);
    // The run pinned NCCL_ALGO=ring on its command line: the expectation is NCCL's pick under it.
    assert_eq!(
        big["expected"]["pair"].as_str().unwrap().split('/').next(),
        Some("Ring")
    );
}

/// Known healthy: one 8x H100 node, 383-477 GB/s (a maintainer: "in the expected range").
#[test]
fn a_healthy_h100_node_exits_0() {
    let file = data("h100-1node-healthy-e14.txt");
    let out = planner()
        .args([
            "check",
            "--fixture",
            "hgx-h100-8",
            "--coll",
            "all-reduce",
            &file,
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Verdict: healthy"), "{text}");
    assert!(!text.contains("Likely causes"), "{text}");
}

/// Known degraded, cause not in the file (no NCCL log): 2x 8 H100 at 155.57 GB/s; slow, and check says it found no
/// cause rather than inventing one.
#[test]
fn a_degraded_h100_pair_without_log_is_slow_with_no_cause() {
    let file = data("h100-2node-degraded-e14.txt");
    let (v, out) = check_json(&[
        "--fixture",
        "hgx-h100-8",
        "--nodes",
        "2",
        "--coll",
        "all-reduce",
        &file,
    ]);
    assert_exit(&out, 1);
    assert_eq!(
        v["sizes"].as_array().unwrap().len(),
        11,
        "srun's `0: ` labels are read through"
    );
    // From 64 MiB up the run is 61-68 % below the expected busbw: slow. At 8-32 MiB it is 25-33 % below, inside
    // the band of 2-node NVSwitch+IB machines at mid sizes (healthy public 2-node H100 runs spread as widely there,
    // 132-510 us at these sizes), so those are not called slow; the model of 2026-12-01 called them slow only
    // because it was optimistic at mid sizes across nodes (bench/results/expect-2026-12-02/README.md).
    let sizes = v["sizes"].as_array().unwrap();
    let status_of = |s: &serde_json::Value| s["status"].as_str().unwrap_or("").to_string();
    let large: Vec<String> = sizes
        .iter()
        .filter(|s| s["size_bytes"].as_u64().unwrap_or(0) >= 64 << 20)
        .map(status_of)
        .collect();
    assert_eq!(large.len(), 8, "{v}");
    assert!(large.iter().all(|s| s == "slow"), "{v}");
    assert!(
        sizes
            .iter()
            .filter(|s| s["size_bytes"].as_u64().unwrap_or(0) < 64 << 20)
            .all(|s| status_of(s) == "ok" || status_of(s) == "slow"),
        "{v}"
    );
    assert!(
        causes_of(&v)
            .iter()
            .all(|(k, likely)| !likely || k == "version-choice"),
        "{v}"
    );
    let out = planner()
        .args([
            "check",
            "--fixture",
            "hgx-h100-8",
            "--nodes",
            "2",
            "--coll",
            "all-reduce",
            &file,
        ])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("No cause found in the files"));
}

/// Known causes from the log of aws-ofi-nccl#64 (2x p4d): every NET connection on EFA device 0 of 4, none with
/// GDRDMA, 2 coll channels.
#[test]
fn one_efa_device_without_gdr_on_p4d() {
    let text = std::fs::read_to_string(data("p4d-2node-one-nic-aws-ofi-nccl-64.log")).unwrap();
    let ev = evidence::scan(&text);
    assert_eq!(ev.net_devs_used(), vec![0]);
    assert_eq!(ev.n_ranks.as_ref().map(|n| n.value), Some(16));
    let source = planner::pipeline::Source {
        fixture: Some("aws-p4d".into()),
        nodes: 2,
        ..Default::default()
    };
    let cluster = source.load().unwrap();
    let facts = MachineFacts::of_cluster(&cluster, &NcclEnv::default()).unwrap();
    assert_eq!(facts.nics.len(), 4);
    let found = causes::find(&causes::CauseInput {
        evidence: &[("p4d.log", &ev)],
        machine: &facts,
        cluster: &cluster,
        run: &Default::default(),
        source: &source,
        slow: &[],
    })
    .unwrap();
    let kinds: Vec<CauseKind> = found.iter().map(|c| c.kind).collect();
    for k in [
        CauseKind::FewerNics,
        CauseKind::GdrOff,
        CauseKind::FewerChannels,
    ] {
        assert!(kinds.contains(&k), "{k:?} not in {kinds:?}");
    }
    let nics = found
        .iter()
        .find(|c| c.kind == CauseKind::FewerNics)
        .unwrap();
    assert_eq!(
        nics.evidence[0].line,
        Some(4),
        "the first NET/AWS Libfabric/0 line"
    );
    // No size was slow in this call: present, not likely.
    assert!(found.iter().all(|c| !c.likely));
}

/// Known cause from nccl-tests#228 (8x A100 SXM with NVSwitch): NCCL_P2P_LEVEL=LOC forces P2P off.
#[test]
fn p2p_level_loc_on_an_nvlink_a100_board() {
    let text = std::fs::read_to_string(data("a100-p2p-level-loc-nccl-tests-228.log")).unwrap();
    let ev = evidence::scan(&text);
    let source = planner::pipeline::Source {
        fixture: Some("dgx-a100-8".into()),
        nodes: 1,
        ..Default::default()
    };
    let cluster = source.load().unwrap();
    let facts = MachineFacts::of_cluster(&cluster, &NcclEnv::default()).unwrap();
    assert_eq!(facts.nvlink_pairs, 28);
    let found = causes::find(&causes::CauseInput {
        evidence: &[("a100.log", &ev)],
        machine: &facts,
        cluster: &cluster,
        run: &Default::default(),
        source: &source,
        slow: &[],
    })
    .unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].kind, CauseKind::P2pDisabled);
    assert!(found[0]
        .summary
        .contains("28 of 28 GPU pairs are joined by NVLink"));
    // A log alone is evidence, not measurements: check refuses it (exit 2, naming the file).
    let out = planner()
        .args([
            "check",
            "--fixture",
            "dgx-a100-8",
            &data("a100-p2p-level-loc-nccl-tests-228.log"),
        ])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert!(String::from_utf8_lossy(&out.stderr).contains("a100-p2p-level-loc-nccl-tests-228.log"));
}

/// The log of one run beside its measurements: the causes are found across files.
#[test]
fn a_log_file_beside_the_measurements_is_evidence() {
    let (v, out) = check_json(&[
        "--fixture",
        "dgx-a100-8",
        "--coll",
        "all-reduce",
        &data("h100-1node-healthy-e14.txt"),
        &data("a100-p2p-level-loc-nccl-tests-228.log"),
    ]);
    // The H100 numbers on an A100 board are faster than it can deliver: suspicious, not slow (exit 0).
    assert_exit(&out, 0);
    assert_eq!(v["verdict"], "suspicious");
    assert_eq!(causes_of(&v), vec![("p2p-disabled".to_string(), false)]);
    assert_eq!(v["inputs"].as_array().unwrap().len(), 2);
}

#[test]
fn prometheus_textfile_has_inspector_labels() {
    let out = planner()
        .args([
            "check",
            "--prometheus",
            "--fixture",
            "hgx-h100-8",
            "--coll",
            "all-reduce",
            &data("h100-1node-healthy-e14.txt"),
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("# TYPE planner_check_measured_busbw_gbs gauge"));
    // 128 MiB: the Inspector's bucket label, NCCL's collective name.
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("planner_check_measured_busbw_gbs{")
                && l.contains("size_bytes=\"134217728\"")
        })
        .unwrap();
    assert!(
        line.contains("collective=\"AllReduce\"") && line.contains("message_size=\"128-129MB\""),
        "{line}"
    );
    assert!(
        line.contains("nranks=\"8\"") && line.contains("n_nodes=\"1\""),
        "{line}"
    );
    assert!(text.contains("planner_check_verdict_slow{"));
    assert!(text.trim_end().ends_with(" 0"));
}

#[test]
fn bad_input_is_one_line_exit_2() {
    let dir = std::env::temp_dir().join(format!("planner-check-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "# nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602\n# Collective test starting: all_reduce_perf\n     1048576        262144     float     sum      -1    abc\n").unwrap();
    let out = planner()
        .args(["check", "--fixture", "hgx-h100-8", bad.to_str().unwrap()])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bad.txt:3"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
    let out = planner()
        .args([
            "check",
            "--fixture",
            "hgx-h100-8",
            "--tolerance",
            "150",
            &data("h100-1node-healthy-e14.txt"),
        ])
        .output()
        .unwrap();
    assert_exit(&out, 2);
}

/// nccl-tests -J JSON (format of nccl-tests 2.17+, `src/util.cu`): rows, env (NCCL_P2P_DISABLE=1 as evidence).
#[test]
fn nccl_tests_json_env_is_evidence() {
    // Built from the h100-1node-healthy-e14.txt rows in the layout util.cu writes (keys version, args, env,
    // nccl_version, config, results with size/count/type/redop/root/out_of_place/in_place{time, alg_bw, bus_bw, nwrong}).
    let json = r#"{"version":2,"start_time":"2025-03-03 10:00:00","args":["./build/all_reduce_perf","-g","8"],
"env":["NCCL_P2P_DISABLE=1","HOME=/root"],"nccl_version":22503,
"config":{"nthreads":1,"ngpus":8,"minimum_bytes":134217728,"maximum_bytes":268435456,"step_factor":2},
"results":[
{"size":134217728,"count":33554432,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":613.3,"alg_bw":218.85,"bus_bw":382.99,"nwrong":0.0},"in_place":{"time":614.3,"alg_bw":218.48,"bus_bw":382.34,"nwrong":0.0},"actual_iterations":2,"experiment_name":""},
{"size":268435456,"count":67108864,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":1139.2,"alg_bw":235.63,"bus_bw":412.35,"nwrong":0.0},"in_place":{"time":1134.8,"alg_bw":236.56,"bus_bw":413.97,"nwrong":0.0},"actual_iterations":2,"experiment_name":""}
]}"#;
    let r = check::read_input_text(json, "run.json", &Default::default()).unwrap();
    assert_eq!(r.measurements.rows.len(), 4);
    assert_eq!(
        r.evidence.env_value("NCCL_P2P_DISABLE").map(|v| v.line),
        Some(2)
    );
    assert!(r.evidence.env_value("HOME").is_none());
}

/// The README's "Is my machine healthy?" example: every quoted line is in the output (run from the repository root).
#[test]
fn readme_check_example() {
    let readme =
        std::fs::read_to_string(format!("{}/README.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let section = readme.split("## Is my machine healthy?").nth(1).unwrap();
    let block = section.split("```\n").nth(1).unwrap();
    let mut lines = block.lines();
    let command = lines.next().unwrap().strip_prefix("$ planner ").unwrap();
    let out = planner()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(command.split_whitespace())
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in lines.filter(|l| *l != "...") {
        assert!(
            text.lines().any(|t| t == line),
            "README line not in the output: {line}\n{text}"
        );
    }
}

/// A `planner doctor` result file (fake backend: four H100 SXM) is read through doctor's loader: its NCCL sweep
/// becomes all-reduce sizes, its 4 ranks contradict an 8-GPU board and check says so.
#[test]
fn a_doctor_result_file_is_read() {
    let dir = std::env::temp_dir().join(format!("planner-check-doctor-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("doctor.json");
    let out = planner()
        .args([
            "doctor",
            "--repeats",
            "2",
            "--timeout",
            "1",
            "-o",
            file.to_str().unwrap(),
        ])
        .env("PLANNER_FAKE_BACKEND", "1")
        .env("PLANNER_FAKE_DOCTOR", "healthy")
        .output()
        .unwrap();
    assert!(file.exists(), "{}", String::from_utf8_lossy(&out.stderr));
    let (v, _) = check_json(&["--fixture", "hgx-h100-8", file.to_str().unwrap()]);
    assert_eq!(v["inputs"][0]["format"], "planner-doctor");
    assert!(v["inputs"][0]["rows"].as_u64().unwrap() > 0, "{v}");
    assert!(v["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["collective"] == "AllReduce"));
    let c = &v["contradictions"][0];
    assert_eq!(
        (c["what"].as_str(), c["file_says"].as_str()),
        (Some("ranks"), Some("4")),
        "{v}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// nccl-tests' per-iteration statistics (`-I 1`, nccl-tests 2.19.2+) are kept, as `-J` JSON and as text columns
/// `i_min i_max i_p99 i_cv%`, and shown by check (most variable size first) and recorded by calibrate (repeats and
/// spread). The JSON is tests/data/calibrate/nccl-tests-J-per-iter.json (reconstructed in nccl-tests v2.19.6's `-J`
/// layout, README there); its 8 MiB iterations after the skipped first are 75.0, 76.0, 95.0, 75.5 us (the slower
/// of the two processes per iteration): cv = 8.451 / 80.375 = 10.5 %, process medians 75.75 and 75.55 us.
#[test]
fn per_iteration_statistics_are_kept_and_shown() {
    let json = format!(
        "{}/tests/data/calibrate/nccl-tests-J-per-iter.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = planner()
        .args(["check", "--fixture", "h200x2-nvswitch-vm", &json])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Per-iteration (nccl-tests -I 1, measured, the slowest GPU per iteration): 2 sizes with statistics; most variable:\n  AllReduce 8 MiB: cv 10.5 %, min 75.00 us, max 95.00 us, p99 95.00 us over 4 iterations, per-process median 75.55-75.75 us over 2 processes\n"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_slice(
        &planner()
            .args(["check", "--fixture", "h200x2-nvswitch-vm", &json, "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let size = v["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["size_bytes"] == 8388608)
        .unwrap();
    assert_eq!(size["per_iteration"]["iterations"], 4);
    assert_eq!(size["per_iteration"]["skipped_iterations"], 1);
    assert!((size["per_iteration"]["stdev_us"].as_f64().unwrap() - 8.45115).abs() < 1e-4);
    let m = planner::calibrate::read_file(&json, &Default::default()).unwrap();
    let row = m.rows.iter().find(|r| r.bytes == 8388608).unwrap();
    assert_eq!(row.repeats, Some(4));
    // (95.0 - 75.0) / 82.3 (nccl-tests' time: the average of all 5 iterations) = 24.3 %.
    assert!(
        (row.spread_pct.unwrap() - 24.30).abs() < 0.01,
        "{:?}",
        row.spread_pct
    );
    // The text layout of -I 1: each half gains `i_min i_max i_p99 i_cv%` after `#wrong`.
    let text_run = "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 1048576 maxBytes 8388608 step: 8(factor) warmup iters: 2 iters: 5 agg iters: 1 validation: 1 graph: 0 unalign: 0
# Per-Iteration Report: CUDA event timing; i_* uses max over process rows; summary skips first 1 iterations
#
#                                                              out-of-place (+ per-iteration)                                in-place (+ per-iteration)
#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)
     8388608       2097152     float     sum      -1    82.30  101.93  101.93       0    75.00    95.00    95.00    10.51    82.30  101.93  101.93       0    75.00    95.00    95.00    10.51
";
    let m = planner::calibrate::read_text(
        text_run,
        "run.txt",
        &planner::calibrate::ReadOptions {
            pair: Some(planner::model::Pair::parse("Ring/LL").unwrap()),
            coll: None,
        },
    )
    .unwrap();
    let p = m.rows[0]
        .per_iteration
        .as_ref()
        .expect("per-iteration columns");
    assert_eq!(
        (p.min_us, p.max_us, p.p99_us, p.cv_pct),
        (75.0, 95.0, 95.0, 10.51)
    );
    assert_eq!(p.iterations, None);
    assert_eq!(m.rows.len(), 2);
}

/// nccl-tests' header says how the run launched its calls (`nGpus 8`: one thread drives the node's 8 GPUs, `-g 8`;
/// `graph: 1`: CUDA graphs, `-G 1`), and check's expectation follows it (public E09 output, its header edited to
/// graph: 1 for the second run).
#[test]
fn check_expects_the_launch_the_nccl_tests_header_names() {
    let expectation = |path: &str| {
        let (v, _) = check_json(&[
            "--fixture",
            "hgx-h200-8",
            "--nodes",
            "2",
            "--coll",
            "all-reduce",
            path,
        ]);
        v["expectation"].as_str().unwrap_or_default().to_string()
    };
    let e09 = data("h200-2node-sockets-e09.txt");
    let line = expectation(&e09);
    assert!(
        line.contains("eager launch, 8 GPUs per thread as nccl-tests -g 8)"),
        "{line}"
    );
    let scratch = crate::common::Scratch::new("check_graph_header");
    let text = std::fs::read_to_string(&e09).unwrap();
    assert!(text.contains("validation: 1 graph: 0"));
    let graph = scratch.write(
        "e09-graph.txt",
        text.replacen("validation: 1 graph: 0", "validation: 1 graph: 1", 1),
    );
    let line = expectation(graph.to_str().unwrap());
    assert!(line.contains("graph launch, 8 GPUs per thread"), "{line}");
}
