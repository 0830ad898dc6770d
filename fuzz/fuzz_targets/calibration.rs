//! Calibration files (`--calibration FILE`, `tune --from`): `Calibration::from_json` never panics and refuses with
//! bad input (exit 2). A file it accepts writes out and reads back with the same pairs, and answers predictions
//! and picks at a few sizes (its numbers are untrusted arithmetic input) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::calibrate::Calibration;
use planner::model::{Algo, Coll, Proto};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cal = match Calibration::from_json(text, "fuzz-cal.json") {
        Err(e) => {
            assert_eq!(e.exit_code(), 2, "{e}");
            return;
        }
        Ok(cal) => cal,
    };
    let written = cal.to_json().expect("an accepted calibration writes out");
    let again =
        Calibration::from_json(&written, "again.json").expect("what to_json writes reads back");
    assert_eq!(cal.pairs.len(), again.pairs.len());
    let candidates: Vec<_> = cal.pairs.iter().map(|p| p.pair()).collect();
    for coll in Coll::ALL {
        for bytes in [0, 1, 4096, 1 << 20, 1 << 40, u64::MAX] {
            let _ = cal.pick(coll, bytes, &candidates);
            for algo in Algo::ALL {
                for proto in Proto::ALL {
                    let _ = cal.predict_us(coll, algo, proto, bytes);
                }
            }
        }
    }
    let _ = cal.check_applies("0", 2, false);
});
