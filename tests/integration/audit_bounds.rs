//! `planner audit` at its bounds (issues 26 and 28): a log whose every per-call line disagrees lists the first
//! differences of each kind and counts the rest (bounded memory, exit 1); a difference is a finding, not an
//! error; out-of-limit values in a log are bad input (exit 2); a log of two NCCL versions is refused; a log's
//! terminal escape sequences are not echoed.

use crate::common::{assert_exit, golden, json_of, planner};

fn scratch(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("planner-audit-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
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
    // The capture alone: 354 values, 0 differences; each line adds 2 values. The pair differs on every line;
    // the channel range differs where the model's range is not 0..0, so the total is counted, not assumed.
    assert!(
        text.contains(&format!("{} values,", 354 + 2 * CALLS)),
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
        text.contains(&format!("{total} difference(s)")),
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
