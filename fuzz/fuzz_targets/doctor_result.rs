//! planner doctor result files (`doctor --load FILE`, and `check`): `DoctorRun::from_json` never panics and
//! refuses with bad input (exit 2). A file it accepts renders as text and JSON, writes out and reads back with the
//! same tests, statuses and verdict.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::doctor::DoctorRun;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let run = match DoctorRun::from_json(text, "fuzz.json") {
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            return;
        }
        Ok(run) => run,
    };
    let _ = planner::report::doctor::render_text(&run);
    planner::report::doctor::render_json(&run).expect("an accepted run renders as JSON");
    let written = run.to_json().expect("an accepted run writes out");
    let again =
        DoctorRun::from_json(&written, "again.json").expect("what to_json writes reads back");
    assert_eq!(run.links.len(), again.links.len());
    for (a, b) in run.links.iter().zip(&again.links) {
        assert_eq!((a.test, a.status), (b.test, b.status));
    }
    assert_eq!(
        run.verdict.map(|v| v.summary),
        again.verdict.map(|v| v.summary)
    );
});
