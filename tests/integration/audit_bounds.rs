//! `planner audit` at its bounds (issues 26 and 28): a log whose every per-call line disagrees lists the first
//! differences of each kind and counts the rest (bounded memory, exit 1); a difference is a finding, not an
//! error; out-of-limit values in a log are bad input (exit 2); a log of two NCCL versions is refused; a log's
//! terminal escape sequences are not echoed.

use crate::common::{assert_exit, golden, json_of, planner, with_scratch};

/// `text` in the file `name` of this test's scratch directory.
fn scratch(name: &str, text: &str) -> String {
    with_scratch(|s| s.write(name, text).to_string_lossy().into_owned())
}

/// The 2x H200 capture's log (0 differences against its topology) with `extra` appended.
fn capture_with(name: &str, extra: &str) -> String {
    let base = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    scratch(name, &format!("{base}{extra}"))
}

/// `planner audit LOG --topo` the capture's topology, with `extra` flags.
fn audit_on_capture(path: &str, extra: &[&str]) -> std::process::Output {
    planner()
        .args(["audit", "--topo", &golden("topo.xml"), path])
        .args(extra)
        .output()
        .unwrap()
}

/// `n` per-call lines that all disagree with the model: NCCL never picks PAT for an AllReduce (the model
/// picks Ring or Tree), and every line gives two differences: the pair and the channel range.
fn disagreeing_calls(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "h:1 [0] NCCL INFO AllReduce: {} Bytes -> Algo PAT proto LL128 channel{{Lo..Hi}}={{0..0}}\n",
                1024 * (1 + i % 4096)
            )
        })
        .collect()
}

#[test]
fn a_log_whose_every_call_disagrees_lists_the_first_differences_and_counts_the_rest() {
    const CALLS: usize = 100_000;
    let path = capture_with("many-calls.log", &disagreeing_calls(CALLS));
    let out = audit_on_capture(&path, &[]);
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    // The capture alone: 355 values (354 and the P2P chunk size), 0 differences; each line adds 2 values. The pair differs on every line;
    // the channel range differs where the model's range is not 0..0, so the total is counted, not assumed.
    assert!(
        text.contains(&format!("{} values,", 355 + 2 * CALLS)),
        "{}",
        &text[..300]
    );
    let listed = text.lines().filter(|l| l.contains(" Bytes ")).count();
    assert_eq!(listed, planner::audit::DIFFERENCES_LISTED_PER_KIND);
    let more = text
        .lines()
        .find_map(|l| l.strip_prefix("... and "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.parse::<usize>().ok())
        .expect("a '... and N more' line");
    let total = listed + more;
    assert!((CALLS..=2 * CALLS).contains(&total), "{total}");
    assert!(
        text.contains(&format!("{total} differences")),
        "{}",
        &text[..300]
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "{total} differences between the log and the model"
        )),
        "{err}"
    );

    let out = audit_on_capture(&path, &["--json"]);
    assert_exit(&out, 1);
    let v = json_of(&out);
    assert_eq!(
        v["differences"].as_array().unwrap().len(),
        planner::audit::DIFFERENCES_LISTED_PER_KIND
    );
    assert_eq!(v["differences_not_listed"]["per_call"], more);
}

#[test]
fn one_difference_is_a_finding_in_the_singular_not_an_error() {
    let path = capture_with("one-call.log", &disagreeing_calls(1));
    let out = audit_on_capture(&path, &[]);
    assert_exit(&out, 1);
    let err = String::from_utf8_lossy(&out.stderr);
    // 1024 bytes: the model runs Ring/LL on channels 0..0, so only the pair differs.
    assert!(
        err.contains(": 1 difference between the log and the model"),
        "{err}"
    );
    assert!(!err.contains("error"), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("... and"), "{text}");
}

/// devopsrustem/slurmv4 (tests/data/logs/README.md): ranks 8-15 of a 2-node H100 job that NCCL ran on one NIC
/// (`NCCL_IB_HCA set to mlx5_0`). The stand-in hgx-h100-8 has 8 NICs, mlx5_0..mlx5_7.
const ONE_NIC: &str = "nccl-2.27.5-h100-roce-1nic-slurmv4.log";

