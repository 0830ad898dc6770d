//! planner's expected model (`src/expect`, issue 24): the fit's training-set and leave-one-machine-out figures
//! computed here from the committed data (tests/data/expect-train: public nccl-tests results with their sources;
//! tests/data/expect-own: our 2x H200 NCCL runs), the GB200 NVL4-partition ranking of NVIDIA/nccl#1801, and the
//! `planner expect` command.

use crate::common::{assert_exit, json_of, planner, run_ok};
use planner::expect::fit::{fit_and_validate, Data, Range, SWEEPS};
use planner::expect::{self, ExpectOptions, Params};
use planner::model::input::NvlsFlag;
use planner::model::{table, Algo, Coll, Proto};

fn data_paths() -> [String; 2] {
    let root = env!("CARGO_MANIFEST_DIR");
    [
        format!("{root}/tests/data/expect-train/points.csv"),
        format!("{root}/tests/data/expect-own/points.csv"),
    ]
}

/// The figures bench/results/expect-2026-12-03b/fit.txt records (`planner expect --fit`), recomputed from the data:
/// (class, range, training median, training worst, LOMO median, LOMO worst), as fractions.
const RECORDED: &[(&str, Range, f64, f64, f64, f64)] = &[
    ("all", Range::Small, 0.122, 0.671, 0.260, 0.856),
    ("all", Range::Mid, 0.134, 1.032, 0.195, 2.113),
    ("all", Range::Large, 0.121, 0.847, 0.125, 0.847),
    ("nvswitch", Range::Small, 0.071, 0.279, 0.185, 0.727),
    ("nvswitch", Range::Mid, 0.099, 0.429, 0.125, 1.291),
    ("nvswitch", Range::Large, 0.118, 0.425, 0.112, 0.484),
    ("nvswitch-net", Range::Small, 0.171, 0.671, 0.265, 0.651),
    ("nvswitch-net", Range::Mid, 0.171, 1.032, 0.210, 1.051),
    ("nvswitch-net", Range::Large, 0.111, 0.847, 0.125, 0.847),
    ("pcie", Range::Small, 0.163, 0.447, 0.329, 0.856),
    ("pcie", Range::Mid, 0.216, 0.732, 0.402, 2.113),
    ("pcie", Range::Large, 0.181, 0.211, 0.212, 0.603),
];

#[test]
fn fit_and_leave_one_machine_out_figures_are_the_recorded_ones() {
    let params = Params::builtin().unwrap();
    let [a, b] = data_paths();
    let data = Data::load(&[a.as_str(), b.as_str()], &params).unwrap();
    // 672 public rows + 210 of ours: the 714 the model can place (healthy, a fixture in this build). Of the 192
    // public rows whose machine no fixture described on 12-02, 173 are placed on the fixtures added for them
    // (`fit::PLACED`), 24 of those (E05) held out of the fit by their case's own note, 1 (E06 all-gather as PAT)
    // not modelled; 19 (E17, E18, E19) stay unplaced.
    assert_eq!(data.points.len(), 714);
    assert_eq!(data.skipped.reasons.get("status suspect"), Some(&111));
    assert_eq!(
        data.skipped.reasons.get("no fixture describes the machine"),
        Some(&19)
    );
    assert_eq!(
        data.skipped
            .reasons
            .get(planner::expect::fit::HELD_OUT[0].1),
        Some(&24)
    );
    assert_eq!(data.skipped.reasons.get("fixture not in this build"), None);
    let report = fit_and_validate(&data, &params, SWEEPS);
    assert_eq!(report.machines, 26);
    for &(class, range, t_med, t_worst, l_med, l_worst) in RECORDED {
        let t = report.get(false, class, range).unwrap();
        let l = report.get(true, class, range).unwrap();
        let near = |x: f64, y: f64| (x - y).abs() <= 0.0006 + 0.001 * y;
        assert!(
            near(t.median, t_med) && near(t.worst, t_worst),
            "{class} {range:?} training {t:?}"
        );
        assert!(
            near(l.median, l_med) && near(l.worst, l_worst),
            "{class} {range:?} LOMO {l:?}"
        );
        // Cross-validation reads no better than the fit in the medians of the single-node class below the largest
        // size. At the largest size it does since 2026-12-03 (2026-12-03b: 11.2 % left out vs 11.8 % fitted, 27 points): the fit
        // trades those few points against the many mid sizes it shares constants with.
        if class == "nvswitch" && range != Range::Large {
            assert!(l.median >= t.median, "{class} {range:?}");
        }
    }
    // The fit beats NCCL's own estimate on the fitted points where it should: mid sizes, one node.
    let nccl_mid = report
        .nccl
        .get(&("nvswitch".to_string(), Range::Mid))
        .unwrap();
    let ours_mid = report.get(false, "nvswitch", Range::Mid).unwrap();
    assert!(
        ours_mid.median < nccl_mid.median,
        "{ours_mid:?} vs NCCL {nccl_mid:?}"
    );
}

