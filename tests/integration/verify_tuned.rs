//! `verify --tuner` (the `tuned` row) and `--backend nccl-symm` (the `symm` row)
//! without a GPU: the result file round trip, `--load` of a file with those
//! rows, the symmetric model's prediction, and the bad inputs that exit 2.

use crate::common::planner;
use crate::verify_data::{self, ring_ll, KIB, MIB};
use planner::dtype::Dtype;
use planner::measure::Backend;
use planner::measure::TunerDecision;
use planner::model::Coll;
use planner::model::Pair;
use planner::predict::{ModelPredictor, Predictor};
use planner::result_file::VerifyRun;
use planner::verify::score::{score, Recorded};

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A fresh directory `name` in this test's scratch directory.
fn scratch(name: &str) -> std::path::PathBuf {
    crate::common::with_scratch(|s| s.subdir(name))
}

#[test]
fn the_result_file_keeps_tuned_and_symm_rows() {
    let run = verify_data::tuned_symm_run();
    let text = run.to_json().unwrap();
    let back = VerifyRun::from_json(&text, "tuned.json").unwrap();
    assert_eq!(back, run);
    // the plan's path and hash are recorded
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["options"]["tuner"]["plan_hash"], "f00dfeedcafe0042");
    assert_eq!(v["options"]["tuner"]["plan_path"], "/data/plan.json");
    assert_eq!(v["options"]["backends"][1], "nccl-symm");
    let rows = v["rows"].as_array().unwrap();
    let tuned = rows.iter().find(|r| r["tuned"] == true).unwrap();
    assert_eq!(tuned["tuner_decision"]["outcome"], "kept");
    let symm = rows.iter().find(|r| r["backend"] == "nccl-symm").unwrap();
    assert_eq!(symm["symmetric"]["kernel"], "AllReduce_AGxLL_R");
    assert_eq!(symm["predicted_kernel"], "AllReduce_AGxLL_R");
    // rows of a file without them carry none of the new fields
    let plain = verify_data::recorded_run().to_json().unwrap();
    for field in [
        "\"tuned\"",
        "tuner_decision",
        "\"symmetric\"",
        "predicted_kernel",
        "\"tuner\"",
    ] {
        assert!(!plain.contains(field), "{field}");
    }
}

#[test]
fn tuned_against_auto_by_hand() {
    let run = verify_data::tuned_symm_run();
    let scored = score(&run, &Recorded::new(&run));
    let tuned = scored
        .comparisons
        .iter()
        .find(|c| c.label == "tuned")
        .unwrap();
    assert_eq!(tuned.sizes.len(), 5);
    // 8.4/8, 16/20, 20/28.8, 32/32, 212/200
    let ratios = [1.05, 0.8, 20.0 / 28.8, 1.0, 1.06];
    for (size, expected) in tuned.sizes.iter().zip(ratios) {
        assert!((size.ratio - expected).abs() < 1e-12, "{size:?}");
    }
    let all = ratios.iter().product::<f64>().powf(1.0 / 5.0);
    assert!((tuned.geomean_ratio.unwrap() - all).abs() < 1e-12);
    // 1-16 MiB: 1, 2 and 4 MiB
    assert_eq!(tuned.sizes_1_16mib, 3);
    let mid = (0.8 * (20.0 / 28.8) * 1.0f64).powf(1.0 / 3.0);
    assert!((tuned.geomean_ratio_1_16mib.unwrap() - mid).abs() < 1e-12);
    assert_eq!(
        (tuned.worst_ratio, tuned.worst_bytes),
        (Some(1.06), Some(64 * MIB))
    );
    assert_eq!(tuned.best_bytes, Some(2 * MIB));
    assert_eq!(tuned.sizes[2].auto_ran.as_deref(), Some("Ring/Simple"));
    assert_eq!(tuned.sizes[2].other_ran.as_deref(), Some("Ring/LL"));

    let symm = scored
        .comparisons
        .iter()
        .find(|c| c.label == "symm")
        .unwrap();
    assert_eq!(
        (symm.worst_ratio, symm.worst_bytes),
        (Some(1.3), Some(64 * MIB))
    );
    assert_eq!(
        symm.sizes[4].other_ran.as_deref(),
        Some("classic Ring/Simple")
    );
    // the symm rows are scored: -20%, +10%, +10%, -16.67% in 64 KiB - 16 MiB, -7.69% above
    let summary = scored
        .summaries
        .iter()
        .find(|s| s.backend == Backend::NcclSymm)
        .unwrap();
    let medium = &summary.regimes[1];
    assert_eq!(medium.rows, 4);
    assert!((medium.median_abs_error_pct.unwrap() - (10.0 + 50.0 / 3.0) / 2.0).abs() < 1e-9);
    assert!((medium.worst_abs_error_pct.unwrap() - 20.0).abs() < 1e-9);
    assert_eq!(
        (medium.worst_pair, medium.worst_bytes),
        (None, Some(64 * KIB))
    );
    // NCCL's choice per size stays the auto row's: at 2 MiB Ring/Simple (the tuned row ran Ring/LL)
    let nccl = scored
        .summaries
        .iter()
        .find(|s| s.backend == Backend::Nccl)
        .unwrap();
    assert_eq!(nccl.nccl_sizes, 5);
    let at_2m = scored
        .sizes
        .iter()
        .find(|v| v.backend == Backend::Nccl && v.bytes == 2 * MIB)
        .unwrap();
    assert_eq!(at_2m.nccl_choice.unwrap().pair, verify_data::ring_simple());
    // the plugin's decision is kept on the row
    let steered = scored
        .rows
        .iter()
        .find(|r| r.row.tuned && r.row.bytes == MIB)
        .unwrap();
    assert_eq!(
        steered.row.tuner_decision,
        Some(TunerDecision::Steered {
            pair: ring_ll(),
            channels: None,
            rule: 0
        })
    );
}

