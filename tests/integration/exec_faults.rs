//! `planner run --inject-fault` (hidden): the flag's CPU side. The faults themselves need a GPU:
//! scripts/device/faults.sh runs each one on 1 GPU with --virtual-ranks 4.

use crate::common::planner;
use planner::exec::runtime::{Fault, RunOptions};

#[test]
fn the_three_faults_parse_and_others_are_refused() {
    assert_eq!(Fault::parse("wrong-element").unwrap(), Fault::WrongElement);
    assert_eq!(Fault::parse(" HANG ").unwrap(), Fault::Hang);
    assert_eq!(Fault::parse("oom").unwrap(), Fault::Oom);
    let e = Fault::parse("segfault").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert_eq!(
        e.to_string(),
        "invalid --inject-fault 'segfault': known faults: wrong-element, hang, oom"
    );
    // Real runs inject nothing.
    assert_eq!(RunOptions::default().fault, None);
}

#[test]
fn a_bad_fault_exits_2_before_any_gpu_work_and_the_flag_is_hidden() {
    let out = planner()
        .args(["run", "--inject-fault", "segfault", "--virtual-ranks", "4"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid --inject-fault 'segfault'"), "{err}");
    // Hidden from --help (documented in README's testing section instead).
    let help = planner().args(["run", "--help"]).output().unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--virtual-ranks"), "{help}");
    assert!(!help.contains("inject"), "{help}");
}

#[test]
fn the_hang_hook_is_compiled_in_only_when_asked() {
    // Without the define the kernels are the real ones: the hook (common.cuh) is behind #ifdef, and both kernel
    // files call it.
    let kernel = |file: &str| {
        std::fs::read_to_string(format!("{}/kernels/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap()
    };
    let common = kernel("common.cuh");
    let hook = common
        .find("#ifdef PLANNER_INJECT_HANG")
        .expect("common.cuh");
    let end = common[hook..].find("#endif").expect("common.cuh");
    assert!(common[hook..hook + end].contains("while (!ab.check())"));
    for file in ["collectives.cu", "beyond.cu"] {
        assert!(
            kernel(file).contains("if (injected_hang(ab)) return;"),
            "{file}"
        );
    }
}