/// NVIDIA/nccl#1801: GB200 in NVL4 partitions (trays of 4 GPUs, MNNVL off) joined by IB: Tree measured 19 % faster
/// than Ring at the largest size (tests/data/expect-train case E19), where NCCL's own model rates Tree slower.
#[test]
fn gb200_nvl4_partitions_expect_tree_fastest_as_measured() {
    let source = planner::pipeline::Source {
        fixture: Some("gb200-nvl72-tray".into()),
        nodes: 3,
        mnnvl: Some(planner::topo::mnnvl::MnnvlEnable::Off),
        ..Default::default()
    };
    let cluster = source.load().unwrap();
    let table = table::builtin_for_version("2.27").unwrap().0;
    let (_, e) = expect::build(
        &cluster,
        None,
        table,
        planner::nccl_env::NcclEnv::default(),
        NvlsFlag::Off,
        &ExpectOptions::default(),
    )
    .unwrap();
    let size = 16u64 << 30;
    let tree = e
        .expect(Coll::AllReduce, Algo::Tree, Proto::Simple, size)
        .unwrap();
    let ring = e
        .expect(Coll::AllReduce, Algo::Ring, Proto::Simple, size)
        .unwrap();
    assert!(
        tree.expected_time_us < ring.expected_time_us,
        "{tree:?} {ring:?}"
    );
    let fastest = e.fastest(Coll::AllReduce, size).unwrap();
    assert_eq!(fastest.algo, Algo::Tree);
    // Measured (E19): Ring 160.1 ms, Tree 134.4 ms. Expected (2026-12-03b fit, as on 12-02 and 12-03): Tree 140 ms (+4 %), Ring 193 ms (+21 %):
    // both bound by the host-side PCIe to the NICs at the rates the fit finds.
    assert!(
        (tree.expected_time_us / 134_353.0 - 1.0).abs() < 0.2,
        "{tree:?}"
    );
}

#[test]
fn expect_json_has_labelled_keys_and_a_band_around_the_value() {
    let out = planner()
        .args([
            "expect",
            "--fixture",
            "hgx-h100-8",
            "--coll",
            "all-reduce",
            "--size",
            "1G",
            "--json",
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let v = json_of(&out);
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["machine_class"], "sm90 nvswitch");
    assert_eq!(v["launch"], "eager");
    let row = &v["rows"][0];
    assert_eq!(row["collective"], "AllReduce");
    assert_eq!(row["size_bytes"], 1u64 << 30);
    let (lo, mid, hi) = (
        row["expected_low_busbw_gbs"].as_f64().unwrap(),
        row["expected_busbw_gbs"].as_f64().unwrap(),
        row["expected_high_busbw_gbs"].as_f64().unwrap(),
    );
    assert!(lo < mid && mid < hi, "{row}");
    // NVLS on 8x H100 at 1 GiB: public runs measure 466-479 GB/s busbw (C01, C05); expected within 20 %.
    assert_eq!(row["algorithm"], "NVLS");
    assert!((mid / 470.0 - 1.0).abs() < 0.2, "{row}");
    let t = row["expected_time_us"].as_f64().unwrap();
    let algbw = row["expected_algbw_gbs"].as_f64().unwrap();
    assert!(((1u64 << 30) as f64 / (t * 1e3) / algbw - 1.0).abs() < 1e-6);
}

#[test]
fn graph_launch_halves_small_messages_and_bad_flags_exit_2() {
    let time = |launch: &str| {
        let out = planner()
            .args([
                "expect",
                "--fixture",
                "h200x2-nvswitch-vm",
                "--coll",
                "all-reduce",
                "--size",
                "8",
            ])
            .args(["--launch", launch, "--json"])
            .output()
            .unwrap();
        json_of(&out)["rows"][0]["expected_time_us"]
            .as_f64()
            .unwrap()
    };
    let (eager, graph) = (time("eager"), time("graph"));
    // Measured on 2x H200 (bench/results/verify-h200x2-nccl-*-2proc.json), NCCL's pick at 8 B: 7.3 us eager, 5.8 graph.
    assert!(graph < eager, "{graph} {eager}");
    for args in [
        &["--launch", "sometimes"][..],
        &["--net-kind", "carrier-pigeon"][..],
        &["--params", "/nonexistent-dir"][..],
        &["--coll", "all-to-all"][..],
    ] {
        let out = planner()
            .args(["expect", "--fixture", "hgx-h100-8", "--size", "1M"])
            .args(args)
            .output()
            .unwrap();
        assert_exit(&out, 2);
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).lines().count(),
            1,
            "{args:?}"
        );
    }
}

