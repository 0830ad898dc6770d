//! `planner audit` on logs taken on the GPU machine with NCCL_* variables set (tests/data/logs/*/README.md).

use crate::common::planner;

fn data(name: &str) -> String {
    format!("{}/tests/data/logs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// NCCL_MAX_CTAS=8 on one H200: 8 runtime channels (`8 coll channels`, `Trees [0]..[7]`), but the 64 `Tree c :`
/// lines `connectTrees` prints before the cut (2 x 32 search channels) are compared with the trees before the cut.
#[test]
fn max_ctas_log_agrees_with_the_model_including_the_pre_cut_tree_lines() {
    let dir = "h200x1-nccl-2.28.3-max-ctas-8";
    let out = planner()
        .args([
            "audit",
            "--topo",
            &data(&format!("{dir}/topo.xml")),
            &data(&format!("{dir}/nccl.log")),
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["differences"].as_array().map(Vec::len), Some(0));
    // 64 `Tree c :` lines, 8 Trees entries, the channel count and the graphs were all compared.
    assert!(json["compared"].as_u64().unwrap() >= 64 + 8 + 2, "{json}");
    assert_eq!(json["nccl_env"]["NCCL_MAX_CTAS"], "8");
}
