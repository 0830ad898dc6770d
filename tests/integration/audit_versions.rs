//! `planner audit` on the log formats of NCCL 2.18-2.30: a public NCCL 2.22.3 log
//! (NVIDIA/nccl#1453), per-call lines of every format, bare version lines, the 6-algorithm
//! table of 2.18-2.22, planner's tuner plugin lines, logs newer than the newest model, and
//! the TUNING table as model cells (`table_from_log`).

use crate::common::{assert_exit, golden, planner};
use planner::audit;
use planner::model::input::NvlsFlag;
use planner::model::select::Call;
use planner::model::{table, Algo, Coll, Model, Proto};
use planner::nccl_env::NcclEnv;
use planner::nccl_log::{self, table_from_log};
use planner::nccl_log::{CallFormat, NcclLog, PluginOutcome};
use planner::pipeline::{self, Source};
use planner::search::Pattern;

fn data(name: &str) -> String {
    format!("{}/tests/data/logs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// The machine of NVIDIA/nccl#1453 as far as its log shows it: 3 nodes of 8 H100 (the
/// `comm` line: nRanks 24 nNodes 3 localRanks 8; 16 runtime channels), taken from the
/// hgx-h100-8 fixture (Intel CPUs, one NIC per GPU), with the tree graph reconstructed
/// from the log's own per-call times: NCCL 2.22 applies the x0.85 of a TREE-pattern graph
/// (Tree/LL bandwidth 8.67 = 20.4 x 0.85 x 0.5 below) and its Tree/LL128 bandwidth needs
/// nChannels x bw = 192 (8 channels x 24 GB/s, the search ladder's value for 200 Gb/s NICs).
fn issue1453_model(family: &str) -> Model {
    let cluster = Source {
        fixture: Some("hgx-h100-8".into()),
        nodes: 3,
        ..Default::default()
    }
    .load()
    .unwrap();
    let env = NcclEnv::default();
    let (mut graphs, channels) = pipeline::graphs_for(&cluster, &env, true, None).unwrap();
    assert_eq!(channels, 16, "the log's 'Channel 00/16' lines");
    graphs.tree.pattern = Pattern::Tree;
    graphs.tree.n_channels = 8;
    graphs.tree.bw_intra = 24.0;
    graphs.tree.bw_inter = 24.0;
    let t = table::builtin(family).unwrap();
    pipeline::model_from_graphs(&cluster, &graphs, channels, t, env, NvlsFlag::Auto).unwrap()
}

#[test]
fn issue1453_nccl_2_22_per_call_lines_and_times() {
    let log = NcclLog::load(&data("nccl-2.22.3-h100x24-ibm-issue1453.log")).unwrap();
    // No version line in the excerpt (the issue says 2.22.3); 26 per-call lines of the
    // 2.20-2.22 format, which names neither the collective nor the channels.
    assert_eq!(log.version, None);
    assert_eq!((log.n_ranks, log.n_nodes), (Some(24), Some(3)));
    assert_eq!(log.calls.len(), 26);
    assert!(log
        .calls
        .iter()
        .all(|c| c.format == CallFormat::Timed && c.coll.is_none() && c.channels.is_none()));
    let first = &log.calls[0];
    assert_eq!(
        (
            first.bytes,
            first.algo,
            first.proto,
            first.time_us.as_deref()
        ),
        (256, Algo::Tree, Proto::Ll, Some("25.229528"))
    );
    // nccl-tests output glued in front of NCCL's prefix still gives the process.
    assert_eq!(log.calls[11].process, "h100clust-worker-1:497888");
    // Rank 0's rings: 20 of 24 ranks per line (2.22's dumpLine), channels 0, 1, 5-13.
    assert_eq!(log.rings.len(), 11);
    assert_eq!(log.rings[0].n_channels, 16);
    assert_eq!(
        log.rings[0].ranks,
        [0, 7, 6, 5, 4, 3, 2, 1, 8, 15, 14, 13, 12, 11, 10, 9, 16, 23, 22, 21]
    );

    // By hand, NCCL 2.22, AllReduce, 3 nodes x 8 GPUs, NVLink inside, Intel CPUs:
    // Tree/LL latency 6.8 + 2 x (7 x 0.6 + log2(3)=1 x 5.0) = 25.2 µs; bandwidth
    // min(busBw / 3.8, llMaxBw = 20.4 (Intel row, >= 3 nodes)) x 0.85 (TREE) x 0.5
    // (tree algbw) = 8.67 GB/s; 256 B: 25.2 + 256 / 8670 = 25.229527 -> "25.229528".
    // 65536 B: treeCorrectionFactor[LL][log2(65536/64) = 10] = 0.6: 25.2 + 65536 / (8670 x 0.6) = 37.798.
    // Tree/LL128 latency 14.0 + 2 x (7 x 1.25 + 8.5) = 48.5 µs, x0.6 at 131072 B.
    let model = issue1453_model("2.22");
    let report = audit::audit(&log, &model, None).unwrap();
    assert!(report.differences.is_empty(), "{:#?}", report.differences);
    // 2 communicator values + 26 calls x (pair, time); the 11 ring lines and the 8 NVLS head
    // lines need the planner's search.
    assert_eq!(report.compared, 2 + 26 * 2);
    assert_eq!(report.not_checked.len(), 2, "{:?}", report.not_checked);
    assert!(report.not_checked[1].starts_with("8 'NVLS Head' line(s)"));
    assert!(report.notices[0].contains("26 per-call line(s) name no collective"));

    // The check can fail: a balanced-tree graph (no x0.85) moves every Tree/LL time.
    let mut balanced = issue1453_model("2.22");
    balanced.input.tree.pattern = Pattern::BalancedTree;
    let balanced = Model::new(
        balanced.input,
        NcclEnv::default(),
        table::builtin("2.22").unwrap(),
    )
    .unwrap();
    let report = audit::audit(&log, &balanced, None).unwrap();
    // Same pair, other time: the time alone differs.
    let d = &report.differences[0];
    assert_eq!(
        (d.line, d.what.as_str(), d.nccl.as_str(), d.planner.as_str()),
        (24, "AllReduce: 256 Bytes time_us", "25.229528", "25.225100")
    );
}

#[test]
fn issue1453_through_the_cli_compares_rings_with_the_fixture() {
    // The fixture's search is not IBM's machine: the ring lines that differ say so, and
    // the per-call times differ by the tree pattern (the fixture finds a balanced tree).
    let out = planner()
        // The node count (3) is the log's own.
        .args(["audit", "--fixture", "hgx-h100-8"])
        .arg(data("nccl-2.22.3-h100x24-ibm-issue1453.log"))
        .args(["--nccl-version", "2.22", "--json"])
        .output()
        .unwrap();
    // Differences found: exit 1 (it exited 0 before issue 14), the report still on stdout.
    assert_exit(&out, 1);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["table_family"], "2.22");
    let diffs = v["differences"].as_array().unwrap();
    // Channels 00, 06, 08, 10 and 12 of the log equal the fixture's rings.
    let ring_diffs: Vec<&str> = diffs
        .iter()
        .filter_map(|d| d["what"].as_str())
        .filter(|w| w.starts_with("ring "))
        .collect();
    assert_eq!(
        ring_diffs,
        [
            "ring 01 order",
            "ring 05 order",
            "ring 07 order",
            "ring 09 order",
            "ring 11 order",
            "ring 13 order"
        ]
    );
    assert!(v["not_checked"][0]
        .as_str()
        .unwrap()
        .starts_with("graphs: the log has no 'Pattern ...' lines"));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("compared as AllReduce"), "{err}");
}

