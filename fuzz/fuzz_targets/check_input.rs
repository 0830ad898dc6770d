//! `planner check FILE`: what check adds in front of the measurement readers: srun's `N: ` labels, NCCL log lines
//! read as evidence (transports, network, NICs, channels, env, a printed command line), a log without measurements.
//! `check::read_input_text` never panics and refuses only with bad input (exit 2); every fact it keeps names a line
//! of the file; every row has a finite, non-negative time.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count();
    let ev = planner::check::evidence::scan(text);
    for c in &ev.connections {
        assert!(c.line >= 1 && c.line <= lines, "{c:?}");
    }
    for (_, seen) in &ev.env {
        assert!(seen.line >= 1 && seen.line <= lines, "{seen:?}");
    }
    let _ = ev.transports();
    let _ = ev.net_devs_used();
    match planner::check::read_input_text(text, "fuzz-check.txt", &Default::default()) {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(r) => {
            for row in &r.measurements.rows {
                assert!(row.time_us.is_finite() && row.time_us >= 0.0, "{row:?}");
            }
        }
    }
});
