//! The per-call lines NCCL 2.31 adds in `ncclTuningCompute` (dev@86fa684d
//! src/tuning/tuning.cc:176-181 and :286-291), printed before the
//! `Func: N Bytes -> Algo ...` line that every version since 2.24 prints:
//!
//! ```text
//! Input: { .comm = 0x55d0c0a3e000, .tuningMask = 111111111111111111111, .func = AllReduce, .redOp = 0,
//!   .devRedop = 0, .dataType = 7, .nBytes = 1048576, .numPipesOps = 1, .count = 262144, .countMax = 0,
//!   .nWorks = 0, .winRegType = 0, .regBuff = 0 }
//! Best tuning { .id = 5, .valid = 1, timeUs = 12.345678,  .algo = RING, .proto = SIMPLE,
//!   .symKernelId = Undefined, nChannels = 16, maxChannels = 16, nWarps = 17, forced = 0 }
//! ```
//!
//! (each on one line). An `Input` line and the next `Best tuning` line of the same stream make one
//! [`TuningCall`]: the function, NCCL's `nBytes` and `numPipeOps`, and the choice with its time and
//! channel count (`ncclTuningGetChannels`).

use crate::model::{Algo, Coll, Proto};
use serde::Serialize;

/// One of the two 2.31 lines, as read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum TuningLine {
    Input(TuningInput),
    Best(BestTuning),
}

/// `Input: { ... }`: what the tuner was asked.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuningInput {
    pub(crate) coll: Coll,
    /// NCCL's `nBytes` (the larger of send and receive, per rank).
    pub n_bytes: u64,
    pub(crate) num_pipe_ops: u64,
    pub(crate) count: u64,
    pub(crate) reg_buff: bool,
}

/// `Best tuning { ... }`: what it chose. `algo`/`proto` are None for a symmetric kernel (`Undefined`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BestTuning {
    /// `algo * 3 + proto`, or 21 + the symmetric kernel's id.
    pub(crate) id: i64,
    pub(crate) valid: bool,
    /// As printed (`%f`, µs).
    pub time_us: String,
    pub(crate) algo: Option<Algo>,
    pub(crate) proto: Option<Proto>,
    /// `ncclSymkKernelIdToString`, None when it is `Undefined`/`Unknown`.
    pub(crate) sym_kernel: Option<String>,
    pub n_channels: i64,
    pub(crate) max_channels: i64,
    pub n_warps: i64,
    pub(crate) forced: bool,
}

/// An `Input` line and its `Best tuning` line.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuningCall {
    pub input: TuningInput,
    pub best: BestTuning,
    /// Index into `NcclLog::streams`.
    pub(crate) stream: usize,
    /// The `Best tuning` line.
    pub(crate) line: usize,
}

/// A 2.31 tuning line read from a log, with where it was.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TuningLineAt {
    pub(crate) parsed: TuningLine,
    pub(crate) stream: usize,
    pub(crate) line: usize,
}

/// `.key = value` pairs between the braces of `msg` after `head`.
fn fields<'a>(msg: &'a str, head: &str) -> Option<Vec<(&'a str, &'a str)>> {
    let body = msg.strip_prefix(head)?.trim();
    let body = body.strip_prefix('{')?.strip_suffix('}')?;
    body.split(',')
        .map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key.trim().trim_start_matches('.'), value.trim()))
        })
        .collect()
}

fn get<'a>(pairs: &[(&str, &'a str)], key: &str) -> Option<&'a str> {
    pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn number<T: std::str::FromStr>(pairs: &[(&str, &str)], key: &str) -> Option<T> {
    get(pairs, key)?.parse().ok()
}

/// The message of a 2.31 tuning line (the text after `NCCL INFO `), or None for any other line;
/// a line that starts like one but does not parse is an error naming the field list.
pub fn tuning_line(msg: &str) -> Option<Result<TuningLine, String>> {
    let msg = msg.trim();
    let bad = || format!("NCCL 2.31 tuning line does not parse: '{msg}'");
    if msg.starts_with("Input: { .comm = ") {
        return Some(input_line(msg).ok_or_else(bad).map(TuningLine::Input));
    }
    if msg.starts_with("Best tuning { .id = ") {
        return Some(best_line(msg).ok_or_else(bad).map(TuningLine::Best));
    }
    None
}

fn input_line(msg: &str) -> Option<TuningInput> {
    let pairs = fields(msg, "Input:")?;
    let func = get(&pairs, "func")?;
    let coll = Coll::ALL.into_iter().find(|c| c.nccl_name() == func)?;
    Some(TuningInput {
        coll,
        n_bytes: number(&pairs, "nBytes")?,
        // Spelled `numPipesOps` in NCCL's format string.
        num_pipe_ops: number(&pairs, "numPipesOps")?,
        count: number(&pairs, "count")?,
        reg_buff: number::<i64>(&pairs, "regBuff")? != 0,
    })
}

fn best_line(msg: &str) -> Option<BestTuning> {
    let pairs = fields(msg, "Best tuning")?;
    let time_us = get(&pairs, "timeUs")?;
    time_us.parse::<f64>().ok()?;
    // `ncclAlgoToString`/`ncclProtoToString` print "Undefined"/"Unknown" for a symmetric kernel.
    let algo_word = get(&pairs, "algo")?;
    let algo = Algo::ALL.into_iter().find(|a| a.log_name() == algo_word);
    let proto_word = get(&pairs, "proto")?;
    let proto = Proto::ALL.into_iter().find(|p| p.log_name() == proto_word);
    let sym = get(&pairs, "symKernelId")?;
    Some(BestTuning {
        id: number(&pairs, "id")?,
        valid: number::<i64>(&pairs, "valid")? != 0,
        time_us: time_us.to_string(),
        algo,
        proto,
        sym_kernel: (!matches!(sym, "Undefined" | "Unknown" | "")).then(|| sym.to_string()),
        n_channels: number(&pairs, "nChannels")?,
        max_channels: number(&pairs, "maxChannels")?,
        n_warps: number(&pairs, "nWarps")?,
        forced: number::<i64>(&pairs, "forced")? != 0,
    })
}

