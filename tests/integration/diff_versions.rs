//! `planner diff --nccl-version A --against B`: bands, picks, times and causes, checked by hand.

use crate::common::planner;
use serde_json::Value;

fn diff_json(args: &[&str]) -> Value {
    let out = planner().args(args).arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn pair(v: &Value) -> String {
    format!(
        "{}/{}",
        v["algorithm"].as_str().unwrap(),
        v["protocol"].as_str().unwrap()
    )
}

fn whats(band: &Value) -> Vec<String> {
    band["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["change"]["what"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn nccl_2_22_vs_2_28_on_hgx_h100_8() {
    let d = diff_json(&[
        "diff",
        "--fixture",
        "hgx-h100-8",
        "--nccl-version",
        "2.22",
        "--against",
        "2.28",
        "--coll",
        "all-reduce,all-gather",
    ]);
    assert_eq!(
        (d["a"]["family"].as_str(), d["b"]["family"].as_str()),
        (Some("2.22"), Some("2.28"))
    );
    assert_eq!(
        d["steps"].as_array().unwrap().len(),
        6,
        "2.22 -> 2.23 -> ... -> 2.28"
    );
    let ar = &d["collectives"][0];
    assert_eq!(ar["collective"], "AllReduce");
    let bands = ar["bands"].as_array().unwrap();
    assert_eq!(bands.len(), 3);
    // By hand, one node of 8 H100, AllReduce:
    // Ring/LL: 15 µs + b / (llMaxBw 141 x 8/14 = 80.571 GB/s) under both families.
    // NVLS (graph: 8 channels, bw 40 intra / 60 inter): latency 25 µs under both;
    //   2.22 (rule nvls_min_intra_inter): 8 x min(40, 60) x 5/6 = 266.67 GB/s;
    //   2.28 (rule nvls_efficiency, nvlsEfficiency Hopper 0.85): 8 x min(40 x 0.85 x 7/8 x 2, 60)
    //   x 8/14 = 272.0 GB/s.
    // Crossovers where 25 + b/bw_nvls = 15 + b/80571: 2.22 at 10 / (1/80571 - 1/266667)
    // = 1154554 B, 2.28 at 10 / (1/80571 - 1/272000) = 1144836 B. Between them 2.22 keeps
    // Ring/LL and 2.28 runs NVLS/Simple.
    let changed = &bands[1];
    let (from, to) = (
        changed["from_bytes"].as_u64().unwrap(),
        changed["to_bytes"].as_u64().unwrap(),
    );
    assert!(
        from.abs_diff(1144836) < 16 && (to + 1).abs_diff(1154554) < 16,
        "{from}..{to}"
    );
    assert_eq!(pair(&changed["pick_a"]), "Ring/LL");
    assert_eq!(pair(&changed["pick_b"]), "NVLS/Simple");
    assert_eq!(changed["pick_changed"], true);
    let causes = whats(changed);
    for want in [
        "nvls_efficiency.Hopper",
        "rule:nvls_efficiency",
        "rule:nvls_min_intra_inter",
    ] {
        assert!(causes.iter().any(|c| c == want), "{want} not in {causes:?}");
    }
    // Nothing that cannot touch Ring/LL or NVLS on one node: PAT, Tree, multi-node rules,
    // other GPU generations.
    for c in &causes {
        assert!(
            !c.contains("pat")
                && !c.contains("Tree")
                && !c.contains("Blackwell")
                && c != "rule:nvls_multi_node_channels_min",
            "{c} named"
        );
    }
    // The 2.22 time at the band's start is Ring/LL's: 15 + 1144840 / 80571.43 = 29.2090 µs.
    let p = &changed["points"][0];
    assert!(
        (p["time_a_us"].as_f64().unwrap() - 29.2090).abs() < 1e-3,
        "{p}"
    );
    // Above both crossovers NVLS/Simple under both: 2.28 is faster by 1 - 266.67/272 = 2.0 %
    // of the bandwidth term at 4 GiB (16131 -> 15815 µs).
    let nvls = &bands[2];
    assert_eq!(pair(&nvls["pick_a"]), "NVLS/Simple");
    assert_eq!(nvls["pick_changed"], false);
    assert!(
        (nvls["time_change_pct"].as_f64().unwrap() + 1.96).abs() < 0.05,
        "{nvls}"
    );
    assert!(whats(nvls).iter().any(|c| c == "rule:nvls_efficiency"));
    // Below: Ring/LL under both, unchanged, no causes.
    assert_eq!(bands[0]["changed"], false);
    assert!(bands[0]["causes"].as_array().unwrap().is_empty());
    // AllGather on one node: Ring under both, the same constants: no band changed.
    let ag = &d["collectives"][1];
    assert!(ag["bands"]
        .as_array()
        .unwrap()
        .iter()
        .all(|b| b["changed"] == false));
}

#[test]
fn text_output_names_the_change_and_its_effect() {
    let out = planner()
        .args(["diff", "--fixture", "hgx-h100-8", "--nccl-version", "2.22"])
        .args([
            "--against",
            "2.28",
            "--coll",
            "all-reduce",
            "--sweep",
            "512K..4M",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("NCCL 2.22 (NCCL v2.22.3-1) vs 2.28 (NCCL v2.28.9-1) on fixture hgx-h100-8: 8 ranks on 1 node\n"), "{text}");
    assert!(text.contains("Ring/LL -> NVLS/Simple\n"), "{text}");
    assert!(
        text.contains("2.28: nvls_efficiency.Hopper 0.0 -> 0.85: on 2.28 without -> with it: Ring/LL -> NVLS/Simple at"),
        "{text}"
    );
}

#[test]
fn going_back_reverses_the_chain() {
    // 2.28 -> 2.22: the same band, picks swapped, the same causes.
    let d = diff_json(&[
        "diff",
        "--fixture",
        "hgx-h100-8",
        "--nccl-version",
        "2.28",
        "--against",
        "2.22",
        "--coll",
        "all-reduce",
        "--sweep",
        "512K..4M",
    ]);
    let band = d["collectives"][0]["bands"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["pick_changed"] == true)
        .unwrap()
        .clone();
    assert_eq!(pair(&band["pick_a"]), "NVLS/Simple");
    assert_eq!(pair(&band["pick_b"]), "Ring/LL");
    let c = band["causes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["change"]["what"] == "nvls_efficiency.Hopper")
        .unwrap();
    assert_eq!(
        (c["change"]["from"].as_f64(), c["change"]["to"].as_f64()),
        (Some(0.85), Some(0.0))
    );
}

#[test]
fn bad_requests_exit_2_with_one_line() {
    for args in [
        vec!["diff"],
        vec!["diff", "a.json"],
        vec!["diff", "--against", "2.28", "--plot", "x.svg"],
        vec!["diff", "--against", "1.9"],
        vec!["diff", "--against", "2.28", "--coll", "all-to-all"],
    ] {
        let out = planner()
            .args(&args)
            .args(["--fixture", "hgx-h100-8"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    }
}