#[test]
fn per_call_lines_of_every_family() {
    // 2.23 (v2.23.4-1 src/enqueue.cc:1855), 2.20-2.22 INFO and TRACE (v2.28.9-1
    // src/enqueue.cc:1863, prefix `host:pid:tid [dev] ms func:line NCCL TRACE `, src/debug.cc),
    // and 2.24+.
    let text = "\
h:7:7 [0] NCCL INFO AllGather: 37756928 Bytes -> Algo 1 proto 2 time 2860.208008
h:7:9 [0] 12.345678 getAlgoInfo:1863 NCCL TRACE 1048576 Bytes -> Algo 4 proto 2 time 29.040001
h:7:7 [0] NCCL INFO Broadcast: opCount 3 sendbuff 0x1 recvbuff 0x1 count 64 datatype 7 op 0 root 0 comm 0x2 [nranks=8] stream 0x3
h:7:7 [0] NCCL INFO 256 Bytes -> Algo 1 proto 0 time 7.123456
h:7:7 [0] NCCL INFO ReduceScatter: 1024 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..1}
";
    let log = NcclLog::parse(text, "calls.log").unwrap();
    let c = &log.calls;
    assert_eq!(c.len(), 4);
    assert_eq!(
        (c[0].coll, c[0].format, c[0].algo, c[0].proto),
        (
            Some(Coll::AllGather),
            CallFormat::NamedTimed,
            Algo::Ring,
            Proto::Simple
        )
    );
    assert!(c[1].trace && c[1].coll.is_none() && c[1].algo == Algo::Nvls);
    // The Broadcast opCount line (NCCL_COLL) names the next call of its process.
    assert_eq!(
        (c[2].coll, c[2].coll_line),
        (Some(Coll::Broadcast), Some(3))
    );
    assert_eq!(c[3].channels, Some((0, 1)));
    assert_eq!(c[3].n_bytes(8), 8192, "per-rank bytes x nRanks");
    assert_eq!(c[0].n_bytes(8), 37756928, "nBytes as printed");
    // Broken lines name the line.
    let err =
        NcclLog::parse("x NCCL INFO 12 Bytes -> Algo 9 proto 0 time 1.0", "b.log").unwrap_err();
    assert_eq!(
        err.to_string(),
        "b.log:1: unknown algorithm index 9 in per-call line"
    );
    let err =
        NcclLog::parse("x NCCL INFO 12 Bytes -> Algo 1 proto 0 time fast", "b.log").unwrap_err();
    assert!(err
        .to_string()
        .starts_with("b.log:1: per-call line does not parse"));
}

