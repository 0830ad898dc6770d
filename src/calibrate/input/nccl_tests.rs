//! What nccl-tests' text and `-J` JSON output share: the program's collective, NCCL's version code, the pair
//! NCCL_ALGO/NCCL_PROTO pin, and the row both readers produce.

use super::{Measurement, ReadOptions};
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::{Algo, Coll, Pair, Proto};

/// nccl-tests program name -> the model's collective; None for tests the
/// model has no tuner for (alltoall, sendrecv, gather, scatter, hypercube).
pub(super) fn coll_of_program(program: &str) -> Option<Coll> {
    let base = program.rsplit(['/', '\\']).next().unwrap_or(program);
    let base = base.strip_suffix("_mpi").unwrap_or(base);
    let base = base.strip_suffix("_perf").unwrap_or(base);
    match base {
        "all_reduce" => Some(Coll::AllReduce),
        "all_gather" => Some(Coll::AllGather),
        "reduce_scatter" => Some(Coll::ReduceScatter),
        "broadcast" => Some(Coll::Broadcast),
        "reduce" => Some(Coll::Reduce),
        _ => None,
    }
}

/// The message for a program whose collective NCCL's tuner does not model.
pub(super) fn unmodelled_program(at: &str, program: &str) -> Error {
    Error::bad_input(format!(
        "{at}: `{program}` measures a collective NCCL's tuner does not model \
         (supported: all_reduce, all_gather, reduce_scatter, broadcast, reduce)"
    ))
}

/// NCCL's `NCCL_VERSION_CODE` (major*10000 + minor*100 + patch since 2.9)
/// as `2.28.3`.
pub(super) fn nccl_version_of_code(code: u64) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// A pinned pair from NCCL_ALGO / NCCL_PROTO values: only a single algorithm
/// and a single protocol pin a pair; lists, exclusions (`^LL128`) and
/// per-collective forms (`allreduce:ring`) leave NCCL a choice.
pub(super) fn pinned_pair(algo: Option<&str>, proto: Option<&str>) -> Option<Pair> {
    let algo = Algo::parse(&algo?.trim().replace(['_', '-'], "")).ok()?;
    let proto = Proto::parse(proto?.trim()).ok()?;
    Some(Pair::new(algo, proto))
}

/// The pair of every row: what the file's NCCL_ALGO / NCCL_PROTO pin, merged with `--pair`.
pub(super) fn pair_of_env(
    algo: Option<&str>,
    proto: Option<&str>,
    options: &ReadOptions,
    source: &str,
) -> Result<Option<Pair>> {
    let from_file = pinned_pair(algo, proto);
    let file_says = if from_file.is_none() && (algo.is_some() || proto.is_some()) {
        Some((algo.unwrap_or("(unset)"), proto.unwrap_or("(unset)")))
    } else {
        None
    };
    match (from_file, options.pair) {
        (Some(f), Some(o)) if f != o => Err(Error::bad_input(format!(
            "{source}: --pair {o} contradicts the file, which ran {f} (NCCL_ALGO/NCCL_PROTO)"
        ))),
        (Some(f), _) => Ok(Some(f)),
        (None, Some(o)) => {
            if let Some((a, p)) = file_says {
                return Err(Error::bad_input(format!(
                    "{source}: --pair {o} contradicts the file, whose NCCL_ALGO={a} NCCL_PROTO={p} leave NCCL a choice"
                )));
            }
            Ok(Some(o))
        }
        (None, None) => Ok(None),
    }
}

/// The collective: the file's, merged with `--coll`.
pub(super) fn resolve_coll(
    from_file: Option<Coll>,
    options: &ReadOptions,
    source: &str,
) -> Result<Coll> {
    match (from_file, options.coll) {
        (Some(f), Some(o)) if f != o => Err(Error::bad_input(format!(
            "{source}: --coll {} contradicts the file, which ran {}",
            o.cli_name(),
            f.cli_name()
        ))),
        (Some(f), _) | (None, Some(f)) => Ok(f),
        (None, None) => Err(Error::bad_input(format!(
            "{source}: the file does not say which collective it ran (no `# Collective test starting:` line); give --coll"
        ))),
    }
}

/// One half (out-of-place or in-place) of an nccl-tests row.
pub(super) struct TestsRow<'a> {
    pub(crate) coll: Coll,
    pub(crate) pair: Option<Pair>,
    pub(crate) bytes: u64,
    pub(crate) time_us: f64,
    pub(crate) in_place: bool,
    pub(crate) source: &'a str,
    pub(crate) line: usize,
    /// `-I 1`: the half's per-iteration statistics.
    pub per_iteration: Option<super::IterStats>,
}

impl TestsRow<'_> {
    pub(super) fn measurement(&self) -> Measurement {
        Measurement {
            backend: Backend::Nccl,
            coll: self.coll,
            pair: self.pair,
            nccl_choice: None,
            bytes: self.bytes,
            time_us: self.time_us,
            repeats: self.per_iteration.as_ref().and_then(|s| s.iterations),
            spread_pct: self
                .per_iteration
                .as_ref()
                .and_then(|s| s.spread_pct(self.time_us)),
            stock_us: None,
            in_place: Some(self.in_place),
            per_iteration: self.per_iteration.clone(),
            source: self.source.to_string(),
            line: self.line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_and_programs() {
        assert_eq!(nccl_version_of_code(22803), "2.28.3");
        assert_eq!(nccl_version_of_code(2708), "2.7.8");
        assert_eq!(
            coll_of_program("./build/all_reduce_perf"),
            Some(Coll::AllReduce)
        );
        assert_eq!(
            coll_of_program("reduce_scatter_perf_mpi"),
            Some(Coll::ReduceScatter)
        );
        assert_eq!(coll_of_program("alltoall_perf"), None);
    }

    #[test]
    fn only_single_values_pin_a_pair() {
        assert_eq!(
            pinned_pair(Some("Ring"), Some("LL")),
            Some(Pair::new(Algo::Ring, Proto::Ll))
        );
        assert_eq!(
            pinned_pair(Some("tree"), Some("simple")),
            Some(Pair::new(Algo::Tree, Proto::Simple))
        );
        assert_eq!(pinned_pair(Some("Ring,Tree"), Some("LL")), None);
        assert_eq!(pinned_pair(Some("Ring"), Some("^LL128")), None);
        assert_eq!(pinned_pair(Some("Ring"), None), None);
    }
}
