//! The hidden fake backend (`PLANNER_FAKE_BACKEND=1`, `crate::measure::FakeBackend`): `planner
//! verify` without GPU or libnccl, for CPU-only tests of what happens around a measurement (the
//! result file written per size, Ctrl-C, crashed and hanging NCCL children). Its native side is
//! this in-process stand-in; its NCCL side runs in real child processes (`nccl::child`).

use super::run::{NativeBackend, Progress, VerifyRequest};
use crate::error::Result;
use crate::measure::Backend;
use crate::measure::FakeBackend;
use crate::measure::{Row, RowStatus};
use crate::model::Pair;
use crate::units::format_size;

/// Deterministic native rows, one size every `delay_ms`.
pub(crate) struct FakeNative {
    pub(crate) delay_ms: u64,
}

impl NativeBackend for FakeNative {
    fn measure(
        &self,
        request: &VerifyRequest,
        pair: Pair,
        sizes: &[u64],
        progress: &dyn Progress,
    ) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        for &bytes in sizes {
            if progress.stop_requested() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(self.delay_ms));
            let mut row = Row::empty(Backend::Native, Some(pair), bytes, RowStatus::Ok);
            row.iters = request.plan.iters_at(bytes);
            row.times_us =
                FakeBackend::times_us(&format!("native {pair}"), bytes, request.plan.repeats);
            row.repeats = row.times_us.len() as u32;
            row.wrong = Some(0);
            row.derive_stats();
            progress.step(&format!("native {pair} {}", format_size(bytes)));
            progress.row_done(&row);
            rows.push(row);
        }
        Ok(rows)
    }
}
