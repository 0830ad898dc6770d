//! planner verify result files (`verify --load FILE`, `diff`, `calibrate`, `tune`): `VerifyRun::from_json` never
//! panics and refuses with bad input (exit 2). A file it accepts writes out and reads back with the same rows,
//! and the measurement reader (`calibrate::read_text`) takes the same text without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::calibrate::ReadOptions;
use planner::result_file::VerifyRun;

#[path = "../common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    common::bad_input(planner::calibrate::read_text(
        text,
        "fuzz.json",
        &ReadOptions::default(),
    ));
    let run = match VerifyRun::from_json(text, "fuzz.json") {
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            return;
        }
        Ok(run) => run,
    };
    let written = run.to_json().expect("an accepted run writes out");
    let again =
        VerifyRun::from_json(&written, "again.json").expect("what to_json writes reads back");
    assert_eq!(run.rows.len(), again.rows.len());
    for (a, b) in run.rows.iter().zip(&again.rows) {
        assert_eq!((a.bytes, a.times_us.len()), (b.bytes, b.times_us.len()));
    }
});