#[test]
fn bare_version_lines_and_2_18_communicator_lines() {
    // Up to 2.21 NCCL printf's the version to stdout (v2.18.6-1 src/init.cc:452), so it
    // carries no NCCL prefix, possibly a launcher's.
    let text = "\
(WorkerDict pid=295552) NCCL version 2.20.5+cuda12.4
h:1:2 [0] NCCL INFO comm 0x55 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 1b000 commId 0x9 - Init START
h:1:2 [0] NCCL INFO 16 coll channels, 0 nvls channels, 16 p2p channels, 2 p2p channels per peer
h:1:1 [0] NCCL INFO 1024 Bytes -> Algo 1 proto 0 time 8.000000
";
    let log = NcclLog::parse(text, "old.log").unwrap();
    assert_eq!(log.version.as_deref(), Some("2.20.5+cuda12.4"));
    assert_eq!(log.family(), Some((2, 20)));
    assert_eq!(log.n_ranks, Some(16));
    // 2.18-2.19 print no collnet count: the counts are read by label.
    assert_eq!(
        log.channels
            .iter()
            .map(|c| (c.coll, c.nvls, c.line))
            .collect::<Vec<_>>(),
        [(16, 0, 3)]
    );
}

#[test]
fn a_log_of_several_processes_keeps_each_ranks_graphs() {
    // Every rank prints its graph lines; ring and tree lines name their rank.
    let text = "a:1:1 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1
b:2:2 [1] NCCL INFO Pattern 4, crossNic 0, nChannels 2, bw 20.000000/20.000000, type NVL/PIX, sameChannels 1
a:1:1 [0] NCCL INFO Pattern 1, crossNic 0, nChannels 2, bw 40.000000/40.000000, type NVL/PIX, sameChannels 0
b:2:2 [1] NCCL INFO Pattern 1, crossNic 0, nChannels 2, bw 40.000000/40.000000, type NVL/PIX, sameChannels 0
a:1:1 [0] NCCL INFO Ring 00 : 1 -> 0 -> 1
b:2:2 [1] NCCL INFO Ring 00 : 0 -> 1 -> 0
b:2:2 [1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] -1/-1/-1->1->0
a:1:1 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}
";
    let log = NcclLog::parse(text, "ranks.log").unwrap();
    // Each rank's graphs are kept and grouped by rank (issue 14: rank 1's lines were
    // compared with rank 0's model by position). Two processes and no `comm` line: the
    // ranks are not known, the streams still are.
    let sets = log.graph_sets();
    assert_eq!(sets.len(), 2);
    assert_eq!(
        sets.iter()
            .map(|(_, g)| g.iter().map(|g| g.line).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        [[1, 3], [2, 4]]
    );
    assert_eq!(log.streams[0].key, "a:1 [0]");
    assert_eq!(log.streams[0].rank, None);
    assert_eq!(
        log.ring_links.iter().map(|l| l.rank).collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(
        log.trees
            .iter()
            .map(|t| (t.channel, t.rank, t.up))
            .collect::<Vec<_>>(),
        [(0, 1, 0), (1, 1, 0)]
    );
}

/// The capture's log with its NCCL table in the 2.18-2.22 layout (two blocks, no PAT).
fn six_block_log(version: &str) -> String {
    let full = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    let pat = lines
        .iter()
        .position(|l| l.contains("Algorithm   |") && l.contains("PAT"))
        .unwrap();
    let mut kept: Vec<String> = lines[..pat]
        .iter()
        .chain(&lines[pat + 8..])
        .map(|l| l.to_string())
        .collect();
    for l in kept.iter_mut() {
        if l.contains("NCCL version") {
            *l = format!("NCCL INFO NCCL version {version}");
        }
    }
    kept.join("\n")
}

#[test]
fn six_algorithm_table_of_2_18_to_2_22() {
    let log = NcclLog::parse(&six_block_log("2.22.3+cuda12.4"), "six.log").unwrap();
    let t = log.table.as_ref().unwrap();
    assert_eq!(t.algorithms.len(), 6);
    assert!(!t.algorithms.contains(&Algo::Pat));
    // The same table under a 2.23+ version is a table cut short.
    let err = NcclLog::parse(&six_block_log("2.28.9+cuda13.0"), "six.log").unwrap_err();
    assert!(err.to_string().contains("cut short: no PAT block"), "{err}");
    // Audited with the capture model: every cell of the 6 blocks compared, none differs
    // (the capture's cells are the same under 2.22 and 2.28 except PAT).
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let model = Model::new(
        planner::model::examples::h200x2_capture(),
        env,
        table::builtin("2.28").unwrap(),
    )
    .unwrap();
    let report = audit::audit(&log, &model, None).unwrap();
    assert!(report.differences.is_empty(), "{:?}", report.differences);
    assert_eq!(report.compared, 2 + 2 + 18 + 180 + 8);
}

/// The capture log with planner-tuner lines and NCCL per-call lines (tuner/README.md).
fn plugin_log(nccl_pair_at_64k: &str) -> String {
    let mut text = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    text.push_str(&format!(
        "\
NCCL INFO planner-tuner: plan /tmp/plan.json applies: 3 of 3 rules for nRanks 2 nNodes 1 (from verify results.json, made with NCCL 2.28.3, running NCCL 2.28.9)
NCCL INFO planner-tuner: AllReduce 4096 bytes nRanks 2 nNodes 1 -> kept (no rule)
NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{{Lo..Hi}}={{0..0}}
NCCL INFO planner-tuner: AllReduce 65536 bytes nRanks 2 nNodes 1 -> Tree/Simple channels 4 (rule 1)
NCCL INFO AllReduce: 65536 Bytes -> Algo {nccl_pair_at_64k} channel{{Lo..Hi}}={{0..3}}
NCCL INFO planner-tuner: AllGather 8192 bytes nRanks 2 nNodes 1 -> Ring/Simple channels - (rule 2)
NCCL INFO AllGather: 4096 Bytes -> Algo RING proto SIMPLE channel{{Lo..Hi}}={{0..0}}
"
    ));
    text
}

#[test]
fn tuner_plugin_decisions_are_checked_against_nccls_choice() {
    let log = NcclLog::parse(&plugin_log("TREE proto SIMPLE"), "plugin.log").unwrap();
    assert_eq!(log.plugin_decisions.len(), 3);
    assert_eq!(
        log.plugin_decisions[1].outcome,
        PluginOutcome::Steered {
            algo: Algo::Tree,
            proto: Proto::Simple,
            channels: Some(4),
            rule: 1
        }
    );
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let model = Model::new(
        planner::model::examples::h200x2_capture(),
        env,
        table::builtin("2.28").unwrap(),
    )
    .unwrap();
    // The model itself picks Ring/LL at 64 KiB: the steered call is checked against the plugin.
    let call = Call::new(Coll::AllReduce, 65536, 2, 1).unwrap();
    assert_eq!(model.plan(&call).unwrap().choice.algo, Algo::Ring);
    let report = audit::audit(&log, &model, None).unwrap();
    assert!(report.differences.is_empty(), "{:?}", report.differences);
    let p = report.plugin.as_ref().unwrap();
    assert_eq!(
        (p.decisions, p.steered, p.steered_followed, p.kept),
        (3, 2, 2, 1)
    );
    assert!(p.plan.as_ref().unwrap().contains("applies: 3 of 3 rules"));
    let text = planner::report::audit::audit_text(&report);
    assert!(
        text.contains("planner-tuner plugin steered 2 calls (3 decision lines, 1 kept NCCL's choice); NCCL ran the plugin's pair in 2 of 2 checked"),
        "{text}"
    );
    // NCCL ignoring the plugin is a difference.
    let log = NcclLog::parse(&plugin_log("RING proto LL"), "plugin.log").unwrap();
    let report = audit::audit(&log, &model, None).unwrap();
    assert_eq!(report.differences.len(), 1);
    let d = &report.differences[0];
    assert_eq!(
        (d.nccl.as_str(), d.planner.as_str()),
        ("RING LL", "TREE SIMPLE")
    );
    assert!(d
        .what
        .starts_with("AllReduce: 65536 Bytes (planner-tuner rule 1"));
    assert_eq!(report.plugin.unwrap().steered_followed, 1);
}

#[test]
fn a_log_newer_than_the_newest_model_uses_the_newest_with_one_line() {
    let (t, notice) = nccl_log::table_for_log("2.32.2+cuda13.0").unwrap();
    assert_eq!(t.family, table::newest_modelled_family());
    assert_eq!(
        notice.unwrap(),
        format!(
            "the log's NCCL 2.32.2+cuda13.0 is newer than the newest modelled family {0}; compared with the {0} model",
            table::newest_modelled_family()
        )
    );
    let (t, notice) = nccl_log::table_for_log("2.22.3").unwrap();
    assert_eq!((t.family.as_str(), notice), ("2.22", None));
    let (t, notice) = nccl_log::table_for_log("2.17.1").unwrap();
    assert_eq!(t.family, "2.18");
    assert!(notice.unwrap().contains("no model for NCCL 2.17"));
    // Through the CLI: the capture log relabelled 2.32: one notice line on stderr.
    let text = std::fs::read_to_string(golden("nccl-init-rank0.log"))
        .unwrap()
        .replace(
            "NCCL version 2.28.9+cuda13.0",
            "NCCL version 2.32.0+cuda13.0",
        );
    let dir = std::env::temp_dir().join(format!("planner-audit-v-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("new.log");
    std::fs::write(&path, text).unwrap();
    let out = planner()
        .args(["audit", "--topo", &golden("topo.xml")])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("is newer than the newest modelled family"),
        "{err}"
    );
    // The capture's cells are the same in the newest model; the report says what stood in.
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("0 differences"), "{text}");
    assert!(
        text.contains("Not checked: NCCL 2.32.0+cuda13.0's own rules (per-call choice, channels, threads): the 2.31 model stands in for them"),
        "{text}"
    );
}

#[test]
fn the_tuning_table_as_model_cells() {
    let log = NcclLog::load(&golden("nccl-init-rank0.log")).unwrap();
    let cells = table_from_log(&log).unwrap();
    assert_eq!(cells.algorithms.len(), 7);
    let ar = Coll::AllReduce as usize;
    // Printed "8.0/  61.1" for AllReduce Tree/LL.
    assert_eq!(
        cells.latency[ar][Algo::Tree as usize][Proto::Ll as usize],
        8.0
    );
    assert_eq!(
        cells.bandwidth[ar][Algo::Tree as usize][Proto::Ll as usize],
        61.1
    );
    // The 2.18 model of the capture machine picks differently from NCCL 2.28.9 (Ring/LL
    // at 1/3 of the bus bandwidth, Tree/Simple at 28 µs...); with the log's cells it makes
    // NCCL's choice at every size of nccl-allreduce-choices.txt.
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let input = planner::model::examples::h200x2_capture();
    let old = Model::new(input.clone(), env.clone(), table::builtin("2.18").unwrap()).unwrap();
    let mut steered = old.clone();
    cells.apply(&mut steered);
    let choices = std::fs::read_to_string(golden("nccl-allreduce-choices.txt")).unwrap();
    let mut differ_before = 0;
    for line in choices.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bytes: u64 = words[1].parse().unwrap();
        let (algo, proto) = (Algo::parse(words[5]).unwrap(), words[7]);
        let pick = |m: &Model| {
            let call = Call::new(Coll::AllReduce, bytes, 2, 1).unwrap();
            let ch = m.choose(Coll::AllReduce, call.model_bytes, 1).unwrap();
            (ch.algo, ch.proto.log_name())
        };
        assert_eq!(pick(&steered), (algo, proto), "{line}");
        differ_before += (pick(&old) != (algo, proto)) as usize;
    }
    assert!(
        differ_before > 0,
        "the 2.18 model alone should differ somewhere"
    );
    // A log without a table is a bad input naming the log.
    let calls_only = NcclLog::parse(
        "NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}",
        "calls.log",
    )
    .unwrap();
    let err = table_from_log(&calls_only).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err
        .to_string()
        .starts_with("calls.log: no init tuning table"));
}

