//! Tuning tables (`--tuning-table FILE`, JSON) and symmetric-kernel tables: `TuningTable::parse` and
//! `SymmetricTable::parse` never panic and refuse with bad input (exit 2). A table it accepts drives NCCL's model
//! of the 2x H200 capture (one node and two) through every collective at a few sizes without panicking: the
//! table's numbers are untrusted arithmetic input.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::model::symmetric::SymmetricTable;
use planner::model::TuningTable;
use planner::nccl_env::NcclEnv;

#[path = "../common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    common::bad_input(SymmetricTable::parse(text, "fuzz-symmetric.json"));
    let table = match TuningTable::parse(text, "fuzz-table.json") {
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            return;
        }
        Ok(table) => table,
    };
    for multi in [false, true] {
        if let Ok(model) = common::model(multi, NcclEnv::default(), Some(table.clone())) {
            common::exercise(&model, &[0, 1, 4096, 1 << 20, 1 << 40]);
        }
    }
});