/// nccl-tests `-g 8` (one thread drives all 8 GPUs): under eager launch the thread enqueues 8 kernels per call, so a
/// call the GPUs finish sooner takes the host's time. Hand calculation from the built-in constants at 8 B on
/// hgx-h100-8 (sm90): tuning-tables/expect/gpu-sm90.json launch_eager_us 8.6574 + 7 x host.json
/// launch_per_extra_gpu_us 3.2504 = 31.4102 us. Under a CUDA graph the host's launch is gone, so -g does not count.
#[test]
fn gpus_per_thread_adds_each_gpus_launch_to_the_host_floor() {
    let expect = |extra: &[&str]| {
        let out = planner()
            .args([
                "expect",
                "--fixture",
                "hgx-h100-8",
                "--coll",
                "all-reduce",
                "--size",
                "8",
                "--json",
            ])
            .args(extra)
            .output()
            .unwrap();
        assert_exit(&out, 0);
        json_of(&out)
    };
    let one = expect(&[]);
    let eight = expect(&["--gpus-per-thread", "8"]);
    assert_eq!(one["gpus_per_thread"], 1);
    assert_eq!(eight["gpus_per_thread"], 8);
    let t = |v: &serde_json::Value| v["rows"][0]["expected_time_us"].as_f64().unwrap();
    assert!((t(&eight) - 31.4102).abs() < 1e-3, "{}", t(&eight));
    assert!(t(&one) < 20.0, "{}", t(&one));
    let graph = |g: &str| t(&expect(&["--launch", "graph", "--gpus-per-thread", g]));
    assert_eq!(graph("1"), graph("8"));
    // the header says it, in nccl-tests' own words
    let text = run_ok(&[
        "expect",
        "--fixture",
        "hgx-h100-8",
        "--coll",
        "all-reduce",
        "--size",
        "8",
        "--gpus-per-thread",
        "8",
    ]);
    assert!(
        text.lines()
            .next()
            .unwrap()
            .ends_with("eager launch, 8 GPUs per thread as nccl-tests -g 8)"),
        "{text}"
    );
    // 0 GPUs, or more than the node has: one line, exit 2
    for (n, says) in [
        (
            "0",
            "--gpus-per-thread 0: a host thread drives at least 1 GPU",
        ),
        ("9", "more than the 8 GPUs of a node"),
    ] {
        let out = planner()
            .args([
                "expect",
                "--fixture",
                "hgx-h100-8",
                "--size",
                "8",
                "--gpus-per-thread",
                n,
            ])
            .output()
            .unwrap();
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says) && err.lines().count() == 1, "{err}");
    }
}