#[test]
fn capture_log_with_its_per_call_lines_has_no_difference() {
    // The init log plus the per-call lines NCCL printed (nccl-allreduce-choices.txt), with
    // the planner's own search: graphs, rings, trees, table and 34 calls all agree.
    let mut text = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    for line in std::fs::read_to_string(golden("nccl-allreduce-choices.txt"))
        .unwrap()
        .lines()
    {
        text.push_str(&format!("NCCL INFO {line}\n"));
    }
    let dir = std::env::temp_dir().join(format!("planner-audit-c-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("with-calls.log");
    std::fs::write(&path, &text).unwrap();
    let out = planner()
        .args(["audit", "--topo", &golden("topo.xml")])
        .arg(&path)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["differences"].as_array().unwrap().len(), 0, "{v}");
    let calls = text.lines().filter(|l| l.contains("Bytes -> Algo")).count();
    // ranks, nodes, 2 graphs x 7, 2 channel counts, 21 max threads, 210 cells, 8 thresholds,
    // 97 ring/tree values (1 + 24 rings + 24 ring links + 24 Trees + 24 Tree lines), the P2P chunk size
    // (NVLink GPUs, one node: 512 KiB), calls x (pair, channel range).
    assert_eq!(
        v["compared"].as_u64().unwrap() as usize,
        2 + 14 + 2 + 21 + 210 + 8 + 97 + 1 + calls * 2
    );
    // The P2P type and ring PXN/GDR lines are named as not checked, with their count.
    let not_checked = v["not_checked"].to_string();
    assert!(
        not_checked.contains("1 'Check P2P Type' line(s)")
            && not_checked.contains("1 'Connected all rings, use ring PXN p GDR g' line(s)"),
        "{not_checked}"
    );
}

/// tests/data/logs/h200x2-nccl-2.31-reconstructed (README: RECONSTRUCTED, not a 2.31 capture): the 2x H200 capture's
/// lines under version 2.31.0, with 2.31's per-call `Input: {` / `Best tuning {` lines written from dev's format
/// strings for the 31 AllReduce sizes the capture measured.
#[test]
fn nccl_2_31_per_call_lines_are_compared_with_the_model() {
    let dir = format!(
        "{}/tests/data/logs/h200x2-nccl-2.31-reconstructed",
        env!("CARGO_MANIFEST_DIR")
    );
    let (topo, path) = (format!("{dir}/topo.xml"), format!("{dir}/nccl.log"));
    let log = NcclLog::load(&path).unwrap();
    assert_eq!(log.version.as_deref(), Some("2.31.0+cuda13.0"));
    let calls = log.tuning231_calls();
    assert_eq!(calls.len(), 31);
    assert_eq!(log.tuning_summaries.len(), 31);
    // By hand, from the table the log prints (AllReduce Ring/LL 7.8 us, 141.0 GB/s) and 2.31's ring time
    // latency x numPipeOps + nBytes / (1000 x bw): 4 B: 7.8 + 4 / 141000 = 7.800028; 1 MiB: 7.8 + 1048576 / 141000 =
    // 15.236710. Ring/LL threads (ncclTuningGetChannels): 4 B on 1 channel halves 512 threads to 64, below 3 warps
    // -> 3 warps; 1 MiB keeps 512 -> 16 warps on 24 channels.
    let at = |bytes: u64| calls.iter().find(|c| c.input.n_bytes == bytes).unwrap();
    assert_eq!(
        (
            at(4).best.time_us.as_str(),
            at(4).best.n_channels,
            at(4).best.n_warps
        ),
        ("7.800028", 1, 3)
    );
    assert_eq!(
        (
            at(1048576).best.time_us.as_str(),
            at(1048576).best.n_channels,
            at(1048576).best.n_warps
        ),
        ("15.236710", 24, 16)
    );

    let audit_json = |p: &str, extra: &[&str]| {
        let out = planner()
            .args(["audit", "--topo", &topo, p, "--json"])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        )
    };
    let (code, v) = audit_json(&path, &[]);
    assert_eq!(code, Some(0), "{v}");
    assert_eq!(v["table_family"], "2.31");
    // The capture's 355 values, 31 x (pair, channel range) of the `Func:` lines and 31 x (pair, timeUs, nChannels,
    // nWarps) of the `Best tuning` lines: NCCL 2.28.9's pairs are the 2.31 model's at every size.
    assert_eq!(v["compared"], 355 + 31 * 2 + 31 * 4);
    assert_eq!(v["differences"], serde_json::json!([]));
    assert!(v["notices"][0]
        .as_str()
        .unwrap()
        .contains("the 2.31 model is read from a pre-release branch"));
    assert!(v["not_checked"]
        .to_string()
        .contains("31 'Best tuning, algorithm, A, protocol, P' line(s)"));

    // Each compared field can fail, on its line.
    let text = std::fs::read_to_string(&path).unwrap();
    let line_of = |needle: &str| text.lines().position(|l| l.contains(needle)).unwrap() + 1;
    let best_1m = "timeUs = 15.236710,  .algo = RING, .proto = LL";
    let line = line_of(best_1m);
    for (from, to, what, nccl) in [
        (
            "timeUs = 15.236710",
            "timeUs = 15.236711",
            "timeUs",
            "15.236711",
        ),
        ("nWarps = 16", "nWarps = 8", "nWarps", "8"),
        ("nChannels = 24,", "nChannels = 12,", "nChannels", "12"),
        (".algo = RING", ".algo = TREE", "", "TREE LL"),
    ] {
        let edited_line = text.lines().nth(line - 1).unwrap().replace(from, to);
        let edited: String = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i + 1 == line {
                    format!("{edited_line}\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let p = std::env::temp_dir().join(format!("planner-231-{}-{what}.log", std::process::id()));
        std::fs::write(&p, edited).unwrap();
        let (code, v) = audit_json(p.to_str().unwrap(), &[]);
        assert_eq!(code, Some(1), "{what}: {v}");
        let d = &v["differences"];
        assert_eq!(d.as_array().unwrap().len(), 1, "{what}: {d}");
        let want = if what.is_empty() {
            "AllReduce: 1048576 Bytes (Best tuning)".to_string()
        } else {
            format!("AllReduce: 1048576 Bytes (Best tuning) {what}")
        };
        assert_eq!(d[0]["what"], want.as_str());
        assert_eq!(d[0]["line"], line);
        assert_eq!(d[0]["nccl"].to_string().trim_matches('"'), nccl);
    }

    // The 2.31 lines rule out every older family: audited as 2.30, a warning names them.
    let (_, v) = audit_json(&path, &["--nccl-version", "2.30"]);
    let notices = v["notices"].to_string();
    assert!(
        notices.contains("warning: audited with the NCCL 2.30 model, which the log's line formats rule out: per-call lines 'Input: { ... }' / 'Best tuning { ... }'"),
        "{notices}"
    );
}
