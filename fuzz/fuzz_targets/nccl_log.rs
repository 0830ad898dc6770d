//! NCCL INFO logs (`planner audit LOG`, `explain --from-log`): `NcclLog::parse` never panics and refuses with bad
//! input (exit 2). A log it reads goes on as `audit` takes it: its tuning-table cells, its `NCCL_*` settings
//! into the model of the 2x H200 capture (two nodes when the log says more than one), and the comparison. The
//! per-line readers of the reference backend (`NCCL INFO` tuning and tuner lines, symmetric kernel lines, the
//! child's report lines) see every line too.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::nccl_log::NcclLog;
use planner::nccl_env::NcclEnv;

#[path = "../common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines() {
        let _ = planner::nccl::parse_tuning_line(line);
        let _ = planner::nccl::parse_tuner_line(line);
        let _ = planner::nccl::ChildEvent::from_line(line);
        let _ = planner::nccl_log::symmetric_line(line);
    }
    let log = match NcclLog::parse(&text, "fuzz.log") {
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            return;
        }
        Ok(log) => log,
    };
    common::bad_input(planner::nccl_log::table_from_log(&log));
    if let Some(version) = &log.version {
        let _ = planner::nccl_log::version_family(version);
        let _ = planner::nccl_log::table_for_log(version);
    }
    let env = NcclEnv::from_pairs(log.env.iter().map(|(n, v, _)| (n.clone(), v.clone())));
    let multi = log.n_nodes.is_some_and(|n| n > 1);
    if let Ok(model) = common::model(multi, env, None) {
        let _ = planner::audit::audit(&log, &model, None);
    }
});
