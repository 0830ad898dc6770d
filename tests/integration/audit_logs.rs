//! `planner audit` on the logs of issue 14 (public logs in tests/data/logs/audit/, sources in
//! its README): several ranks in one log (nccl-tests `-g 8`, `[r]` prefixes), logs with graph,
//! ring or tree lines but no TUNING table and no per-call line, the per-call format of
//! 2.20-2.22 and the bare version line of <= 2.21, the line each difference is reported on,
//! and the exit code (0 no difference, 1 differences, 2 bad input).

use crate::common::{assert_exit, golden, json_of, planner};
use planner::nccl_log::NcclLog;
use serde_json::{json, Value};

fn data(name: &str) -> String {
    format!(
        "{}/tests/data/logs/audit/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// nccl-tests#307: 8x RTX 4090, `all_reduce_perf -g 8` (one process, one thread per GPU),
/// NCCL 2.21.5; the excerpt has the graph lines of ranks 0-4 and nothing else to compare.
const G8: &str = "nccl-2.21.5-rtx4090x8-g8-issue307.log";
/// NVIDIA/nccl#1706: 2 GPUs, `all_reduce_perf -g 2`; each rank's thresholds and channel counts.
const G2: &str = "nccl-2x-g2-issue1706.log";
/// NVIDIA/nccl#2094: 8x H100 in one node, lines prefixed `[r]` only; comm and Trees lines.
const RANK_PREFIX: &str = "nccl-h100x8-rank-prefix-issue2094.log";

/// `text` in the file `name` of this test's scratch directory.
fn scratch(name: &str, text: &str) -> String {
    crate::common::with_scratch(|s| s.write(name, text).to_string_lossy().into_owned())
}

#[test]
fn g8_log_of_one_process_is_read_rank_by_rank() {
    let log = NcclLog::load(&data(G8)).unwrap();
    // 2.21 prints its version to stdout, without NCCL's prefix (line 7).
    assert_eq!(log.version.as_deref(), Some("2.21.5+cuda12.4"));
    // One process (node031:1936469), eight threads: each `[dev]` is a rank; the graph
    // lines grouped by rank, in NCCL's order within each rank.
    let sets: Vec<(Option<usize>, Vec<usize>)> = log
        .graph_sets()
        .iter()
        .map(|(s, g)| (log.streams[*s].rank, g.iter().map(|g| g.line).collect()))
        .collect();
    assert_eq!(
        sets,
        [
            (Some(0), vec![20, 28]),
            (Some(1), vec![22]),
            (Some(2), vec![26]),
            (Some(3), vec![24]),
            (Some(4), vec![30]),
        ]
    );
    assert!(log.multi_rank());
    // Graph lines only: no table, no per-call line (refused before issue 14).
    assert!(log.table.is_none() && log.calls.is_empty());
}

#[test]
fn g8_log_compares_each_ranks_graph_lines_on_their_own_line() {
    // The RTX 4090 machine's topology is not public; the stand-in is the 8-GPU two-socket
    // PCIe fixture, whose search gives the same pattern, path types (SYS/PIX) and
    // sameChannels but 2 channels of 20 GB/s where NCCL found 1 of 5 GB/s. Those are real
    // differences between the log and the stand-in; what is tested is that every rank's line
    // is compared with the graph of the same kind and reported on its own line. Before, the
    // log was refused (no table, no per-call line), and rank 1's tree line (the process's
    // third graph line) would have been compared with a collnet graph.
    let out = planner()
        .args(["audit", "--fixture", "pcie-rtxpro6000-8"])
        .arg(data(G8))
        .arg("--json")
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("18 differences between") && !err.contains("error"),
        "{err}"
    );
    let v = json_of(&out);
    assert_eq!(v["nccl_version"], "2.21.5+cuda12.4");
    assert_eq!(v["table_family"], "2.21");
    // 6 graph lines x 7 values; nothing else in the excerpt.
    assert_eq!(v["compared"], 42);
    let got: Vec<(u64, u64, String)> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rank"].as_u64().unwrap(),
                d["line"].as_u64().unwrap(),
                d["what"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want = Vec::new();
    for (rank, line, graph) in [
        (0, 20, "ring"),
        (0, 28, "tree"),
        (1, 22, "tree"),
        (2, 26, "tree"),
        (3, 24, "tree"),
        (4, 30, "ring"),
    ] {
        for field in ["channels", "bw intra", "bw inter"] {
            want.push((rank, line, format!("rank {rank} {graph} graph {field}")));
        }
    }
    assert_eq!(got, want);
    // Numbers as numbers.
    let d = &v["differences"];
    assert_eq!((&d[0]["nccl"], &d[0]["planner"]), (&json!(1), &json!(2)));
    assert_eq!(
        (&d[1]["nccl"], &d[1]["planner"]),
        (&json!(5.0), &json!(20.0))
    );
    // What the excerpt cut off is not a difference: ranks 1-3's ring lines came before it,
    // rank 4's tree line after it.
    let not_checked: Vec<&str> = v["not_checked"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(
        not_checked,
        [
            "rank 1: ring graph: no 'Pattern 4' line before line 22 (the log starts after it)",
            "rank 2: ring graph: no 'Pattern 4' line before line 26 (the log starts after it)",
            "rank 3: ring graph: no 'Pattern 4' line before line 24 (the log starts after it)",
            "rank 4: tree graph: the log ends within the graph lines (last one at line 30)",
        ]
    );
}

#[test]
fn rank_prefixed_log_with_only_tree_lines_agrees_with_the_h100_fixture() {
    // `[r] NCCL INFO`: no host:pid:tid; the comm and Init lines name the ranks. No table, no
    // per-call, no graph line: the communicator shape and every Trees entry are compared.
    let log = NcclLog::load(&data(RANK_PREFIX)).unwrap();
    let rank_of = |key: &str| log.streams.iter().find(|s| s.key == key).unwrap().rank;
    assert_eq!(
        (rank_of("[3]"), rank_of("[6]"), rank_of("[0]")),
        (Some(3), Some(6), Some(0))
    );
    assert_eq!(log.shape_line, 13);
    assert_eq!(log.trees.len(), 48);
    let out = planner()
        .args(["audit", "--fixture", "hgx-h100-8"])
        .arg(data(RANK_PREFIX))
        .arg("--json")
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let v = json_of(&out);
    // ranks, nodes, 2 x 24 Trees entries, 9 lines `NVLS multicast support is available on dev d
    // (NVLS_NCHANNELS 16)` (sm90's 16, the model's NVLS channel count).
    assert_eq!(v["compared"], 2 + 48 + 9);
    assert_eq!(v["differences"], json!([]));

    // The check can fail, on the line and rank that differ (hand-edited copy: rank 3's
    // channel 5 parent changed from 2 to 1 on line 18).
    let text = std::fs::read_to_string(data(RANK_PREFIX)).unwrap();
    let edited = text.replacen("[5] 4/-1/-1->3->2", "[5] 4/-1/-1->3->1", 1);
    assert_ne!(edited, text);
    let out = planner()
        .args(["audit", "--fixture", "hgx-h100-8"])
        .arg(scratch("rank3-tree.log", &edited))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    assert_eq!(
        v["differences"],
        json!([{
            "line": 18,
            "rank": 3,
            "what": "tree 5 rank 3",
            "nccl": "4/-1/-1->3->1",
            "planner": "4/-1/-1->3->2"
        }])
    );
}

#[test]
fn a_log_with_nothing_to_compare_is_bad_input() {
    // The first 12 lines of the #2094 excerpt: NCCL lines, none that the model predicts.
    let text: String = std::fs::read_to_string(data(RANK_PREFIX))
        .unwrap()
        .lines()
        .take(12)
        .map(|l| format!("{l}\n"))
        .collect();
    let path = scratch("affinity-only.log", &text);
    let out = planner()
        .args(["audit", "--fixture", "hgx-h100-8", &path])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{path}: nothing to compare")),
        "{err}"
    );
}

#[test]
fn issue1453_per_call_lines_of_2_22_are_reported_on_their_lines() {
    // `N Bytes -> Algo A proto P time T` (INFO, 2.20-2.22; the opCount-less form names no
    // collective). Against the hgx-h100-8 fixture x 3 nodes (a balanced tree, where IBM's
    // NCCL had a TREE-pattern graph) the pairs agree and the times differ: one difference
    // per per-call line, the time, on that line; exit 1.
    let path = format!(
        "{}/tests/data/logs/nccl-2.22.3-h100x24-ibm-issue1453.log",
        env!("CARGO_MANIFEST_DIR")
    );
    let call_lines: Vec<u64> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(" Bytes -> Algo "))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    assert_eq!(call_lines.len(), 26);
    let out = planner()
        .args(["audit", "--fixture", "hgx-h100-8", &path])
        .args(["--nccl-version", "2.22", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    let calls: Vec<&Value> = v["differences"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["what"].as_str().unwrap().starts_with("AllReduce: "))
        .collect();
    assert_eq!(
        calls
            .iter()
            .map(|d| d["line"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        call_lines
    );
    assert!(calls
        .iter()
        .all(|d| d["what"].as_str().unwrap().ends_with(" time_us")));
    assert_eq!(
        (&calls[0]["what"], &calls[0]["nccl"], &calls[0]["planner"]),
        (
            &json!("AllReduce: 256 Bytes time_us"),
            &json!(25.229528),
            &json!(25.2251)
        )
    );
}

#[test]
fn trace_per_call_lines_of_several_ranks_are_grouped() {
    // Hand-built (no public log has them: TRACE needs an NCCL built with TRACE=1): 2.28's
    // TRACE per-call line (v2.28.9-1 src/enqueue.cc:1863, every rank prints it) from one
    // process driving two GPUs, after each rank's NCCL_COLL opCount line.
    let text = "\
h:7:7 [0] NCCL INFO AllGather: opCount 0 sendbuff 0x1 recvbuff 0x2 count 256 datatype 7 op 0 root 0 comm 0x3 [nranks=2] stream 0x4
h:7:7 [1] NCCL INFO AllGather: opCount 0 sendbuff 0x5 recvbuff 0x6 count 256 datatype 7 op 0 root 0 comm 0x7 [nranks=2] stream 0x8
h:7:7 [0] 12.345678 getAlgoInfo:1863 NCCL TRACE 1024 Bytes -> Algo 1 proto 0 time 6.500000
h:7:7 [1] 12.345912 getAlgoInfo:1863 NCCL TRACE 1024 Bytes -> Algo 1 proto 0 time 6.500000
";
    let log = NcclLog::parse(text, "trace.log").unwrap();
    assert_eq!(log.calls.len(), 2);
    let ranks: Vec<(Option<usize>, usize, Option<usize>)> = log
        .calls
        .iter()
        .map(|c| (log.streams[c.stream].rank, c.line, c.coll_line))
        .collect();
    // Each TRACE line takes its collective from its own rank's opCount line.
    assert_eq!(ranks, [(Some(0), 3, Some(1)), (Some(1), 4, Some(2))]);
    assert!(log.calls.iter().all(|c| c.trace));
}

#[test]
fn table_differences_name_the_row_not_the_block_header() {
    // The capture's log (no difference with its own topology) with two values edited by
    // hand: AllReduce Ring/LL128 bandwidth on line 158 and the CollNetChain/Simple Max
    // NThreads on line 161; the block headers are lines 151 and 159.
    let text = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[150].contains("Algorithm") && lines[158].contains("Algorithm"));
    let mut edited: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    edited[157] = edited[157].replacen("17.8/ 331.2", "17.8/ 330.2", 1);
    edited[160] = edited[160].replacen(
        "|              0 |              0 |            640 |              0 |",
        "|              0 |              0 |            512 |              0 |",
        1,
    );
    assert!(edited[157] != lines[157] && edited[160] != lines[160]);
    let path = scratch("table-edit.log", &(edited.join("\n") + "\n"));
    let out = planner()
        .args(["audit", "--topo", &golden("topo.xml"), &path, "--json"])
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let v = json_of(&out);
    assert_eq!(
        v["differences"],
        json!([
            {"line": 161, "what": "CollNetChain Simple max threads", "nccl": 512, "planner": 640},
            {"line": 158, "what": "AllReduce Ring LL128 bandwidth", "nccl": 330.2, "planner": 331.2}
        ])
    );
    // The text report names the same lines.
    let out = planner()
        .args(["audit", "--topo", &golden("topo.xml"), &path])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("| 158      | AllReduce Ring LL128 bandwidth"),
        "{text}"
    );
}

#[test]
fn g2_log_compares_each_ranks_channel_counts_and_thresholds() {
    // Every rank prints its own `threadThresholds` and channel-count lines: each is compared
    // with the model and reported on its line. Stand-in topology (the log's machine is not
    // public): the 2-GPU PCIe fixture, same thresholds, 2 channels where NCCL had 4.
    let log = NcclLog::load(&data(G2)).unwrap();
    let counts: Vec<(Option<usize>, usize, usize)> = log
        .channels
        .iter()
        .map(|c| (log.streams[c.stream].rank, c.coll, c.line))
        .collect();
    assert_eq!(counts, [(Some(1), 4, 7), (Some(0), 4, 9)]);
    let thresholds: Vec<(Option<usize>, usize)> = log
        .thread_thresholds
        .iter()
        .map(|t| (log.streams[t.stream].rank, t.line))
        .collect();
    assert_eq!(thresholds, [(Some(1), 6), (Some(0), 8)]);
    let out = planner()
        .args(["audit", "--fixture", "pcie-rtx4000ada-2"])
        .arg(data(G2))
        .arg("--json")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v = json_of(&out);
    // 2 ranks x (2 channel counts + 8 thresholds).
    assert_eq!(v["compared"], 2 * (2 + 8));
    assert_eq!(
        v["differences"],
        json!([
            {"line": 7, "rank": 1, "what": "rank 1 coll channels", "nccl": 4, "planner": 2},
            {"line": 9, "rank": 0, "what": "rank 0 coll channels", "nccl": 4, "planner": 2}
        ])
    );
}

#[test]
fn json_differences_carry_numbers_and_no_line_as_null() {
    let number = planner::audit::Difference {
        line: 158,
        rank: None,
        what: "AllReduce Ring LL128 bandwidth".into(),
        nccl: "330.2".into(),
        planner: "331.2".into(),
    };
    assert_eq!(
        serde_json::to_value(&number).unwrap(),
        json!({"line": 158, "what": "AllReduce Ring LL128 bandwidth", "nccl": 330.2, "planner": 331.2})
    );
    // A graph the planner searched and the log does not have: no line; text stays text.
    let missing = planner::audit::Difference {
        line: 0,
        rank: Some(2),
        what: "rank 2 NVLS graph".into(),
        nccl: "not in the log".into(),
        planner: "searched".into(),
    };
    assert_eq!(
        serde_json::to_value(&missing).unwrap(),
        json!({"line": null, "rank": 2, "what": "rank 2 NVLS graph", "nccl": "not in the log", "planner": "searched"})
    );
}
