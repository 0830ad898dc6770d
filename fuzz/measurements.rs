//! The check the `nccl_tests` and `inspector` targets share (one reader, `calibrate::read_text`, told the format
//! by the content).

use planner::calibrate::ReadOptions;
use planner::model::{Coll, Pair};

pub fn check(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let options = ReadOptions {
        pair: match first & 3 {
            1 => Pair::parse("Ring/LL").ok(),
            2 => Pair::parse("Tree/Simple").ok(),
            _ => None,
        },
        coll: (first & 4 != 0).then_some(Coll::AllReduce),
    };
    match planner::calibrate::read_text(text, "fuzz-measurements.txt", &options) {
        Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
        Ok(m) => {
            assert!(!m.rows.is_empty());
            for row in &m.rows {
                // Issue 28: 0-byte rows and times of 0 are left out (one made the fit of its whole pair fail).
                assert!(row.bytes > 0 && row.time_us.is_normal() && row.time_us > 0.0, "{row:?}");
            }
        }
    }
}
