//! The native backend of `planner verify`: our own kernels through the
//! executor (`runtime::Executor`), timed the same way as the NCCL backend:
//! per repeat one back-to-back loop of `iters` calls, the slowest GPU's mean
//! per call; every repeat checks every element first.
//!
//! Besides NCCL's pairs it runs planner's all-reduce pairs beyond NCCL's menu
//! when they are named: `--pairs OneShot/LL,TwoShot/Simple` (`--pairs all`
//! stays Ring/Tree x LL/LL128/Simple, so result files keep comparing).

use super::run::{NativeBackend, Progress, VerifyRequest};
use crate::error::{Error, Result};
use crate::exec::plan::{self, ExecPlan, PlanChoice};
use crate::exec::runtime::{Executor, RunOptions};
use crate::measure::Backend;
use crate::measure::{coll_label, Row, RowStatus};
use crate::model::Pair;
use crate::units::format_size;

/// The executor with the rings and trees it runs on.
pub(crate) struct NativeExec {
    /// Runtime channels (the communicator's channel count; NCCL's per-size
    /// rule then picks how many a call uses).
    pub(crate) channels: usize,
}

fn rows_with(pair: Pair, sizes: &[u64], status: RowStatus, note: &str) -> Vec<Row> {
    sizes
        .iter()
        .map(|&bytes| {
            let mut row = Row::empty(Backend::Native, Some(pair), bytes, status);
            row.note = Some(note.to_string());
            row
        })
        .collect()
}

impl NativeExec {
    fn choice(&self, request: &VerifyRequest, pair: Pair, bytes: u64) -> Option<PlanChoice> {
        // The collectives and algorithms the executor has kernels for.
        plan::kernel_coll_id(request.collective)?;
        plan::kernel_algo_id(pair.algo)?;
        Some(PlanChoice {
            collective: request.collective,
            algorithm: pair.algo,
            protocol: pair.proto,
            n_channels: None,
            n_threads: None,
            dtype: request.dtype,
            bytes,
            in_place: false,
            root: 0,
        })
    }
}

impl NativeBackend for NativeExec {
    fn measure(
        &self,
        request: &VerifyRequest,
        pair: Pair,
        sizes: &[u64],
        progress: &dyn Progress,
    ) -> Result<Vec<Row>> {
        let unavailable = |why: String| {
            for _ in sizes {
                progress.step(&format!("native {pair}"));
            }
            Ok(rows_with(pair, sizes, RowStatus::Unavailable, &why))
        };
        let Some(largest) = sizes.iter().copied().max() else {
            return Ok(Vec::new());
        };
        if self.choice(request, pair, largest).is_none() {
            return unavailable(format!(
                "the native executor runs Ring, Tree, OneShot and TwoShot, and not {}",
                coll_label(request.collective)
            ));
        }
        let base = RunOptions {
            graph: request.graph,
            timeout: request.timeout,
            gpus: request.gpus,
            ..RunOptions::default()
        };
        let n_ranks = Executor::ranks_available(&base)?;
        // Sizes the executor can take: whole elements (per rank for AG/RS).
        let plan_for = |bytes: u64| -> Result<ExecPlan> {
            let choice = self
                .choice(request, pair, bytes)
                .ok_or_else(|| Error::bad_input("no native plan"))?;
            ExecPlan::default_shapes(n_ranks, self.channels, &choice)
        };
        let template = match plan_for(largest) {
            Ok(t) => t,
            // Plan rules (Ring/Simple only for all-gather, ...) are not failures.
            Err(Error::BadInput(why)) => return unavailable(why),
            Err(e) => return Err(e),
        };
        let executor = match Executor::open(&template, &base) {
            Ok(x) => x,
            Err(e) => {
                for _ in sizes {
                    progress.step(&format!("native {pair}"));
                }
                return Ok(rows_with(
                    pair,
                    sizes,
                    RowStatus::Failed,
                    &format!("the executor did not start: {e}"),
                ));
            }
        };
        let mut rows = Vec::new();
        let mut stopped: Option<String> = None;
        for &bytes in sizes {
            // Ctrl-C: the sizes measured so far are the rows (the run is marked incomplete).
            if progress.stop_requested() {
                break;
            }
            progress.step(&format!("native {pair} {}", format_size(bytes)));
            let mut row = Row::empty(Backend::Native, Some(pair), bytes, RowStatus::Ok);
            if let Some(why) = &stopped {
                row.status = RowStatus::Skipped;
                row.note = Some(format!("not run: {why}"));
                rows.push(row);
                continue;
            }
            let plan = match plan_for(bytes) {
                Ok(p) if p.call_count() > 0 => p,
                Ok(_) => {
                    row.status = RowStatus::Skipped;
                    row.note = Some("smaller than one element per rank".into());
                    rows.push(row);
                    continue;
                }
                Err(e) => {
                    row.status = RowStatus::Unavailable;
                    row.note = Some(e.to_string());
                    rows.push(row);
                    continue;
                }
            };
            let iters = request.plan.iters_at(bytes);
            row.iters = iters;
            row.channels = Some(plan.n_channels as u32);
            let mut wrong = 0u64;
            for repeat in 0..request.plan.repeats {
                let opts = RunOptions {
                    iters: iters as usize,
                    warmup: if repeat == 0 {
                        request.plan.warmup_at(bytes) as usize
                    } else {
                        0
                    },
                    ..base.clone()
                };
                match executor.run(&plan, &opts) {
                    Ok(result) => {
                        wrong = wrong.saturating_add(result.wrong);
                        let slowest = result.gpu_time_us.iter().copied().fold(0.0, f64::max);
                        row.times_us.push(slowest);
                    }
                    Err(e) => {
                        row.status = RowStatus::Failed;
                        row.note = Some(e.to_string());
                        stopped = Some(format!("{pair} failed at {}", format_size(bytes)));
                        break;
                    }
                }
            }
            row.repeats = row.times_us.len() as u32;
            row.wrong = Some(wrong);
            row.derive_stats();
            progress.row_done(&row);
            rows.push(row);
        }
        if stopped.is_some() {
            // A failed kernel may still spin on the executor's memory: leave it to process exit.
            std::mem::forget(executor);
        }
        Ok(rows)
    }
}