fn log_data(name: &str) -> String {
    format!("{}/tests/data/logs/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn ib_hca_keeps_only_the_named_nic_so_a_one_nic_run_agrees_with_an_eight_nic_fixture() {
    let out = planner()
        .args(["audit", "--fixture", "hgx-h100-8", &log_data(ONE_NIC)])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    let text = String::from_utf8_lossy(&out.stdout);
    // 122: the 114 values before issue 27 item 3 and each rank's `P2P Chunksize set to 131072` (two nodes).
    assert!(text.contains("122 values, 0 differences"), "{text}");

    // The same log without its NCCL_IB_HCA lines: all 8 NICs are kept, 16 channels instead of 4 and trees across
    // other NICs: 28 false differences the filter removes (issue 27 counted 19 against azure-ndv5, whose NICs are
    // named mlx5_ib0..7: `NCCL_IB_HCA=mlx5_0` names none of them, so there the filter is not applied, with a
    // notice, and the 19 stay: which of its NICs is the machine's mlx5_0 is unknown; audit_shape.rs).
    let log = std::fs::read_to_string(log_data(ONE_NIC)).unwrap();
    let without: String = log
        .lines()
        .filter(|l| !l.contains("NCCL_IB_HCA set to"))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = scratch("one-nic-without-ib-hca.log", &without);
    let out = planner()
        .args(["audit", "--fixture", "hgx-h100-8", &path])
        .output()
        .unwrap();
    assert_exit(&out, 1);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("28 differences"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("rank 8 coll channels"))
        .expect("a coll channels row");
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    assert_eq!(cells[3..5], ["4", "16"], "{row}");
}

/// Bad input, exit 2, one line naming the log's line (and nothing else on stderr).
fn assert_bad_log_line(path: &str, line: usize, what: &str) {
    let out = audit_on_capture(path, &[]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!(".log:{line}: {what}")), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn out_of_limit_sizes_and_rank_counts_are_bad_input_not_differences() {
    // The capture's log has 206 lines; the appended one is line 207. 2^41 + 1 bytes is above the 1 TiB limit.
    let path = capture_with(
        "huge-call.log",
        "h:1 [0] NCCL INFO AllReduce: 2199023255553 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n",
    );
    assert_bad_log_line(&path, 207, "per-call line of 2199023255553 bytes");
    // 1 TiB per rank x 2 ranks: the call is 2 TiB.
    let path = capture_with(
        "huge-allgather.log",
        "h:1 [0] NCCL INFO AllGather: 1099511627776 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n",
    );
    assert_bad_log_line(&path, 207, "per-call line of 1099511627776 bytes x 2 ranks");
    let base = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    assert!(base.contains(" nRanks 2 "));
    let path = scratch(
        "huge-ranks.log",
        &base.replacen(" nRanks 2 ", " nRanks 99999999 ", 1),
    );
    let line = 1 + base.lines().position(|l| l.contains(" nRanks 2 ")).unwrap();
    assert_bad_log_line(&path, line, "nRanks 99999999: must be between 1 and 524288");
}

#[test]
fn a_log_of_two_nccl_versions_is_refused() {
    let path = capture_with(
        "two-versions.log",
        "h:1 [0] NCCL INFO NCCL version 2.27.5+cuda12.9\n",
    );
    assert_bad_log_line(
        &path,
        207,
        "a second NCCL version, 2.27.5+cuda12.9, after 2.28.9+cuda13.0",
    );
}

#[test]
fn terminal_escape_sequences_from_a_log_are_not_echoed() {
    let path = capture_with(
        "escape.log",
        "h:1 [0] NCCL INFO AllReduce: 1024 Bytes -> Algo PAT\u{1b}[2J\u{1b}]0;owned\u{7} proto LL channel{Lo..Hi}={0..0}\n",
    );
    let out = audit_on_capture(&path, &[]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("PAT\\x1b[2J\\x1b]0;owned\\x07"), "{err}");
}

#[test]
fn audit_without_a_topology_refuses_and_says_why_it_does_not_fall_back() {
    // The capture's log names its NCCL_TOPO_DUMP_FILE; this copy does not.
    let base = std::fs::read_to_string(golden("nccl-init-rank0.log")).unwrap();
    let without: String = base
        .lines()
        .filter(|l| !l.contains("NCCL_TOPO_DUMP_FILE"))
        .map(|l| format!("{l}\n"))
        .collect();
    let path = scratch("no-topology.log", &without);
    let out = planner().args(["audit", &path]).output().unwrap();
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no topology: pass --topo FILE or --fixture NAME"),
        "{err}"
    );
    assert!(
        err.contains("a guessed machine gives false differences"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}