#[test]
fn load_renders_the_tuned_and_symm_rows() {
    let dir = scratch("load");
    let file = dir.join("tuned.json");
    verify_data::tuned_symm_run()
        .save(file.to_str().unwrap())
        .unwrap();
    let csv = dir.join("rows.csv");
    let out = planner()
        .args([
            "verify",
            "--load",
            file.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    for expected in [
        "backends nccl+nccl-symm",
        "symm predictions: the symmetric-kernel predictions recorded in the file",
        "tuner plugin: /opt/planner/libnccl_tuner_planner.so with plan /data/plan.json #f00dfeedcafe0042",
        "  Successfully loaded external tuner plugin /opt/planner/libnccl_tuner_planner.so",
        "tuned = Ring/LL [0..23]",
        "plugin rule 0: Ring/LL",
        "plugin kept: no rule",
        "nccl-symm backend",
        "symm = AllReduce_AGxLL_R [1 ch]",
        "symm = classic Ring/Simple [0..23]",
        "model's kernel",
        "model: AllReduce_AGxLL_R",
        "symm 64 KiB",
        "tuned / auto: NCCL steered by the tuner plugin against NCCL alone (below 1: tuned is faster)",
        "worst 1.060 at 64 MiB, best 0.694 at 2 MiB",
        "1-16 MiB 0.822 over 3 sizes",
        "symm / auto: NCCL on symmetric windows against NCCL's default",
    ] {
        assert!(t.contains(expected), "missing {expected:?} in\n{t}");
    }
    // the CSV: what NCCL ran in the nccl_choice column
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(csv_text.lines().count(), 26); // header + 25 rows
    assert!(
        csv_text
            .lines()
            .any(|l| l.starts_with("nccl-symm,symm,1048576,ok,")
                && l.ends_with(",AllReduce_RSxLD_AGxST,")),
        "{csv_text}"
    );
    assert!(csv_text
        .lines()
        .any(|l| l.starts_with("nccl,tuned,2097152,ok,") && l.ends_with(",Ring/LL,")));

    let json = planner()
        .args(["verify", "--load", file.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(json.status.success(), "{}", text(&json));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["options"]["tuner"]["plan_hash"], "f00dfeedcafe0042");
    assert_eq!(v["comparisons"][0]["label"], "tuned");
    assert_eq!(v["comparisons"][0]["worst_bytes"], 64 * MIB);
    assert_eq!(v["comparisons"][1]["label"], "symm");
    let symm_row = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["backend"] == "nccl-symm" && r["bytes"] == 4 * MIB)
        .unwrap();
    assert_eq!(symm_row["model_kernel"], "AllReduce_AGxLL_R");
    assert_eq!(symm_row["symmetric"]["kernel"], "AllReduce_RSxLD_AGxST");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_stock_model_predicts_the_kernels_nccl_ran_on_the_2x_h200() {
    // Issue 13's measurement (NCCL 2.28.3, 2 x H200, NVLS off): symmetric
    // windows ran AllReduce_AGxLL_R from 8 B to 16 KiB and AllReduce_RSxLD_AGxST at 2 MiB.
    let node = planner::pipeline::load_fixture("h200x2-nvswitch-vm").unwrap();
    let cluster = planner::topo::Cluster::single(node);
    let graph = include_str!("../golden/h200x2-nvswitch-vm/graph.xml");
    let model = ModelPredictor::new(&cluster, Some(graph), Some("2.28.3")).unwrap();
    let label = model.symmetric_label().unwrap();
    assert!(
        label.contains("2.28 table") && label.contains("sm 90"),
        "{label}"
    );
    for (bytes, kernel) in [
        (8, "AllReduce_AGxLL_R"),
        (16 * KIB, "AllReduce_AGxLL_R"),
        (2 * MIB, "AllReduce_RSxLD_AGxST"),
    ] {
        let p = model
            .predict_symmetric(Coll::AllReduce, Dtype::F32, bytes)
            .unwrap();
        assert_eq!(p.kernel, kernel, "{bytes}");
        assert!(p.time_us > 0.0 && p.time_us.is_finite());
    }
    // all-gather counts one rank's share; a size below one element per rank has no prediction
    assert!(model
        .predict_symmetric(Coll::AllGather, Dtype::F32, 8)
        .is_some());
    assert!(model
        .predict_symmetric(Coll::AllGather, Dtype::F32, 4)
        .is_none());
    // no table for an NCCL older than 2.28: no symmetric prediction
    let old = ModelPredictor::new(&cluster, Some(graph), Some("2.27.3")).unwrap();
    assert!(old
        .predict_symmetric(Coll::AllReduce, Dtype::F32, 8)
        .is_none());
    // a pinned pair's prediction is unchanged by all this
    assert!(model.predict_us(Coll::AllReduce, ring_ll(), MIB).is_some());
    let _ = Pair::ring_tree_all();
}

const PLAN: &str = r#"{"format":"planner-tuner-plan","version":1,
 "provenance":{"planner_version":"0.1.0","created_unix":0,"machine":"test","nccl_version":"2.28.3",
               "topology_hash":null,"source_kind":"verify","source_file":"verify.json",
               "source_hash":"0000000000000000","margin_percent":2.0},
 "rules":[{"collective":"AllReduce","n_ranks":2,"n_nodes":1,"min_bytes":1048576,"max_bytes":4194303,
           "algorithm":"Ring","protocol":"LL","channels":null}]}"#;

#[test]
fn bad_tuner_inputs_exit_2_before_any_gpu_work() {
    let dir = scratch("bad");
    let plan = dir.join("plan.json");
    std::fs::write(&plan, PLAN).unwrap();
    let garbage = dir.join("garbage.json");
    std::fs::write(
        &garbage,
        "{\"format\": \"planner-tuner-plan\", \"rules\": [",
    )
    .unwrap();
    let plugin = dir.join("libnccl_tuner_planner.so");
    std::fs::write(&plugin, b"\x7fELF").unwrap();
    let (plan, garbage, plugin) = (
        plan.to_str().unwrap(),
        garbage.to_str().unwrap(),
        plugin.to_str().unwrap(),
    );
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "--tuner",
                "/nonexistent/plan.json",
                "--tuner-plugin",
                plugin,
            ],
            "--tuner /nonexistent/plan.json: cannot read the plan",
        ),
        (
            &["--tuner", garbage, "--tuner-plugin", plugin],
            "not a valid tuner plan: not JSON at line 1",
        ),
        (
            &["--tuner", plan, "--tuner-plugin", "/nonexistent/lib.so"],
            "--tuner-plugin /nonexistent/lib.so: no such file",
        ),
        (
            &["--tuner-plugin", plugin],
            "give the plan with --tuner PLAN as well",
        ),
        (
            &[
                "--tuner",
                plan,
                "--tuner-plugin",
                plugin,
                "--backend",
                "native",
            ],
            "use --backend nccl",
        ),
        (&["--backend", "nccl,mpi"], "unknown backend 'mpi'"),
    ];
    for (args, expected) in cases {
        let out = planner()
            .args(["verify", "--sweep", "8..64"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        let all = text(&out);
        assert!(all.contains(expected), "{args:?}: {all}");
        assert_eq!(all.trim().lines().count(), 1, "one line: {all}");
    }
    // A good request gets as far as the GPU (none here: exit 1, not an input error).
    // SAFETY: is_culib_present only probes with dlopen.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        let out = planner()
            .args(["verify", "--sweep", "8..64", "--backend", "nccl,nccl-symm"])
            .args(["--tuner", plan, "--tuner-plugin", plugin])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(
            text(&out).contains("no usable CUDA driver"),
            "{}",
            text(&out)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn backend_lists() {
    assert_eq!(
        Backend::parse_list("nccl-symm,NCCL").unwrap(),
        vec![Backend::Nccl, Backend::NcclSymm]
    );
    assert_eq!(
        Backend::parse_list("both").unwrap(),
        vec![Backend::Native, Backend::Nccl]
    );
    assert_eq!(
        Backend::parse_list("both,nccl-symm,nccl").unwrap(),
        vec![Backend::Native, Backend::Nccl, Backend::NcclSymm]
    );
    assert_eq!(Backend::NcclSymm.to_string(), "nccl-symm");
    let err = Backend::parse_list("symm").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("unknown backend 'symm'"), "{err}");
}
