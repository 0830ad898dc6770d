//! `planner audit` on logs taken on the GPU machine with NCCL_* variables set (tests/data/logs/*/README.md).

use crate::common::planner;

fn data(name: &str) -> String {
    format!("{}/tests/data/logs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `planner audit --topo DIR/topo.xml DIR/nccl.log --json`, which must exit 0; its JSON.
fn audit_clean(dir: &str) -> serde_json::Value {
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
    assert_eq!(out.status.code(), Some(0), "{dir}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// NCCL_MAX_CTAS=8 on one H200: 8 runtime channels (`8 coll channels`, `Trees [0]..[7]`), but the 64 `Tree c :`
/// lines `connectTrees` prints before the cut (2 x 32 search channels) are compared with the trees before the cut.
#[test]
fn max_ctas_log_agrees_with_the_model_including_the_pre_cut_tree_lines() {
    let dir = "h200x1-nccl-2.28.3-max-ctas-8";
    let json = audit_clean(dir);
    assert_eq!(json["differences"].as_array().map(Vec::len), Some(0));
    // 64 `Tree c :` lines, 8 Trees entries, the channel count and the graphs were all compared.
    assert!(json["compared"].as_u64().unwrap() >= 64 + 8 + 2, "{json}");
    assert_eq!(json["nccl_env"]["NCCL_MAX_CTAS"], "8");
}

/// Two ranks on one H200 as two hosts (distinct NCCL_HOSTID), NET/Socket over a virtio NIC with no speed file
/// (NCCL's 10 Gb/s default), NCCL 2.28.9: the tuning table, graphs, rings, trees and 276 per-call choices agree, for
/// NCCL's own choice (Ring/LL -> Ring/Simple) and with NCCL_ALGO=Tree (Tree/LL -> Tree/Simple).
#[test]
fn socket_logs_of_two_hosts_on_one_gpu_agree_with_the_model() {
    for case in ["default", "tree"] {
        let dir = format!("h200x1-nccl-2.28.9-socket-2hosts/{case}");
        let json = audit_clean(&dir);
        assert_eq!(
            json["differences"].as_array().map(Vec::len),
            Some(0),
            "{case}: {json}"
        );
        // The init table (3 x 7 x 5 cells), the graphs and the 276 per-call lines were all compared.
        assert!(
            json["compared"].as_u64().unwrap() >= 276 + 105,
            "{case}: {json}"
        );
        assert_eq!(json["nccl_env"]["NCCL_P2P_DISABLE"], "1", "{case}");
    }
    // NCCL_ALGO=Tree is read from the log, so the Tree case is compared with a Tree-only menu.
    let tree =
        std::fs::read_to_string(data("h200x1-nccl-2.28.9-socket-2hosts/tree/nccl.log")).unwrap();
    assert!(tree.contains("Algo TREE proto SIMPLE") && !tree.contains("Algo RING"));
}
