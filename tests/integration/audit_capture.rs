//! `planner audit` on the capture's NCCL 2.28.9 log, and on broken logs.

use crate::common::golden;
use crate::common::planner;
use planner::audit;
use planner::model::examples::h200x2_capture;
use planner::model::{table, Algo, Coll, Model, Proto};
use planner::nccl_env::NcclEnv;
use planner::nccl_log::NcclLog;

#[test]
fn the_log_reader_finds_everything_in_the_capture() {
    let log = NcclLog::load(&golden("nccl-init-rank0.log")).unwrap();
    assert_eq!(log.version.as_deref(), Some("2.28.9+cuda13.0"));
    assert_eq!(log.env_value("NCCL_NVLS_ENABLE"), Some("0"));
    assert_eq!(log.env_value("NCCL_TOPO_DUMP_FILE"), Some("./topo.xml"));
    assert_eq!(
        (log.n_ranks, log.n_nodes, log.local_ranks),
        (Some(2), Some(1), Some(2))
    );
    assert_eq!(log.graphs.len(), 2);
    assert_eq!(
        (
            log.graphs[0].graph.pattern.number(),
            log.graphs[0].graph.n_channels
        ),
        (4, 12)
    );
    assert_eq!(log.graphs[1].graph.bw_intra, 60.0);
    assert_eq!(
        log.channels
            .iter()
            .map(|c| (c.coll, c.nvls))
            .collect::<Vec<_>>(),
        [(24, 0)]
    );
    let table = log.table.as_ref().unwrap();
    let cell = table.cells[Coll::AllReduce as usize][Algo::Tree as usize][Proto::Ll as usize]
        .as_ref()
        .unwrap();
    assert_eq!(
        (cell.latency.as_str(), cell.bandwidth.as_str()),
        ("8.0", "61.1")
    );
    assert_eq!(table.max_threads[Algo::Pat as usize][2], Some(0));
    assert_eq!(
        log.thread_thresholds
            .iter()
            .map(|t| t.values)
            .collect::<Vec<_>>(),
        [[8, 8, 64, 16, 8, 64, 512, 512]]
    );
}

#[test]
fn audit_of_the_capture_model_has_no_differences() {
    let log = NcclLog::load(&golden("nccl-init-rank0.log")).unwrap();
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let model = Model::new(h200x2_capture(), env, table::builtin("2.28").unwrap()).unwrap();
    let report = audit::audit(&log, &model, None).unwrap();
    assert!(report.differences.is_empty(), "{:?}", report.differences);
    // ranks, nodes, 2 channel counts, 21 max threads, 5x7x3 cells x2, 8 thresholds.
    assert_eq!(report.compared, 2 + 2 + 21 + 210 + 8);
    // The 2.30 table gives the same cells on Hopper, but the model would differ on a
    // perturbed constant: change Ring LL base latency and the audit must see it.
    let mut t = table::builtin("2.28").unwrap();
    t.base_latencies[Algo::Ring as usize][Proto::Ll as usize] = 6.7;
    let model = Model::new(h200x2_capture(), NcclEnv::default(), t).unwrap();
    let report = audit::audit(&log, &model, None).unwrap();
    let d = report
        .differences
        .iter()
        .find(|d| d.what == "AllReduce Ring LL latency")
        .unwrap();
    assert_eq!((d.nccl.as_str(), d.planner.as_str()), ("7.8", "7.9"));
}

#[test]
fn audit_cli_on_the_capture_log_reports_no_differences() {
    // Topology: the log's NCCL_TOPO_DUMP_FILE (./topo.xml) next to the log;
    // graphs: the log's own (the cost model alone).
    let out = planner()
        .args(["audit", &golden("nccl-init-rank0.log"), "--log-graphs"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("0 differences"), "{text}");
    assert!(text.contains("No differences."), "{text}");
    // Same through explain --nccl-log, as JSON.
    let out = planner()
        .args([
            "audit",
            "--topo",
            &golden("topo.xml"),
            &golden("nccl-init-rank0.log"),
        ])
        .args(["--log-graphs", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["differences"].as_array().unwrap().len(), 0);
    assert_eq!(v["table_family"], "2.28");
}

#[test]
fn audit_cli_with_the_planners_own_search_reports_no_differences() {
    let out = planner()
        .args(["audit", &golden("nccl-init-rank0.log")])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("No differences."), "{text}");
}

fn write_temp(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("planner-audit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn broken_logs_name_the_line() {
    let full = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    let lines: Vec<&str> = full.lines().collect();
    // Cut inside a table row (the AllReduce row of the first block).
    let row = lines
        .iter()
        .position(|l| l.starts_with("NCCL INFO     AllReduce |"))
        .unwrap();
    let mut cut: Vec<String> = lines[..row].iter().map(|s| s.to_string()).collect();
    cut.push(lines[row][..60].to_string());
    let err = NcclLog::parse(&cut.join("\n"), "cut.log").unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(
        err.to_string()
            .starts_with(&format!("cut.log:{}: AllReduce row has", row + 1)),
        "{err}"
    );
    // Truncated after the first block: the table has no CollNetChain block.
    let first_block_end = row + 1;
    let text = lines[..first_block_end].join("\n");
    let err = NcclLog::parse(&text, "short.log").unwrap_err();
    assert!(
        err.to_string().contains("cut short: no CollNetChain block"),
        "{err}"
    );
    // A garbled per-call line.
    let err = NcclLog::parse(
        "NCCL INFO AllReduce: 12 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..x}",
        "calls.log",
    )
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("calls.log:1: per-call line does not parse"),
        "{err}"
    );
    // Not an NCCL log at all.
    let err = NcclLog::parse("hello\nworld\n", "x.log").unwrap_err();
    assert_eq!(
        err.to_string(),
        "x.log: no 'NCCL INFO' line: not an NCCL_DEBUG=INFO log"
    );
    // Through the CLI: exit 2, one line.
    let path = write_temp("cut.log", &cut.join("\n"));
    let out = planner()
        .args(["audit", &path, "--log-graphs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains(&format!("cut.log:{}:", row + 1)), "{e}");
    // A log whose topology dump is not next to it and no --topo.
    let path = write_temp("alone.log", &full);
    let out = planner()
        .args(["audit", &path, "--log-graphs"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8(out.stderr).unwrap();
    assert!(
        e.contains("NCCL_TOPO_DUMP_FILE ./topo.xml is not next to it"),
        "{e}"
    );
}