#[test]
fn a_bad_parameter_file_names_the_file_and_field() {
    let dir = std::env::temp_dir().join(format!("planner-expect-params-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in planner::expect::params::BUILTIN {
        let text = if *name == "net-ib.json" {
            text.replacen("\"unit\": \"fraction\"", "\"unit\": \"us\"", 1)
                .replacen("\"value\": ", "\"value\": -", 1)
        } else {
            text.to_string()
        };
        std::fs::write(dir.join(name), text).unwrap();
    }
    let out = planner()
        .args([
            "expect",
            "--fixture",
            "hgx-h100-8",
            "--size",
            "1M",
            "--params",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("net-ib.json: efficiency: value -"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `planner expect --json` of a 1 GiB all-reduce on `nodes` nodes of 8x H100.
fn all_reduce_1g_on_h100_nodes(nodes: &str) -> serde_json::Value {
    let out = run_ok(&[
        "expect",
        "--fixture",
        "hgx-h100-8",
        "--nodes",
        nodes,
        "--coll",
        "all-reduce",
        "--size",
        "1G",
        "--json",
    ]);
    serde_json::from_str(&out).unwrap()
}

#[test]
fn many_nodes_cost_one_node() {
    // 4,096 nodes x 8 GPUs: the plan is one node's links (nodes are identical), so this is as quick as one node.
    let v = all_reduce_1g_on_h100_nodes("4096");
    assert_eq!(v["n_ranks"], 32768);
    assert!(v["rows"][0]["expected_busbw_gbs"].as_f64().unwrap() > 10.0);
}

#[test]
fn readme_section_quotes_planner_expect_as_it_prints() {
    let readme =
        std::fs::read_to_string(format!("{}/README.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let section = readme
        .split("## What should my box deliver?")
        .nth(1)
        .expect("README section");
    let cmd_line = section
        .lines()
        .find(|l| l.starts_with("$ planner expect"))
        .expect("a $ planner expect line");
    let args: Vec<&str> = cmd_line
        .trim_start_matches("$ planner ")
        .split_whitespace()
        .collect();
    let quoted: String = section
        .split("```")
        .nth(1)
        .unwrap()
        .lines()
        .skip_while(|l| !l.starts_with("$ planner expect"))
        .skip(1)
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(run_ok(&args), quoted);
}

#[test]
fn explain_json_shows_the_expected_model_beside_nccls_estimate() {
    let out = planner()
        .args([
            "explain",
            "--fixture",
            "hgx-h100-8",
            "--size",
            "1G",
            "--json",
        ])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let v = json_of(&out);
    let w = &v["winner"];
    // NCCL's estimate and the expected time are separate keys: both present on NCCL's pick (NVLS at 1 GiB).
    assert!(w["time_us"].as_f64().unwrap() > 0.0);
    let expected = w["expected_time_us"].as_f64().unwrap();
    assert!(expected > 0.0 && w["expected_busbw_gbs"].as_f64().unwrap() > 0.0);
    // Masked pairs have no expected time.
    let pairs = v["pairs"].as_array().unwrap();
    assert!(pairs
        .iter()
        .filter(|p| p["usable"] == false)
        .all(|p| p["expected_time_us"].is_null()));
    let fastest = &v["expected_fastest"];
    let t = fastest["expected_time_us"].as_f64().unwrap();
    assert!(t <= expected);
    let gain = fastest["expected_gain_over_nccl_pick_pct"]
        .as_f64()
        .unwrap();
    assert!(
        (gain - 100.0 * (expected - t) / t).abs() < 1e-3,
        "{fastest}"
    );
}

#[test]
fn sixty_five_thousand_nodes_run_and_one_more_is_refused() {
    // Issue 24 item 7: NCCL has no node limit; planner takes up to 65,536 nodes (limits::MAX_NODES). 65,536 x 8 GPUs
    // costs one node's plan plus the per-rank tables (about 1.1 s and 340 MB here); one node more is bad input.
    let v = all_reduce_1g_on_h100_nodes("65536");
    assert_eq!(v["n_ranks"], 524_288);
    assert!(v["rows"][0]["expected_busbw_gbs"].as_f64().unwrap() > 10.0);
    let out = planner()
        .args(["expect", "--fixture", "hgx-h100-8", "--nodes", "65537"])
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}
