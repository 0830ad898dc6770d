//! The real `init` of the built library reads `PLANNER_TUNER_PLAN`, `NCCL_DEBUG` and `NCCL_DEBUG_SUBSYS` from the
//! environment. The environment is process-global, so this file (its own test process) holds one test only.

mod support;

use std::ffi::{c_int, c_void};
use std::ptr;

use nccl_tuner_planner::abi::{
    NcclNvlDomainInfoV5, NcclTunerConstantsV5, NCCL_FUNC_ALL_REDUCE, NCCL_LOG_INFO, NCCL_LOG_WARN,
    NCCL_SUCCESS, NUM_ALGORITHMS, NUM_HW_LINKS, NUM_PROTOCOLS,
};
use support::{api, idx, nccl_like_table, take_lines, write_plan, PLAN_2X1};

fn nccl_init(init: nccl_tuner_planner::abi::InitFn, n_ranks: usize) -> *mut c_void {
    let mut ctx: *mut c_void = ptr::null_mut();
    let mut nvl = NcclNvlDomainInfoV5::default();
    let mut constants = NcclTunerConstantsV5 {
        base_latencies: [[0.0; NUM_PROTOCOLS]; NUM_ALGORITHMS],
        hw_latencies: [[[0.0; NUM_PROTOCOLS]; NUM_ALGORITHMS]; NUM_HW_LINKS],
        ll_max_bws: [[0.0; 3]; 4],
        per_ch_max_ring_ll128_bws: [[0.0; 3]; 4],
        per_ch_max_tree_ll128_bws: [[0.0; 3]; 4],
        per_ch_max_tree_bws: [[0.0; 3]; 4],
        per_ch_max_nvls_tree_bws: [[0.0; 3]; 4],
    };
    // SAFETY: NCCL-shaped arguments (`src/init.cc:1309` at v2.28.3-1).
    let rc = unsafe {
        init(
            &mut ctx,
            42,
            n_ranks,
            1,
            support::logger(),
            &mut nvl,
            &mut constants,
        )
    };
    assert_eq!(rc, NCCL_SUCCESS);
    assert!(!ctx.is_null());
    ctx
}

#[test]
fn init_reads_the_plan_and_log_settings_from_the_environment() {
    let api = api();
    let path = write_plan("env", PLAN_2X1);
    // SAFETY (Rust 2024 would require unsafe): only this test runs in this process, and no other thread reads
    // the environment while it is changed.
    std::env::set_var("PLANNER_TUNER_PLAN", &path);
    std::env::set_var("NCCL_DEBUG", "info");
    std::env::set_var("NCCL_DEBUG_SUBSYS", "INIT,TUNING");
    for init in [api.v5.init.expect("v5 init"), api.v6.init.expect("v6 init")] {
        take_lines();
        let ctx = nccl_init(init, 2);
        let lines = take_lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0].level, NCCL_LOG_INFO);
        // The logger lives in this test executable, which has no ncclGetVersion: the plugin cannot tell.
        assert_eq!(
            lines[0].text,
            format!(
                "planner-tuner: plan {} applies: 4 of 4 rules for nRanks 2 nNodes 1 (from verify results.json, made with NCCL 2.28.3, running NCCL unknown)",
                path.display()
            )
        );
        let before = nccl_like_table();
        let mut table = before;
        let mut n_channels: c_int = 0;
        // SAFETY: as NCCL calls it: contiguous 7x3 table cast to float**.
        let rc = unsafe {
            api.v5.get_coll_info.expect("getCollInfo")(
                ctx,
                NCCL_FUNC_ALL_REDUCE,
                300_000,
                1,
                table.as_mut_ptr().cast(),
                7,
                3,
                0,
                &mut n_channels,
            )
        };
        assert_eq!(rc, NCCL_SUCCESS);
        assert_eq!(table[idx(0, 2)], 0.0);
        assert_eq!(n_channels, 4);
        assert_eq!(
            take_lines().iter().map(|l| l.text.as_str()).collect::<Vec<_>>(),
            ["planner-tuner: AllReduce 300000 bytes nRanks 2 nNodes 1 -> Tree/Simple channels 4 (rule 1)"]
        );
        // SAFETY: context from init.
        assert_eq!(
            unsafe { api.v5.finalize.expect("finalize")(ctx) },
            NCCL_SUCCESS
        );
    }

    // TUNING not in the subsystem list: steering without decision lines.
    std::env::set_var("NCCL_DEBUG_SUBSYS", "INIT");
    let ctx = nccl_init(api.v5.init.expect("init"), 2);
    take_lines();
    let mut table = nccl_like_table();
    let mut n_channels: c_int = 0;
    // SAFETY: as above.
    unsafe {
        api.v5.get_coll_info.expect("getCollInfo")(
            ctx,
            NCCL_FUNC_ALL_REDUCE,
            64,
            1,
            table.as_mut_ptr().cast(),
            7,
            3,
            0,
            &mut n_channels,
        );
        api.v5.finalize.expect("finalize")(ctx);
    }
    assert_eq!(table[idx(1, 0)], 0.0);
    assert!(take_lines().is_empty());

    // Empty counts as not set.
    for value in [None, Some("")] {
        match value {
            None => std::env::remove_var("PLANNER_TUNER_PLAN"),
            Some(v) => std::env::set_var("PLANNER_TUNER_PLAN", v),
        }
        take_lines();
        let ctx = nccl_init(api.v5.init.expect("init"), 2);
        let lines = take_lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].level, NCCL_LOG_WARN);
        assert_eq!(
            lines[0].text,
            "planner-tuner: PLANNER_TUNER_PLAN is not set; NCCL's own choices stay in place"
        );
        // SAFETY: context from init.
        unsafe { api.v5.finalize.expect("finalize")(ctx) };
    }
}