/// Pair each `Best tuning` line with the last unpaired `Input` line of its stream.
pub(crate) fn calls(lines: &[TuningLineAt]) -> Vec<TuningCall> {
    let mut pending: Vec<(usize, TuningInput)> = Vec::new();
    let mut out = Vec::new();
    for at in lines {
        match &at.parsed {
            TuningLine::Input(input) => {
                pending.retain(|(s, _)| *s != at.stream);
                pending.push((at.stream, input.clone()));
            }
            TuningLine::Best(best) => {
                if let Some(i) = pending.iter().position(|(s, _)| *s == at.stream) {
                    let (_, input) = pending.remove(i);
                    out.push(TuningCall {
                        input,
                        best: best.clone(),
                        stream: at.stream,
                        line: at.line,
                    });
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // Written from the format strings of dev@86fa684d src/tuning/tuning.cc:176-181 and :286-291
    // (no 2.31 log is public here): `%p` as glibc prints it, `%lb` as binary digits, `%f` with six decimals.
    const INPUT: &str = "Input: { .comm = 0x55d0c0a3e000, .tuningMask = 111111111111111111111, .func = AllReduce, \
        .redOp = 0, .devRedop = 0, .dataType = 7, .nBytes = 1048576, .numPipesOps = 1, .count = 262144, \
        .countMax = 0, .nWorks = 0, .winRegType = 0, .regBuff = 0 }";
    const BEST: &str =
        "Best tuning { .id = 5, .valid = 1, timeUs = 12.345678,  .algo = RING, .proto = SIMPLE, \
        .symKernelId = Undefined, nChannels = 16, maxChannels = 16, nWarps = 17, forced = 0 }";
    const BEST_SYM: &str = "Best tuning { .id = 24, .valid = 1, timeUs = 3.500000,  .algo = Undefined, \
        .proto = Unknown, .symKernelId = AllReduce_RSxLD_AGxST, nChannels = 0, maxChannels = 0, nWarps = 0, forced = 0 }";

    fn at(msg: &str, stream: usize, line: usize) -> TuningLineAt {
        TuningLineAt {
            parsed: tuning_line(msg).unwrap().unwrap(),
            stream,
            line,
        }
    }

    #[test]
    fn input_and_best_lines_parse() {
        let TuningLine::Input(input) = tuning_line(INPUT).unwrap().unwrap() else {
            panic!("not an input line")
        };
        assert_eq!(input.coll, Coll::AllReduce);
        assert_eq!(
            (input.n_bytes, input.num_pipe_ops, input.count),
            (1048576, 1, 262144)
        );
        assert!(!input.reg_buff);
        let TuningLine::Best(best) = tuning_line(BEST).unwrap().unwrap() else {
            panic!("not a best line")
        };
        // id 5 = RING (1) * 3 + SIMPLE (2).
        assert_eq!(best.id, 5);
        assert_eq!(
            (best.algo, best.proto),
            (Some(Algo::Ring), Some(Proto::Simple))
        );
        assert_eq!(
            (best.n_channels, best.max_channels, best.n_warps),
            (16, 16, 17)
        );
        assert_eq!(best.time_us, "12.345678");
        assert_eq!(best.sym_kernel, None);
        assert!(best.valid && !best.forced);
        let TuningLine::Best(sym) = tuning_line(BEST_SYM).unwrap().unwrap() else {
            panic!("not a best line")
        };
        assert_eq!((sym.algo, sym.proto), (None, None));
        assert_eq!(sym.sym_kernel.as_deref(), Some("AllReduce_RSxLD_AGxST"));
    }

    #[test]
    fn other_lines_are_not_tuning_lines_and_broken_ones_are_errors() {
        assert!(tuning_line(
            "AllReduce: 1048576 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..15}"
        )
        .is_none());
        assert!(tuning_line("Best tuning, algorithm, RING, protocol, SIMPLE").is_none());
        let broken = "Best tuning { .id = 5, .valid = 1, timeUs = fast }";
        assert!(tuning_line(broken)
            .unwrap()
            .unwrap_err()
            .contains("does not parse"));
        let unknown = INPUT.replace("AllReduce", "AllToAll");
        assert!(tuning_line(&unknown).unwrap().is_err());
    }

    #[test]
    fn best_lines_pair_with_the_input_of_their_stream() {
        let lines = [
            at(INPUT, 0, 10),
            at(&INPUT.replace("1048576", "4096"), 1, 11),
            at(BEST, 0, 12),
            at(BEST_SYM, 1, 13),
            at(BEST, 1, 14),
        ];
        let calls = calls(&lines);
        assert_eq!(calls.len(), 2, "the second Best of stream 1 has no Input");
        assert_eq!((calls[0].input.n_bytes, calls[0].line), (1048576, 12));
        assert_eq!((calls[1].input.n_bytes, calls[1].line), (4096, 13));
        assert_eq!(
            calls[1].best.sym_kernel.as_deref(),
            Some("AllReduce_RSxLD_AGxST")
        );
    }
}
