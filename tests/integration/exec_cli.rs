//! `planner run` without a GPU, and its input checks (exit 2 names the input).

use crate::common::planner;
use predicates::prelude::*;

#[test]
fn bad_pair_is_bad_input() {
    planner()
        .args(["run", "--pair", "Ring/Fast"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid --pair 'Ring/Fast'"));
}

#[test]
fn bad_dtype_collective_and_virtual_ranks_are_bad_input() {
    planner()
        .args(["run", "--dtype", "f64"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--dtype 'f64'"));
    planner()
        .args(["run", "--coll", "alltoall"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown collective 'alltoall'"));
    planner()
        .args(["run", "--virtual-ranks", "17"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--virtual-ranks 17"));
    planner()
        .args(["run", "--size", "12Q"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("12Q"));
}

#[test]
fn no_driver_is_a_clear_runtime_error() {
    if planner::gpu::require_driver().is_ok() {
        eprintln!("skipping: this machine has a CUDA driver");
        return;
    }
    planner()
        .args(["run", "--size", "1M", "--pair", "Ring/LL128"])
        .assert()
        .code(1)
        .stderr(predicate::str::contains("no usable CUDA driver"))
        .stderr(predicate::str::contains("panicked").not());
}
