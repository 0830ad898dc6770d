//! NCCL 2.31's per-call `Input: {` / `Best tuning {` lines (`nccl_log::tuning231`) against the model, as the older
//! per-call lines are: the pair, the model's time (`timeUs`, `%f`), `nChannels` and `nWarps` of
//! `ncclTuningGetChannels` (dev@86fa684d src/tuning/tuning_general.cc:130-185, the same rule as
//! `Model::channels_threads`) for the `Input` line's function, `nBytes` and `numPipesOps`.

use super::{rank_of, rank_prefix, Collector, DifferenceKind};
use crate::model::{Coll, Model};
use crate::nccl_log::NcclLog;
use std::collections::HashMap;

/// The model's answer for one input: pair, time, channels, warps (or the error as the pair).
type Answer = (String, String, String, String);

pub(super) fn compare(
    c: &mut Collector,
    log: &NcclLog,
    model: &Model,
    not_checked: &mut Vec<String>,
) {
    let calls = log.tuning231_calls();
    if calls.is_empty() {
        if !log.tuning_summaries.is_empty() {
            not_checked.push(format!(
                "{} 'Best tuning, algorithm, A, protocol, P' line(s) (first: line {}): no 'Best tuning {{' line to read them with",
                log.tuning_summaries.len(),
                log.tuning_summaries[0]
            ));
        }
        return;
    }
    c.kind = DifferenceKind::PerCall;
    let multi = log.multi_rank();
    let warp = model.table.threads.warp_size.max(1) as usize;
    let mut answers: HashMap<(Coll, u64, u64), Answer> = HashMap::new();
    let mut symmetric = Vec::new();
    for call in &calls {
        let (Some(algo), Some(proto)) = (call.best.algo, call.best.proto) else {
            symmetric.push(call.line);
            continue;
        };
        c.rank = rank_of(log, multi, call.stream);
        let input = &call.input;
        let what = format!(
            "{}{}: {} Bytes (Best tuning)",
            rank_prefix(log, multi, call.stream),
            input.coll.nccl_name(),
            input.n_bytes
        );
        let (pair, time, channels, warps) = answers
            .entry((input.coll, input.n_bytes, input.num_pipe_ops))
            .or_insert_with(|| {
                match model.choose(input.coll, input.n_bytes, input.num_pipe_ops.max(1)) {
                    Ok(ch) => (
                        format!("{} {}", ch.algo.log_name(), ch.proto.log_name()),
                        format!("{:.6}", ch.time_us as f64),
                        ch.channels.to_string(),
                        (ch.threads / warp).to_string(),
                    ),
                    Err(e) => (format!("error: {e}"), "-".into(), "-".into(), "-".into()),
                }
            })
            .clone();
        let b = &call.best;
        c.check(
            call.line,
            what.clone(),
            format!("{} {}", algo.log_name(), proto.log_name()),
            pair,
        );
        c.check(call.line, format!("{what} timeUs"), b.time_us.clone(), time);
        c.check(
            call.line,
            format!("{what} nChannels"),
            b.n_channels.to_string(),
            channels,
        );
        c.check(
            call.line,
            format!("{what} nWarps"),
            b.n_warps.to_string(),
            warps,
        );
    }
    c.rank = None;
    if !symmetric.is_empty() {
        not_checked.push(format!(
            "{} 'Best tuning' line(s) choosing a symmetric kernel (first: line {}): planner does not model 2.31's symmetric kernel choice",
            symmetric.len(),
            symmetric[0]
        ));
    }
    if !log.tuning_summaries.is_empty() {
        not_checked.push(format!(
            "{} 'Best tuning, algorithm, A, protocol, P' line(s) (first: line {}): they repeat the pair of the 'Best tuning {{' line before them, compared there",
            log.tuning_summaries.len(),
            log.tuning_summaries[0]
        ));
    }
}
