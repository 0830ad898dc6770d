//! `planner audit` on what the log says of the job's shape and NCCL version (issue 27, round 3): `--nodes` for a log
//! without `nNodes` and the node count inferred from the ranks its lines name, the init lines it checks (NVLS heads)
//! or lists, the families its line formats allow, and `NCCL_IB_HCA` on a stand-in whose NIC names are not the
//! machine's. Logs: tests/data/logs/README.md.

use crate::common::{assert_exit, json_of, planner};

fn data(name: &str) -> String {
    format!("{}/tests/data/logs/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn scratch(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("planner-audit-shape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

/// NVIDIA/nccl#1453 cut to the lines without the `comm ... nRanks 24 nNodes 3` line: NVLS heads and rank 0's rings
/// 00, 06, 08, 10 and 12 (the ones the hgx-h100-8 stand-in reproduces; README).
const NO_COMM: &str = "nccl-2.22.3-h100x24-ibm-issue1453-no-comm.log";
const ISSUE1453: &str = "nccl-2.22.3-h100x24-ibm-issue1453.log";

fn audit(args: &[&str]) -> std::process::Output {
    planner().arg("audit").args(args).output().unwrap()
}

#[test]
fn a_log_without_nnodes_audits_with_nodes_or_infers_them_from_its_ranks() {
    let log = data(NO_COMM);
    let base = ["--fixture", "hgx-h100-8", "--nccl-version", "2.22"];
    // --nodes 3: 24 ranks; 8 NVLS heads (h, h+8, h+16), ring channels 16 = 16 and 5 ring orders of 20 ranks.
    let out = audit(&[&base[..], &[log.as_str(), "--nodes", "3", "--json"]].concat());
    assert_exit(&out, 0);
    let v = json_of(&out);
    assert_eq!(v["compared"], 8 + 1 + 5, "{v}");
    assert_eq!(v["differences"], serde_json::json!([]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("no line gives the rank count"), "{err}");

    // Without --nodes: the ranks named (up to 23, the NVLS head line 11) give 3 nodes of 8, with a warning.
    let out = audit(&[&base[..], &[log.as_str(), "--json"]].concat());
    assert_exit(&out, 0);
    let v = json_of(&out);
    assert_eq!(v["compared"], 14);
    assert_eq!(v["differences"], serde_json::json!([]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "no line gives the rank count; the ring, tree and NVLS head lines name ranks up to 23 (line 11)"
        ) && err.contains("audited as 3 nodes of 8 GPUs = 24 ranks"),
        "{err}"
    );

    // The comparison can fail: --nodes 4 (32 ranks; accepted, no line contradicts it) gives every NVLS head a
    // fourth node's rank and reorders ring 06; an edited ring order differs on its line.
    let out = audit(&[&base[..], &[log.as_str(), "--nodes", "4", "--json"]].concat());
    assert_exit(&out, 1);
    let v = json_of(&out);
    let whats: Vec<&str> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["what"].as_str())
        .collect();
    assert_eq!(whats.len(), 9, "{whats:?}");
    assert!(
        whats.contains(&"ring 06 order") && whats.contains(&"NVLS head 7"),
        "{whats:?}"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    let edited = text.replace(
        "Channel 08/16 :    0   7   6   5",
        "Channel 08/16 :    0   7   6   4",
    );
    assert_ne!(edited, text);
    let path = scratch("ring-edited.log", &edited);
    let out = audit(&[&base[..], &[path.as_str(), "--nodes", "3", "--json"]].concat());
    assert_exit(&out, 1);
    let v = json_of(&out);
    assert_eq!(v["differences"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["differences"][0]["what"], "ring 08 order");
    assert_eq!(v["differences"][0]["line"], 14);
}

#[test]
fn nodes_that_contradict_the_log_are_bad_input() {
    // The log names rank 23: 2 nodes of 8 cannot hold it.
    let out = audit(&["--fixture", "hgx-h100-8", &data(NO_COMM), "--nodes", "2"]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.contains("audit --nodes 2: 2 x 8 GPUs = 16 ranks contradicts the log")
            && err.contains("no-comm.log:11 names rank 23"),
        "{err}"
    );
    // The whole log says nNodes 3 (line 4): --nodes 3 is accepted, --nodes 2 refused naming the line.
    let out = audit(&["--fixture", "hgx-h100-8", &data(ISSUE1453), "--nodes", "2"]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("audit --nodes 2 contradicts the log")
            && err.contains("issue1453.log:4 says nNodes 3"),
        "{err}"
    );
    let out = audit(&[
        "--fixture",
        "hgx-h100-8",
        &data(ISSUE1453),
        "--nodes",
        "3",
        "--nccl-version",
        "2.22",
        "--json",
    ]);
    assert_exit(&out, 1);
    assert_eq!(json_of(&out)["table_family"], "2.22");
    // 0 is no node count.
    let out = audit(&["--fixture", "hgx-h100-8", &data(NO_COMM), "--nodes", "0"]);
    assert_exit(&out, 2);
}

#[test]
fn nvls_head_lines_are_compared_with_the_nvls_graph() {
    // Node 0 prints `NVLS Head h:` and each node's rank of head h (connect.cc:277-286): on 3 nodes of the stand-in,
    // head h is local GPU h, ranks h, 8 + h, 16 + h. An edited line differs there.
    let text = std::fs::read_to_string(data(NO_COMM)).unwrap();
    let edited = text.replace("NVLS Head  5:  5 13 21", "NVLS Head  5:  5 13 20");
    assert_ne!(edited, text);
    let path = scratch("head-edited.log", &edited);
    let out = audit(&[
        "--fixture",
        "hgx-h100-8",
        &path,
        "--nodes",
        "3",
        "--nccl-version",
        "2.22",
        "--json",
    ]);
    assert_exit(&out, 1);
    let v = json_of(&out);
    let d = &v["differences"][0];
    assert_eq!(
        (&d["line"], &d["what"], &d["nccl"], &d["planner"]),
        (
            &serde_json::json!(9),
            &serde_json::json!("NVLS head 5"),
            &serde_json::json!("5 13 20"),
            &serde_json::json!("5 13 21")
        )
    );
}

#[test]
fn line_formats_name_the_families_a_log_without_a_version_allows() {
    // The 2.22.3 log (#1453): ring lines of ' %3d' (2.18-2.22) and INFO per-call lines 'N Bytes -> Algo i proto j time T'
    // (2.20-2.22). Audited as 2.30 it gets a warning naming both; as 2.22 none.
    let out = audit(&[
        "--fixture",
        "hgx-h100-8",
        &data(ISSUE1453),
        "--nccl-version",
        "2.30",
        "--json",
    ]);
    let v = json_of(&out);
    let notices: Vec<&str> = v["notices"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n.as_str())
        .collect();
    assert!(
        notices.iter().any(|n| n.starts_with(
            "the log names no NCCL version; its line formats allow NCCL 2.20, 2.21, 2.22:"
        )),
        "{notices:?}"
    );
    let warning = notices
        .iter()
        .find(|n| n.starts_with("warning: audited with the NCCL 2.30 model"))
        .expect("a warning");
    assert!(
        warning.contains("ring lines 'Channel cc/nn :    0   1' (ranks as ' %3d') (line 13) are printed by NCCL 2.18-2.22 only")
            && warning.contains("per-call INFO lines 'N Bytes -> Algo i proto j time T' (line 24) are printed by NCCL 2.20-2.22 only"),
        "{warning}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("planner: warning: audited with the NCCL 2.30 model"),
        "{err}"
    );
    let out = audit(&[
        "--fixture",
        "hgx-h100-8",
        &data(ISSUE1453),
        "--nccl-version",
        "2.22",
        "--json",
    ]);
    let v = json_of(&out);
    assert!(!v["notices"].to_string().contains("warning:"), "{v}");

    // NVIDIA/nccl#1706 ("2.23 or later"): 'Check P2P Type intraNodeP2pSupport' is 2.24-2.26's alone; #2094 ("2.28
    // or 2.29"): 'NVLS multicast support ... (NVLS_NCHANNELS 16)' is 2.27-2.29's.
    for (log, allowed) in [
        ("audit/nccl-2x-g2-issue1706.log", "2.24, 2.25, 2.26"),
        (
            "audit/nccl-h100x8-rank-prefix-issue2094.log",
            "2.27, 2.28, 2.29",
        ),
    ] {
        let out = audit(&[
            "--fixture",
            "hgx-h100-8",
            &data(log),
            "--nccl-version",
            "2.28",
            "--json",
        ]);
        let notices = json_of(&out)["notices"].to_string();
        assert!(
            notices.contains(&format!("its line formats allow NCCL {allowed}:")),
            "{log}: {notices}"
        );
        assert_eq!(
            notices.contains("warning: audited with the NCCL 2.28 model"),
            log.contains("1706"),
            "{log}: {notices}"
        );
    }
}

/// devopsrustem/slurmv4 (README): ranks 8-15 of a 2-node H100 job on 8 RoCE NICs named mlx5_0,1,2,5,6,7,8,11
/// (`NCCL_IB_HCA` lists them), on a server with one GPU and one NIC per PCIe switch.
const EIGHT_NIC: &str = "nccl-2.27.5-h100-roce-8nic-slurmv4.log";

#[test]
fn ib_hca_on_a_stand_in_with_other_nic_names_is_not_applied_and_says_so() {
    // azure-ndv5 (one GPU + one NIC per switch, NICs mlx5_ib0..7): the filter names none of them. NCCL would keep
    // none and fall back to sockets, but the log shows 8 NICs in use: the names are not the machine's, so all 8
    // are kept, with a notice: 0 differences (before: every NIC dropped, and no search across the nodes at all).
    let out = audit(&["--fixture", "azure-ndv5", &data(EIGHT_NIC), "--json"]);
    assert_exit(&out, 0);
    let v = json_of(&out);
    assert_eq!(v["differences"], serde_json::json!([]));
    assert!(v["compared"].as_u64().unwrap() > 200, "{v}");
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_5,mlx5_6,mlx5_7,mlx5_8,mlx5_11 names none of the topology's 8 NICs")
            && notices.contains("so the filter is not applied (all 8 NICs kept)"),
        "{notices}"
    );
    // hgx-h100-8 (mlx5_0..7): mlx5_8 and mlx5_11 name no NIC of it (prefix matching would keep 6 of 8, dropping
    // mlx5_3 and mlx5_4 that the machine does not have under those names): the filter is not applied either.
    // What differs then is the stand-in itself (2 GPUs and 2 NICs per switch: its trees), 64 differences where
    // the 6-NIC topology gave 83.
    let out = audit(&["--fixture", "hgx-h100-8", &data(EIGHT_NIC), "--json"]);
    assert_exit(&out, 1);
    let v = json_of(&out);
    let notices = v["notices"].to_string();
    assert!(
        notices.contains(
            "has mlx5_8, mlx5_11 that name no NIC of the topology (it would keep 6 of its 8 NICs)"
        ),
        "{notices}"
    );
    let n = v["differences"].as_array().unwrap().len();
    assert_eq!(n, 64, "{v}");
    // The 1-NIC run of the same cluster names mlx5_0, which hgx-h100-8 has: the filter applies, no notice.
    let out = audit(&[
        "--fixture",
        "hgx-h100-8",
        &data("nccl-2.27.5-h100-roce-1nic-slurmv4.log"),
        "--json",
    ]);
    assert_exit(&out, 0);
    assert!(!json_of(&out)["notices"].to_string().contains("NCCL_IB_HCA"));
}

#[test]
fn an_inferred_node_count_beyond_planner_s_limit_is_bad_input() {
    // A ring line naming rank 2000000000 on an 8-GPU node: 250 million nodes, refused naming the line, no panic.
    let text = "h:1:1 [0] NCCL INFO Channel 00/02 :    0 2000000000\n";
    let path = scratch("huge-rank.log", text);
    let out = audit(&["--fixture", "hgx-h100-8", &path, "--nccl-version", "2.22"]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("huge-rank.log:1: rank 2000000000"), "{err}");
}
