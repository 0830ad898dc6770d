//! The model against real NCCL 2.28.9 output from the capture
//! `h200x2-nvswitch-vm`: the init tuning table cell by cell, and the
//! per-call algorithm/protocol/channel choices from 4 B to 4 GiB.

use crate::common::golden;
use planner::model::examples::h200x2_capture;
use planner::model::select::Call;
use planner::model::table;
use planner::model::{Coll, Model};
use planner::nccl_env::NcclEnv;
use planner::report::explain::{nccl_call_lines, nccl_table_lines};

fn capture_file(name: &str) -> String {
    // The real NCCL dumps, copied from shared/captures into the repository.
    let path = golden(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn capture_model() -> Model {
    let env = NcclEnv {
        nvls_enable: Some(0),
        ..Default::default()
    };
    Model::new(h200x2_capture(), env, table::builtin("2.28").unwrap()).unwrap()
}

#[test]
fn nccl_table_reproduces_every_cell_of_the_capture() {
    let log = capture_file("nccl-init-rank0.log");
    // The 24 table lines (3 blocks x (3 headers + 5 functions)) and threadThresholds.
    let expected: Vec<&str> = log
        .lines()
        .filter_map(|l| l.strip_prefix("NCCL INFO "))
        .filter(|m| {
            m.starts_with("  Algorithm   |")
                || m.starts_with("  Protocol    |")
                || m.starts_with(" Max NThreads |")
                || Coll::ALL
                    .iter()
                    .any(|c| m.starts_with(&format!("{:>13} |", c.nccl_name())))
                || m.starts_with("threadThresholds ")
        })
        .collect();
    assert_eq!(expected.len(), 25, "capture table lines");
    let ours = nccl_table_lines(&capture_model());
    assert_eq!(ours.len(), expected.len());
    for (k, (a, b)) in ours.iter().zip(&expected).enumerate() {
        assert_eq!(a, b, "table line {k} differs");
    }
}

#[test]
fn nccl_calls_reproduce_every_capture_choice() {
    let text = capture_file("nccl-allreduce-choices.txt");
    let model = capture_model();
    let mut n = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        // "AllReduce: 4 Bytes -> ..."
        let bytes: u64 = line
            .split_whitespace()
            .nth(1)
            .and_then(|w| w.parse().ok())
            .unwrap();
        let call = Call::new(Coll::AllReduce, bytes, 2, 1).unwrap();
        let plan = model.plan(&call).unwrap();
        let ours = nccl_call_lines(&[plan]);
        assert_eq!(ours, vec![line.to_string()], "{bytes} bytes");
        n += 1;
    }
    assert_eq!(n, 31, "4 B .. 4 GiB");
}
