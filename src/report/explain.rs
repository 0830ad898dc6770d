//! Output of `planner explain`: the ranked table of every algorithm/protocol
//! pair, the masked pairs with their reasons, sweep bands, an SVG plot, and
//! NCCL's own formats (init table, per-call lines) to diff against a log.

use super::call_size_text;
use crate::calibrate::{CalibratedCall, CalibratedSweep};
use crate::error::{Error, Result};
use crate::expect::Expectation;
use crate::model::beyond;
use crate::model::schedule::GroupPlan;
use crate::model::select::{Call, Evaluation};
use crate::model::sweep::Sweep;
use crate::model::symmetric::{
    self, symmetric_candidates, PeerPath, SymDtype, SymReason, SymmetricChoice, SymmetricInput,
    SymmetricTable,
};
use crate::model::{Algo, Coll, Model, Proto};
use crate::topo::{Cluster, PathType};
use crate::units::{count, format_size};
use comfy_table::{presets, Attribute, Cell, CellAlignment, ContentArrangement, Table};
use serde::Serialize;

/// `%8.1f` / `%6.1f` as glibc prints them (NaN as `nan`).
fn c_float(v: f32, width: usize) -> String {
    let v = v as f64;
    let text = if v.is_nan() {
        if v.is_sign_negative() {
            "-nan".to_string()
        } else {
            "nan".to_string()
        }
    } else if v.is_infinite() {
        if v < 0.0 { "-inf" } else { "inf" }.to_string()
    } else {
        format!("{v:.1}")
    };
    format!("{text:>width$}")
}

/// NCCL's init table exactly as its TUNING log prints it (the text after
/// `NCCL INFO `), then the `threadThresholds` line; with `NCCL_ALGO` or
/// `NCCL_PROTO` set, NCCL's enable matrix comes first.
pub fn nccl_table_lines(model: &Model) -> Vec<String> {
    let t = &model.tuned;
    let mut lines = Vec::new();
    if model.env.user_lists_set() {
        lines.push("Enabled NCCL Func/Proto/Algo Matrix:".to_string());
        let mut head = "     Function | ".to_string();
        for p in Proto::ALL {
            head.push_str(&format!("{:>8}  ", p.nccl_name()));
        }
        head.push_str(" | ");
        for a in Algo::ALL {
            head.push_str(&format!("{:>13}  ", a.nccl_name()));
        }
        lines.push(head);
        // NCCL prints the matrix after parsing the lists, before the forced disables.
        let user = crate::model::knobs::EnableMatrix::from_env(&model.env).unwrap_or_default();
        for c in Coll::ALL {
            let mut row = format!("{:>13} | ", c.nccl_name());
            for p in Proto::ALL {
                row.push_str(&format!("{:>8}  ", user.proto[c as usize][p as usize]));
            }
            row.push_str(" | ");
            for a in Algo::ALL {
                row.push_str(&format!("{:>13}  ", user.algo[c as usize][a as usize]));
            }
            lines.push(row);
        }
    }
    for block in 0..Algo::ALL.len().div_ceil(3) {
        let algos: Vec<Algo> = (0..3)
            .filter_map(|b| Algo::from_index(block * 3 + b))
            .collect();
        let mut line = "  Algorithm   |".to_string();
        for a in &algos {
            line.push_str(&format!(
                " {:>14}   {:>14}   {:>14} |",
                "",
                a.nccl_name(),
                ""
            ));
        }
        lines.push(line);
        // NCCL prints nine protocol headers even for a short block.
        let mut line = "  Protocol    |".to_string();
        for _ in 0..3 {
            for p in Proto::ALL {
                line.push_str(&format!(" {:>14} |", p.nccl_name()));
            }
        }
        lines.push(line);
        let mut line = " Max NThreads |".to_string();
        for a in &algos {
            for p in Proto::ALL {
                line.push_str(&format!(
                    " {:>14} |",
                    t.max_threads[*a as usize][p as usize]
                ));
            }
        }
        lines.push(line);
        for c in Coll::ALL {
            let mut line = format!("{:>13} |", c.nccl_name());
            for a in &algos {
                for p in Proto::ALL {
                    let (ci, ai, pi) = (c as usize, *a as usize, p as usize);
                    line.push_str(&format!(
                        "{}/{} |",
                        c_float(t.latency[ci][ai][pi], 8),
                        c_float(t.bandwidth[ci][ai][pi], 6)
                    ));
                }
            }
            lines.push(line);
        }
    }
    if model.input.n_ranks > 1 {
        let th = &t.thread_thresholds;
        lines.push(format!(
            "threadThresholds {}/{}/{} | {}/{}/{} | {} | {}",
            th[0][0], th[0][1], th[0][2], th[1][0], th[1][1], th[1][2], th[2][2], th[3][2]
        ));
    }
    lines
}

/// One entry of the init table in `--nccl-table --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TableEntryJson {
    pub(crate) collective: &'static str,
    pub(crate) algorithm: &'static str,
    pub(crate) protocol: &'static str,
    pub(crate) latency_us: f32,
    pub(crate) bandwidth_gbs: f32,
    pub(crate) max_threads: i64,
    pub(crate) thread_threshold: i64,
    pub(crate) masked_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct NcclTableJson {
    pub(crate) tuning_table: String,
    pub(crate) ranks: usize,
    pub(crate) nodes: usize,
    pub(crate) runtime_channels: usize,
    pub(crate) nvls_channels: usize,
    /// Every function x algorithm x protocol in NCCL's order.
    pub(crate) entries: Vec<TableEntryJson>,
}

pub(crate) fn nccl_table_json(model: &Model) -> NcclTableJson {
    let t = &model.tuned;
    let mut entries = Vec::with_capacity(105);
    for c in Coll::ALL {
        for a in Algo::ALL {
            for p in Proto::ALL {
                let (ci, ai, pi) = (c as usize, a as usize, p as usize);
                entries.push(TableEntryJson {
                    collective: c.nccl_name(),
                    algorithm: a.nccl_name(),
                    protocol: p.nccl_name(),
                    latency_us: t.latency[ci][ai][pi],
                    bandwidth_gbs: t.bandwidth[ci][ai][pi],
                    max_threads: t.max_threads[ai][pi],
                    thread_threshold: t.thread_thresholds[ai][pi],
                    masked_by: t
                        .masks_of(c, a, p)
                        .iter()
                        .map(|m| m.text(c, a, p))
                        .collect(),
                });
            }
        }
    }
    NcclTableJson {
        tuning_table: model.table.source.clone(),
        ranks: model.input.n_ranks,
        nodes: model.input.n_nodes,
        runtime_channels: model.input.channels,
        nvls_channels: model.input.nvls_channels,
        entries,
    }
}

/// NCCL's per-call lines for a list of planned groups.
pub fn nccl_call_lines(plans: &[GroupPlan]) -> Vec<String> {
    plans
        .iter()
        .flat_map(|plan| plan.tasks.iter().map(move |t| t.nccl_line(plan.call.coll)))
        .collect()
}

/// One pair in `--json` output.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PairJson {
    pub(crate) algorithm: &'static str,
    pub(crate) protocol: &'static str,
    pub(crate) usable: bool,
    pub(crate) channels: usize,
    pub(crate) threads: usize,
    pub(crate) latency_us: f64,
    pub(crate) bandwidth_term_us: f64,
    pub(crate) time_us: Option<f64>,
    pub(crate) algbw_gbs: Option<f64>,
    /// algbw x the collective's nccl-tests factor (2(n-1)/n for all-reduce), as `verify` and nccl-tests.
    pub(crate) busbw_gbs: Option<f64>,
    /// The algorithm's own factor in NCCL's model (bus to algorithm bandwidth: Tree all-reduce 2, rings
    /// 2(n-1)/n); not the busbw factor.
    pub(crate) model_bus_factor: f64,
    pub(crate) margin_us: Option<f64>,
    pub(crate) masked_by: Vec<String>,
    /// With `--calibration`: the calibrated time (null where the pair is
    /// masked or was not measured); absent without a calibration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) calibrated_time_us: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) calibrated_busbw_gbs: Option<Option<f64>>,
    /// planner's expected time and busbw for this pair (its model of the machine's links, `src/expect`; not NCCL's
    /// estimate); null where the pair cannot run here or is not modelled (CollNet, PAT).
    pub(crate) expected_time_us: Option<f64>,
    pub(crate) expected_busbw_gbs: Option<f64>,
}

/// The pair planner's expected model rates fastest, and by how much it is expected to beat NCCL's pick.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExpectedFastestJson {
    pub(crate) algorithm: &'static str,
    pub(crate) protocol: &'static str,
    pub(crate) expected_time_us: f64,
    pub(crate) expected_busbw_gbs: f64,
    /// (NCCL's pick's expected time - this one's) / this one's x 100; 0 when NCCL's pick is the fastest.
    pub(crate) expected_gain_over_nccl_pick_pct: Option<f64>,
}

/// The calibrated pick in `--json` (with `--calibration`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CalibratedPickJson {
    pub(crate) algorithm: &'static str,
    pub(crate) protocol: &'static str,
    pub(crate) time_us: f64,
}

/// What `--calibration` adds to `explain --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CalibrationJson {
    pub(crate) calibration: String,
    /// Whose times it fits: "nccl" or "native".
    pub(crate) backend: String,
    pub(crate) calibrated_pick: Option<CalibratedPickJson>,
    /// NCCL's pick as the calibration times it (null: not calibrated).
    pub(crate) nccl_pick_calibrated_time_us: Option<f64>,
    /// NCCL's pick minus the calibrated pick, calibrated times (>= 0).
    pub(crate) margin_us: Option<f64>,
    pub(crate) margin_pct: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExplainJson {
    pub(crate) collective: &'static str,
    pub(crate) size_bytes: u64,
    /// Bytes NCCL's per-call line shows for one op.
    pub(crate) call_bytes: u64,
    /// Bytes NCCL's model costs for the whole group.
    pub(crate) model_bytes: u64,
    pub(crate) ops: usize,
    pub(crate) num_pipe_ops: u64,
    pub(crate) tuning_table: String,
    pub(crate) ranks: usize,
    pub(crate) nodes: usize,
    pub(crate) runtime_channels: usize,
    pub(crate) winner: PairJson,
    /// Usable pairs fastest first, then masked pairs in NCCL's order.
    pub(crate) pairs: Vec<PairJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) calibration: Option<CalibrationJson>,
    /// NCCL's symmetric kernels for this call (registered windows).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) symmetric: Option<SymmetricJson>,
    /// planner's own kernels (uncalibrated model values).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) beyond_nccl: Option<Vec<BeyondJson>>,
    /// NCCL's pick, NCCL's symmetric pick, the fastest of all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) possible: Option<PossibleJson>,
    /// One rank: what NCCL runs instead of an algorithm (absent with 2+ ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) one_rank: Option<OneRankJson>,
    /// planner's expected model: the pair it rates fastest (absent where no pair is modelled).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expected_fastest: Option<ExpectedFastestJson>,
}

/// NCCL with one rank (`enqueue.cc` taskAppend -> `ncclLaunchOneRank`, `device/onerank.cu`, v2.28.9): no
/// algorithm, protocol, channel or collective kernel; the Ring/Simple entry is updateCollCostTable's placeholder (0).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OneRankJson {
    /// sum/prod/min/max (and bitwise ops): one `cudaMemcpyAsync` of the buffer, none when in place.
    pub(crate) copy: &'static str,
    /// ncclAvg on floats, or a ncclRedOpCreatePreMulSum op: one scaling kernel.
    pub(crate) scaling_kernel: &'static str,
    /// Bytes the copy moves (the call's receive buffer).
    pub(crate) copy_bytes: u64,
}

/// `OneRankJson` for a call of `bytes` on a one-rank communicator.
pub(crate) fn one_rank_json(bytes: u64) -> OneRankJson {
    OneRankJson {
        copy:
            "cudaMemcpyAsync(recvbuff, sendbuff) on the stream; nothing when sendbuff == recvbuff",
        scaling_kernel: "oneRankReduce: min(32, ceil(bytes / 16 KiB)) blocks x 512 threads",
        copy_bytes: bytes,
    }
}

/// What NCCL does with one rank, for people (after the ranked table).
pub(crate) fn one_rank_text() -> &'static str {
    "One rank: NCCL runs no algorithm, protocol or channel. ncclEnqueueCheck's taskAppend calls ncclLaunchOneRank \
     (enqueue.cc, device/onerank.cu): sum, prod, min and max are one cudaMemcpyAsync from the send to the receive \
     buffer (nothing when in place); an average or a PreMulSum op runs one oneRankReduce kernel (min(32, bytes / \
     16 KiB) blocks x 512 threads). The Ring/Simple row is NCCL's cost-table placeholder (time 0), never launched.\n"
}

/// Calibrated busbw from a calibrated time, with the same bytes and nccl-tests
/// factor as the stock columns.
fn calibrated_busbw(model: &Model, eval: &Evaluation, time_us: f64) -> Option<f64> {
    (time_us > 0.0).then(|| {
        eval.group_bytes as f64 / (time_us * 1000.0)
            * eval.call.coll.nccl_tests_bus_factor(model.input.n_ranks)
    })
}

fn pair_json(
    model: &Model,
    eval: &Evaluation,
    index: usize,
    cal: Option<&CalibratedCall>,
) -> PairJson {
    let mut p = stock_pair_json(model, eval, index);
    if let Some(cal) = cal {
        let t = cal.times_us[index];
        p.calibrated_time_us = Some(t);
        p.calibrated_busbw_gbs = Some(t.and_then(|t| calibrated_busbw(model, eval, t)));
    }
    p
}

/// NCCL's pick against the calibrated pick, calibrated times: (NCCL's pick
/// µs, margin µs, margin % of the calibrated pick).
fn calibrated_margin(
    eval: &Evaluation,
    cal: &CalibratedCall,
) -> (Option<f64>, Option<f64>, Option<f64>) {
    let nccl = cal.times_us[eval.winner];
    match (nccl, cal.pick_us()) {
        (Some(n), Some(p)) => (Some(n), Some(n - p), (p > 0.0).then(|| 100.0 * (n - p) / p)),
        (n, _) => (n, None, None),
    }
}

fn calibration_json(eval: &Evaluation, cal: &CalibratedCall) -> CalibrationJson {
    let (nccl, margin, pct) = calibrated_margin(eval, cal);
    CalibrationJson {
        calibration: cal.source.clone(),
        backend: cal.backend.name().to_string(),
        calibrated_pick: cal.pick.and_then(|i| {
            let c = &eval.candidates[i];
            Some(CalibratedPickJson {
                algorithm: c.algo.nccl_name(),
                protocol: c.proto.nccl_name(),
                time_us: cal.times_us[i]?,
            })
        }),
        nccl_pick_calibrated_time_us: nccl,
        margin_us: margin,
        margin_pct: pct,
    }
}

fn stock_pair_json(model: &Model, eval: &Evaluation, index: usize) -> PairJson {
    let c = &eval.candidates[index];
    let usable = c.usable();
    let winner_time = eval.winner().time_us as f64;
    let factor = eval.call.coll.nccl_tests_bus_factor(model.input.n_ranks);
    let time = usable.then_some(c.time_us as f64);
    let algbw = time
        .filter(|t| *t > 0.0)
        .map(|t| eval.group_bytes as f64 / (t * 1000.0));
    PairJson {
        algorithm: c.algo.nccl_name(),
        protocol: c.proto.nccl_name(),
        usable,
        channels: c.channels,
        threads: c.threads,
        latency_us: c.latency_us as f64,
        bandwidth_term_us: c.bandwidth_term_us as f64,
        time_us: time,
        algbw_gbs: algbw,
        busbw_gbs: algbw.map(|b| b * factor),
        model_bus_factor: model.bus_factor(eval.call.coll, c.algo),
        margin_us: time.map(|t| t - winner_time),
        masked_by: c
            .masks
            .iter()
            .map(|m| m.text(eval.call.coll, c.algo, c.proto))
            .collect(),
        calibrated_time_us: None,
        calibrated_busbw_gbs: None,
        expected_time_us: None,
        expected_busbw_gbs: None,
    }
}

/// The pair of `expected` planner's expected model rates fastest (ties: NCCL's order, as `Expected::fastest`).
pub(crate) fn expected_fastest(expected: &[Expectation]) -> Option<&Expectation> {
    expected.iter().fold(None, |best, e| match best {
        Some(b) if b.expected_time_us <= e.expected_time_us => Some(b),
        _ => Some(e),
    })
}

fn expected_for(expected: &[Expectation], algo: Algo, proto: Proto) -> Option<&Expectation> {
    expected.iter().find(|e| e.algo == algo && e.proto == proto)
}

/// Fill the expected columns of `json` (every pair, the winner, the expected fastest) from planner's expected model
/// (`Expected::all` of this collective and size).
pub(crate) fn add_expected(json: &mut ExplainJson, expected: &[Expectation]) {
    let fill = |p: &mut PairJson| {
        if let Some(e) = expected
            .iter()
            .find(|e| e.algo.nccl_name() == p.algorithm && e.proto.nccl_name() == p.protocol)
        {
            p.expected_time_us = Some(e.expected_time_us);
            p.expected_busbw_gbs = Some(e.expected_busbw_gbs);
        }
    };
    for p in &mut json.pairs {
        fill(p);
    }
    fill(&mut json.winner);
    let nccl_pick = json.winner.expected_time_us;
    json.expected_fastest = expected_fastest(expected).map(|f| ExpectedFastestJson {
        algorithm: f.algo.nccl_name(),
        protocol: f.proto.nccl_name(),
        expected_time_us: f.expected_time_us,
        expected_busbw_gbs: f.expected_busbw_gbs,
        expected_gain_over_nccl_pick_pct: nccl_pick
            .map(|n| 100.0 * (n - f.expected_time_us) / f.expected_time_us),
    });
}

/// Candidate indices: usable ones by time (ties in NCCL's order), then masked.
fn ranked(eval: &Evaluation) -> (Vec<usize>, Vec<usize>) {
    let mut usable: Vec<usize> = (0..eval.candidates.len())
        .filter(|&i| eval.candidates[i].usable())
        .collect();
    usable.sort_by(|&a, &b| {
        eval.candidates[a]
            .time_us
            .total_cmp(&eval.candidates[b].time_us)
            .then(a.cmp(&b))
    });
    // NCCL's pick first even if a later pair ties it.
    if let Some(pos) = usable.iter().position(|&i| i == eval.winner) {
        let w = usable.remove(pos);
        usable.insert(0, w);
    }
    let masked = (0..eval.candidates.len())
        .filter(|&i| !eval.candidates[i].usable())
        .collect();
    (usable, masked)
}

/// `explain_json` with the calibrated columns of `--calibration`.
pub(crate) fn explain_json_calibrated(
    model: &Model,
    eval: &Evaluation,
    cal: Option<&CalibratedCall>,
) -> ExplainJson {
    let (usable, masked) = ranked(eval);
    ExplainJson {
        collective: eval.call.coll.nccl_name(),
        size_bytes: eval.call.size,
        call_bytes: eval.call.log_bytes,
        model_bytes: eval.group_bytes,
        ops: eval.call.ops,
        num_pipe_ops: eval.num_pipe_ops,
        tuning_table: model.table.source.clone(),
        ranks: model.input.n_ranks,
        nodes: model.input.n_nodes,
        runtime_channels: model.input.channels,
        winner: pair_json(model, eval, eval.winner, cal),
        pairs: usable
            .iter()
            .chain(masked.iter())
            .map(|&i| pair_json(model, eval, i, cal))
            .collect(),
        calibration: cal.map(|c| calibration_json(eval, c)),
        symmetric: None,
        beyond_nccl: None,
        possible: None,
        one_rank: (model.input.n_ranks == 1).then(|| one_rank_json(eval.call.size)),
        expected_fastest: None,
    }
}

fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// `x µs (+y%)` of `extra` over `base`.
fn margin_text(extra: f64, base: f64) -> String {
    if base > 0.0 {
        format!("+{} µs (+{:.0}%)", us(extra), 100.0 * extra / base)
    } else {
        format!("+{} µs", us(extra))
    }
}

/// `explain_text` with planner's expected columns (`expected`: `Expected::all` of the call, None with several ops
/// per group) and the calibrated columns of `--calibration`: calibrated time, calibrated busbw, the margin to the
/// calibrated pick; then a line on the expected fastest and one on the calibrated pick against NCCL's.
pub(crate) fn explain_text_calibrated(
    model: &Model,
    eval: &Evaluation,
    cal: Option<&CalibratedCall>,
    expected: Option<&[Expectation]>,
) -> String {
    let mut out = explain_heading(model, eval);
    let (usable, masked) = ranked(eval);
    if expected.is_some() {
        out.push_str(NCCL_AND_EXPECTED_COLUMNS);
    }
    out.push_str(&explain_table(model, eval, &usable, cal, expected));
    out.push('\n');
    if model.input.n_ranks == 1 {
        out.push_str(one_rank_text());
        return out;
    }
    out.push_str(&pick_line(model, eval));
    if let Some(expected) = expected {
        out.push_str(&expected_verdict_line(eval, expected));
    }
    if let Some(cal) = cal {
        out.push_str(&calibrated_line(eval, cal));
    }
    if !masked.is_empty() {
        out.push_str("Masked:\n");
        for &i in &masked {
            out.push_str(&masked_line(eval, i));
        }
    }
    out
}

/// Explain's first line: the call, the ranks and nodes, the channels and NCCL's model.
fn explain_heading(model: &Model, eval: &Evaluation) -> String {
    let call = &eval.call;
    let ops = if call.ops > 1 {
        format!(
            " x {} ops (one group, {} per op)",
            call.ops,
            format_size(call.model_bytes)
        )
    } else {
        String::new()
    };
    format!(
        "{} of {}{ops}: {} on {}, {}, NCCL {} model ({})\n",
        call.coll.nccl_name(),
        call_size_text(call),
        count(model.input.n_ranks, "rank"),
        count(model.input.n_nodes, "node"),
        count(model.input.channels, "channel"),
        model.table.family,
        model.table.source
    )
}

/// Explain's table: a row per usable pair (`usable`, in rank order) with NCCL's costs, then the expected and
/// calibrated columns where given.
fn explain_table(
    model: &Model,
    eval: &Evaluation,
    usable: &[usize],
    cal: Option<&CalibratedCall>,
    expected: Option<&[Expectation]>,
) -> String {
    let mut header = vec![
        "pick",
        "algorithm",
        "protocol",
        "channels",
        "threads",
        "latency µs",
        "bandwidth µs",
        "time µs",
        "algbw GB/s",
        "busbw GB/s",
        "margin",
    ];
    if expected.is_some() {
        header.extend(["expected µs", "expected busbw GB/s"]);
    }
    let right_aligned: Vec<bool> = header
        .iter()
        .map(|h| {
            !matches!(
                *h,
                "pick" | "algorithm" | "protocol" | "margin" | "calibrated margin"
            )
        })
        .collect();
    if cal.is_some() {
        header.extend([
            "calibrated µs",
            "calibrated busbw GB/s",
            "calibrated margin",
        ]);
    }
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header);
    for &i in usable {
        let p = pair_json(model, eval, i, cal);
        let is_winner = i == eval.winner;
        let margin = match (p.margin_us, p.time_us) {
            (_, _) if is_winner => "NCCL's pick".to_string(),
            (Some(m), Some(t)) if t > 0.0 => {
                let w = t - m;
                if w > 0.0 {
                    format!("+{} µs (+{:.0}%)", us(m), 100.0 * m / w)
                } else {
                    format!("+{} µs", us(m))
                }
            }
            _ => String::new(),
        };
        let mut cells = vec![
            if is_winner { "▶" } else { "" }.to_string(),
            p.algorithm.to_string(),
            p.protocol.to_string(),
            p.channels.to_string(),
            p.threads.to_string(),
            us(p.latency_us),
            us(p.bandwidth_term_us),
            p.time_us.map(us).unwrap_or_default(),
            p.algbw_gbs.map(|b| format!("{b:.2}")).unwrap_or_default(),
            p.busbw_gbs.map(|b| format!("{b:.2}")).unwrap_or_default(),
            margin,
        ];
        if let Some(expected) = expected {
            let c = &eval.candidates[i];
            let e = expected_for(expected, c.algo, c.proto);
            cells.push(
                e.map(|e| us(e.expected_time_us))
                    .unwrap_or_else(|| "-".into()),
            );
            cells.push(
                e.map(|e| format!("{:.2}", e.expected_busbw_gbs))
                    .unwrap_or_else(|| "-".into()),
            );
        }
        if let Some(cal) = cal {
            let t = cal.times_us[i];
            cells.push(t.map(us).unwrap_or_else(|| "-".into()));
            cells.push(
                p.calibrated_busbw_gbs
                    .flatten()
                    .map(|b| format!("{b:.2}"))
                    .unwrap_or_else(|| "-".into()),
            );
            cells.push(match (t, cal.pick_us()) {
                _ if cal.pick == Some(i) => "calibrated pick".to_string(),
                (Some(t), Some(best)) => margin_text(t - best, best),
                _ => String::new(),
            });
        }
        let row: Vec<Cell> = cells
            .into_iter()
            .enumerate()
            .map(|(k, text)| {
                let mut cell = Cell::new(text);
                if right_aligned.get(k).copied().unwrap_or(false) {
                    cell = cell.set_alignment(CellAlignment::Right);
                }
                if is_winner {
                    cell = cell.add_attribute(Attribute::Bold);
                }
                cell
            })
            .collect();
        table.add_row(row);
    }
    table.to_string()
}

/// The line under the table: NCCL's pick, its channels, threads and time, and the busbw factor.
fn pick_line(model: &Model, eval: &Evaluation) -> String {
    let call = &eval.call;
    let w = eval.winner();
    let mut out = format!(
        "NCCL picks {}/{} on {} x {}: {} µs",
        w.algo.nccl_name(),
        w.proto.nccl_name(),
        count(w.channels, "channel"),
        count(w.threads, "thread"),
        us(w.time_us as f64)
    );
    if call.ops > 1 {
        out.push_str(&format!(
            " for the group ({} µs per op, numPipeOps {})",
            us(w.time_us as f64 / call.ops as f64),
            eval.num_pipe_ops
        ));
    }
    out.push_str(&format!(
        ". busbw = algbw x {:.3}, the {} factor of nccl-tests.\n",
        call.coll.nccl_tests_bus_factor(model.input.n_ranks),
        call.coll.nccl_name()
    ));
    out
}

/// One line under `Masked:`: the masked pair and why.
fn masked_line(eval: &Evaluation, i: usize) -> String {
    let call = &eval.call;
    let c = &eval.candidates[i];
    // "NVLS: a; NVLS: b" reads as "NVLS: a; b".
    let mut reasons: Vec<String> = Vec::new();
    for m in &c.masks {
        let text = m.text(call.coll, c.algo, c.proto);
        let short = match reasons.first().and_then(|f| f.split_once(": ")) {
            Some((head, _)) => text
                .strip_prefix(&format!("{head}: "))
                .map(str::to_string)
                .unwrap_or(text),
            None => text,
        };
        reasons.push(short);
    }
    format!(
        "  {:<14} {:<7} {}\n",
        c.algo.nccl_name(),
        c.proto.nccl_name(),
        reasons.join("; ")
    )
}

/// What the columns of explain's table are, above it when the expected columns are shown.
const NCCL_AND_EXPECTED_COLUMNS: &str = "latency, bandwidth, time, algbw, busbw, margin: NCCL's own cost model, used for its choice \
(not a prediction); expected: planner's model of this machine's links (`planner expect`), - where not modelled\n";

/// NCCL's pick against the pair planner's expected model rates fastest, both at their expected times.
fn expected_verdict_line(eval: &Evaluation, expected: &[Expectation]) -> String {
    let w = eval.winner();
    let nccl = pair_name(w.algo, w.proto);
    let Some(fastest) = expected_fastest(expected) else {
        return "Expected (planner's model): no pair is modelled here.\n".to_string();
    };
    let best = pair_name(fastest.algo, fastest.proto);
    let best_us = fastest.expected_time_us;
    match expected_for(expected, w.algo, w.proto) {
        Some(pick) if pick.expected_time_us <= best_us || best == nccl => format!(
            "Expected (planner's model): NCCL's pick is also the expected fastest, {nccl} {} µs.\n",
            us(pick.expected_time_us)
        ),
        // Equal to the printed precision: a tie, not a gain.
        Some(pick) if us(pick.expected_time_us) == us(best_us) => format!(
            "Expected (planner's model): NCCL's pick {nccl} ties the expected fastest, {best} {} µs.\n",
            us(best_us)
        ),
        Some(pick) => format!(
            "Expected (planner's model): fastest {best} {} µs, expected to beat NCCL's pick {nccl} ({} µs) by {} µs \
             ({:.0}%).\n",
            us(best_us),
            us(pick.expected_time_us),
            us(pick.expected_time_us - best_us),
            100.0 * (pick.expected_time_us - best_us) / best_us
        ),
        None => format!(
            "Expected (planner's model): fastest {best} {} µs; NCCL's pick {nccl} is not modelled.\n",
            us(best_us)
        ),
    }
}

/// The calibrated pick against NCCL's, one line (two with a note on the
/// pairs the calibration lacks).
fn calibrated_line(eval: &Evaluation, cal: &CalibratedCall) -> String {
    let w = eval.winner();
    let nccl = format!("{}/{}", w.algo.nccl_name(), w.proto.nccl_name());
    let mut out = format!(
        "Calibrated model ({}, {} backend): ",
        cal.source, cal.backend
    );
    let (nccl_us, margin, _) = calibrated_margin(eval, cal);
    // The pairs NCCL allows here, measured (a calibrated time) or not.
    let name = |c: &crate::model::select::Candidate| {
        format!("{}/{}", c.algo.nccl_name(), c.proto.nccl_name())
    };
    let allowed: Vec<(String, bool)> = cal
        .times_us
        .iter()
        .zip(&eval.candidates)
        .filter(|(_, c)| c.usable())
        .map(|(t, c)| (name(c), t.is_some()))
        .collect();
    let measured = allowed.iter().filter(|(_, m)| *m).count();
    let unmeasured: Vec<&str> = allowed
        .iter()
        .filter(|(_, m)| !*m)
        .map(|(n, _)| n.as_str())
        .collect();
    match (cal.pick, cal.pick_us()) {
        (Some(i), Some(t)) if i == eval.winner && unmeasured.is_empty() => {
            out.push_str(&format!("picks {nccl} too, {} µs.\n", us(t)));
        }
        (Some(i), Some(t)) if measured == 1 => {
            // One measured pair is no pick: it beat nothing.
            out.push_str(&format!(
                "has a time for {} only ({} µs), 1 of the {} pairs NCCL allows here: the others were not measured, \
                 so it ranks nothing",
                name(&eval.candidates[i]),
                us(t),
                allowed.len()
            ));
            out.push_str(if i == eval.winner {
                " (it is NCCL's pick).\n"
            } else {
                ".\n"
            });
        }
        (Some(i), Some(t)) => {
            let c = &eval.candidates[i];
            let among = if unmeasured.is_empty() {
                String::new()
            } else {
                format!(
                    " among the {} measured of the {} pairs NCCL allows here",
                    measured,
                    allowed.len()
                )
            };
            if i == eval.winner {
                out.push_str(&format!("picks {nccl} too{among}, {} µs.\n", us(t)));
                return with_unmeasured(out, &unmeasured);
            }
            out.push_str(&format!(
                "picks {}/{}{among}, {} µs; ",
                c.algo.nccl_name(),
                c.proto.nccl_name(),
                us(t)
            ));
            match (nccl_us, margin) {
                (Some(n), Some(m)) => out.push_str(&format!(
                    "NCCL's pick {nccl} takes {} µs there, {} over the calibrated pick.\n",
                    us(n),
                    margin_text(m, t)
                )),
                _ => out.push_str(&format!(
                    "NCCL's pick {nccl} is not in the calibration (not measured).\n"
                )),
            }
        }
        _ => out.push_str("none of the pairs NCCL allows here is in the calibration.\n"),
    }
    with_unmeasured(out, &unmeasured)
}

/// The line naming the pairs NCCL allows that the calibration has no time for (`-` in its columns).
fn with_unmeasured(mut out: String, unmeasured: &[&str]) -> String {
    if !unmeasured.is_empty() {
        out.push_str(&format!(
            "calibrated -: not measured, so the calibration has no time for {}.\n",
            unmeasured.join(", ")
        ));
    }
    out
}

/// After the calibrated crossover map: the pairs NCCL's model allows somewhere in the sweep that the calibration
/// has no time for, so the map ranks the measured ones only (empty when every allowed pair was measured).
pub fn calibrated_sweep_unmeasured_text(measured: &[String], unmeasured: &[String]) -> String {
    if unmeasured.is_empty() {
        return String::new();
    }
    format!(
        "The calibration measured {} of the {} pairs NCCL's model allows in this sweep ({}); not measured: {}. \
         The calibrated map ranks the measured pairs only.\n",
        measured.len(),
        measured.len() + unmeasured.len(),
        measured.join(", "),
        unmeasured.join(", ")
    )
}

/// Bands of a sweep for people.
pub(crate) fn sweep_text(model: &Model, sweep: &Sweep) -> String {
    let mut out = format!(
        "{} crossover map{}: {} on {}, NCCL {} model\n",
        sweep.coll.nccl_name(),
        if sweep.ops > 1 {
            format!(" ({} ops per group)", sweep.ops)
        } else {
            String::new()
        },
        count(model.input.n_ranks, "rank"),
        count(model.input.n_nodes, "node"),
        model.table.family
    );
    for band in &sweep.bands {
        let channels = if band.min_channels == band.max_channels {
            count(band.min_channels, "channel")
        } else {
            format!("{}-{} channels", band.min_channels, band.max_channels)
        };
        out.push_str(&format!(
            "  {} - {}: {}/{}, {}\n",
            format_size(band.from),
            format_size(band.to),
            band.algo.nccl_name(),
            band.proto.nccl_name(),
            channels
        ));
    }
    let crossings: Vec<String> = sweep
        .bands
        .windows(2)
        .map(|w| crossover_line(w[0].algo, w[0].proto, w[1].algo, w[1].proto, w[1].starts_at))
        .collect();
    if !crossings.is_empty() {
        out.push_str("Crossovers (smallest size where the next pick wins):\n");
        for c in crossings {
            out.push_str(&c);
            out.push('\n');
        }
    }
    if !sweep.skipped.is_empty() {
        out.push_str(&format!(
            "Skipped (too small for {} on {}): {}\n",
            sweep.coll.nccl_name(),
            count(model.input.n_ranks, "rank"),
            sweep
                .skipped
                .iter()
                .map(|s| format_size(*s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if model.input.n_ranks == 1 {
        out.push_str(one_rank_text());
    }
    out
}

/// The calibrated crossover map of `--sweep --calibration`, after NCCL's.
pub(crate) fn calibrated_sweep_text(cal: &CalibratedSweep) -> String {
    let mut out = format!(
        "Calibrated crossover map ({}, {} backend), among the pairs NCCL's model allows:\n",
        cal.calibration, cal.backend
    );
    for b in &cal.bands {
        out.push_str(&format!(
            "  {} - {}: {}/{}, {} - {} µs\n",
            format_size(b.from),
            format_size(b.to),
            b.algo.nccl_name(),
            b.proto.nccl_name(),
            us(b.from_time_us),
            us(b.to_time_us)
        ));
    }
    let crossings: Vec<String> = cal
        .bands
        .windows(2)
        // Bands on both sides of an uncalibrated size do not cross.
        .filter(|w| {
            !cal.uncalibrated_sizes
                .iter()
                .any(|s| *s > w[0].to && *s < w[1].from)
        })
        .map(|w| {
            crossover_line(w[0].algo, w[0].proto, w[1].algo, w[1].proto, w[1].starts_at) + "\n"
        })
        .collect();
    if !crossings.is_empty() {
        out.push_str("Calibrated crossovers (smallest size where the next pick wins):\n");
        for c in crossings {
            out.push_str(&c);
        }
    }
    if !cal.uncalibrated_sizes.is_empty() {
        out.push_str(&format!(
            "Not calibrated (no pair allowed there was measured): {}\n",
            cal.uncalibrated_sizes
                .iter()
                .map(|s| format_size(*s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// The pair planner's expected model rates fastest at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ExpectedPickJson {
    pub(crate) algorithm: &'static str,
    pub(crate) protocol: &'static str,
    pub(crate) expected_time_us: f64,
}

/// One sweep point: NCCL's pick (`model::sweep::Point`), its busbw (nccl-tests' definition) and planner's expected
/// model (null with several ops per group, or where the pair is not modelled).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SweepPointJson<'a> {
    #[serde(flatten)]
    pub(crate) point: &'a crate::model::sweep::Point,
    pub(crate) busbw_gbs: Option<f64>,
    pub(crate) expected_time_us: Option<f64>,
    pub(crate) expected_busbw_gbs: Option<f64>,
    pub(crate) expected_fastest: Option<ExpectedPickJson>,
}

/// `Sweep` as `--json` writes it: its points with busbw and the expected columns.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SweepOutJson<'a> {
    pub(crate) coll: Coll,
    pub(crate) ops: usize,
    pub(crate) points: Vec<SweepPointJson<'a>>,
    pub(crate) bands: &'a [crate::model::sweep::Band],
    pub(crate) skipped: &'a [u64],
}

/// Consecutive sweep sizes where planner's expected model rates the same pair fastest and NCCL picks the same pair.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExpectedBandJson {
    pub(crate) from_bytes: u64,
    pub(crate) to_bytes: u64,
    pub(crate) expected_fastest: String,
    pub(crate) from_time_us: f64,
    pub(crate) to_time_us: f64,
    pub(crate) nccl_pick: String,
    /// NCCL's pick's expected time at the band's ends (null where not modelled).
    pub(crate) nccl_pick_from_time_us: Option<f64>,
    pub(crate) nccl_pick_to_time_us: Option<f64>,
}

/// planner's expected model over a sweep: per size every pair's expectation (`Expected::all`), once.
pub(crate) struct ExpectedSweep {
    /// Per sweep point, in the sweep's order.
    pub(crate) points: Vec<Vec<Expectation>>,
}

impl ExpectedSweep {
    pub(crate) fn new(expected: &crate::expect::Expected, sweep: &Sweep) -> ExpectedSweep {
        ExpectedSweep {
            points: sweep
                .points
                .iter()
                .map(|p| expected.all(sweep.coll, p.size))
                .collect(),
        }
    }

    /// The expected crossover map: bands of the same expected fastest pair and NCCL pick.
    pub(crate) fn bands(&self, sweep: &Sweep) -> Vec<ExpectedBandJson> {
        let mut bands: Vec<ExpectedBandJson> = Vec::new();
        for (p, all) in sweep.points.iter().zip(&self.points) {
            let Some(f) = expected_fastest(all) else {
                continue;
            };
            let fastest = pair_name(f.algo, f.proto);
            let nccl = pair_name(p.algo, p.proto);
            let nccl_time = expected_for(all, p.algo, p.proto).map(|e| e.expected_time_us);
            match bands.last_mut() {
                Some(b) if b.expected_fastest == fastest && b.nccl_pick == nccl => {
                    b.to_bytes = p.size;
                    b.to_time_us = f.expected_time_us;
                    b.nccl_pick_to_time_us = nccl_time;
                }
                _ => bands.push(ExpectedBandJson {
                    from_bytes: p.size,
                    to_bytes: p.size,
                    expected_fastest: fastest,
                    from_time_us: f.expected_time_us,
                    to_time_us: f.expected_time_us,
                    nccl_pick: nccl,
                    nccl_pick_from_time_us: nccl_time,
                    nccl_pick_to_time_us: nccl_time,
                }),
            }
        }
        bands
    }
}

/// `8 KiB` or `8 KiB - 1 MiB`.
fn size_span(from: u64, to: u64) -> String {
    if from == to {
        format_size(from)
    } else {
        format!("{} - {}", format_size(from), format_size(to))
    }
}

/// `a µs` or `a - b µs`.
fn time_span(from: f64, to: f64) -> String {
    if us(from) == us(to) {
        format!("{} µs", us(from))
    } else {
        format!("{} - {} µs", us(from), us(to))
    }
}

/// The expected crossover map of `--sweep`, after NCCL's: which pair planner's expected model rates fastest per
/// size band, beside NCCL's pick there.
pub(crate) fn expected_sweep_text(bands: &[ExpectedBandJson]) -> String {
    let mut out = String::from(
        "Expected crossover map (planner's model of these links: the pair it rates fastest | NCCL's pick, expected):\n",
    );
    if bands.is_empty() {
        out.push_str("  no pair is modelled at these sizes\n");
    }
    for b in bands {
        let sizes = size_span(b.from_bytes, b.to_bytes);
        let nccl = if b.nccl_pick == b.expected_fastest {
            "NCCL's pick too".to_string()
        } else {
            match (b.nccl_pick_from_time_us, b.nccl_pick_to_time_us) {
                (Some(lo), Some(hi)) => format!("NCCL {} {}", b.nccl_pick, time_span(lo, hi)),
                _ => format!("NCCL {} (not modelled)", b.nccl_pick),
            }
        };
        out.push_str(&format!(
            "  {sizes}: {} {} | {nccl}\n",
            b.expected_fastest,
            time_span(b.from_time_us, b.to_time_us)
        ));
    }
    out
}

#[derive(Debug, Clone, Serialize)]
pub struct SweepJson<'a> {
    pub(crate) collective: &'static str,
    pub(crate) ops: usize,
    pub(crate) tuning_table: String,
    pub(crate) sweep: SweepOutJson<'a>,
    /// planner's expected crossover map (absent with several ops per group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expected_crossover: Option<Vec<ExpectedBandJson>>,
    /// With `--calibration`: the calibrated crossover map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) calibrated: Option<&'a CalibratedSweep>,
    /// Per band: NCCL's pick, NCCL's symmetric pick, the fastest of all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) possible: Option<Vec<PossibleBandJson>>,
    /// One rank: NCCL copies instead of running an algorithm (absent with 2+ ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) one_rank_note: Option<&'static str>,
}

/// `sweep_json` with planner's expected model (`expected`, single calls only) and the calibrated crossover map of
/// `--calibration`.
pub(crate) fn sweep_json_calibrated<'a>(
    model: &Model,
    sweep: &'a Sweep,
    calibrated: Option<&'a CalibratedSweep>,
    expected: Option<&ExpectedSweep>,
) -> SweepJson<'a> {
    let factor = sweep.coll.nccl_tests_bus_factor(model.input.n_ranks);
    let points = sweep
        .points
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let bytes = Call::new(sweep.coll, p.size, model.input.n_ranks, sweep.ops)
                .map(|c| c.model_bytes * sweep.ops as u64)
                .ok();
            let busbw_gbs = bytes
                .filter(|_| p.time_us > 0.0)
                .map(|b| b as f64 / (p.time_us as f64 * 1000.0) * factor);
            let all = expected.and_then(|e| e.points.get(k));
            let pick = all.and_then(|all| expected_for(all, p.algo, p.proto));
            SweepPointJson {
                point: p,
                busbw_gbs,
                expected_time_us: pick.map(|e| e.expected_time_us),
                expected_busbw_gbs: pick.map(|e| e.expected_busbw_gbs),
                expected_fastest: all.and_then(|all| expected_fastest(all)).map(|f| {
                    ExpectedPickJson {
                        algorithm: f.algo.nccl_name(),
                        protocol: f.proto.nccl_name(),
                        expected_time_us: f.expected_time_us,
                    }
                }),
            }
        })
        .collect();
    SweepJson {
        collective: sweep.coll.nccl_name(),
        ops: sweep.ops,
        tuning_table: model.table.source.clone(),
        sweep: SweepOutJson {
            coll: sweep.coll,
            ops: sweep.ops,
            points,
            bands: &sweep.bands,
            skipped: &sweep.skipped,
        },
        expected_crossover: expected.map(|e| e.bands(sweep)),
        calibrated,
        possible: None,
        one_rank_note: (model.input.n_ranks == 1).then(|| one_rank_text().trim_end()),
    }
}

/// Predicted time and busbw of every pair that is usable at some size, against size, as an SVG
/// document: one panel per pair, NCCL's pick shaded where it is this pair, and the fastest pair
/// at each size as a grey reference line so panels compare at a glance.
pub(crate) fn plot_svg(
    model: &Model,
    coll: Coll,
    sizes: &[u64],
    ops: usize,
    expected: Option<&crate::expect::Expected>,
) -> Result<String> {
    use crate::plot::{Mark, Panel, Series, COLORS, DARK, GREY};
    // planner's expected model times single calls: with several ops per group its curve is left out.
    let expected = expected.filter(|_| ops == 1);
    let mut expected_per_pair: Vec<Vec<(u64, f64, f64)>> = vec![Vec::new(); Algo::ALL.len() * 3];
    let n_ranks = model.input.n_ranks;
    let bus_factor = coll.nccl_tests_bus_factor(n_ranks);
    // Per pair index: (bytes, time µs, busbw GB/s) where usable; NCCL's pick per size.
    let mut per_pair: Vec<Vec<(u64, f64, f64)>> = vec![Vec::new(); Algo::ALL.len() * 3];
    let mut picks: Vec<Vec<u64>> = vec![Vec::new(); Algo::ALL.len() * 3];
    let mut best: Vec<(u64, f64, f64)> = Vec::new();
    for &size in sizes {
        let Ok(call) = crate::model::select::Call::new(coll, size, n_ranks, ops) else {
            continue;
        };
        let eval = model.evaluate(&call)?;
        let busbw = |t: f64| eval.group_bytes as f64 / (t * 1000.0) * bus_factor;
        for (i, cand) in eval.candidates.iter().enumerate().take(per_pair.len()) {
            if cand.usable() && cand.time_us > 0.0 {
                let t = cand.time_us as f64;
                per_pair[i].push((size, t, busbw(t)));
            }
        }
        if let Some(expected) = expected {
            for e in expected.all(coll, size) {
                let index = eval
                    .candidates
                    .iter()
                    .position(|c| c.algo == e.algo && c.proto == e.proto);
                if let Some(i) = index.filter(|&i| i < expected_per_pair.len()) {
                    if e.expected_time_us > 0.0 {
                        expected_per_pair[i].push((size, e.expected_time_us, e.expected_busbw_gbs));
                    }
                }
            }
        }
        let w = eval.winner();
        if w.usable() && w.time_us > 0.0 {
            picks[eval.winner].push(size);
            let t = w.time_us as f64;
            best.push((size, t, busbw(t)));
        }
    }
    let mut time_panels = Vec::new();
    let mut bw_panels = Vec::new();
    for (i, pts) in per_pair.iter().enumerate() {
        if pts.is_empty() {
            continue;
        }
        let (a, p) = (Algo::ALL[i / 3], Proto::ALL[i % 3]);
        let title = format!("{}/{}", a.nccl_name(), p.nccl_name());
        for (panels, value) in [(&mut time_panels, 1usize), (&mut bw_panels, 2)] {
            let pick = |v: &(u64, f64, f64)| (v.0, if value == 1 { v.1 } else { v.2 });
            let mut series = vec![
                Series::new(GREY, Mark::Reference).with_points(best.iter().map(pick).collect()),
                Series::new(DARK, Mark::Line).with_points(pts.iter().map(pick).collect()),
            ];
            if !expected_per_pair[i].is_empty() {
                series.push(
                    Series::new(COLORS[0], Mark::Dashed)
                        .with_points(expected_per_pair[i].iter().map(pick).collect()),
                );
            }
            panels.push(Panel {
                title: title.clone(),
                series,
                shaded_sizes: picks[i].clone(),
                reference_y: None,
            });
        }
    }
    if time_panels.is_empty() {
        return Err(Error::bad_input(format!(
            "nothing to plot: no usable algorithm/protocol for {} at these sizes",
            coll.nccl_name()
        )));
    }
    let what = format!(
        "{}, {}, {}, NCCL {} model",
        coll.nccl_name(),
        count(n_ranks, "rank"),
        count(model.input.n_nodes, "node"),
        model.table.family
    );
    let mut legend = vec![
        (
            "this pair, NCCL's estimate (its cost model, used for its choice)".to_string(),
            DARK,
            Mark::Line,
        ),
        (
            "fastest pair at each size".to_string(),
            GREY,
            Mark::Reference,
        ),
    ];
    if expected_per_pair.iter().any(|p| !p.is_empty()) {
        legend.push((
            "this pair, expected (planner's model of the links)".to_string(),
            COLORS[0],
            Mark::Dashed,
        ));
    }
    let shaded = Some("NCCL picks this pair".to_string());
    crate::plot::render_time_and_busbw(
        format!("Predicted time per algorithm/protocol ({what})"),
        format!("Predicted busbw (nccl-tests definition, {what})"),
        time_panels,
        bw_panels,
        legend,
        shaded,
    )
}

// ------------------------------------------------ small messages: NCCL's symmetric kernels, planner's own

/// What the symmetric-kernel and beyond-NCCL sections need to know about the
/// machine besides the model: GPU architecture, how GPUs reach each other,
/// NVLink bandwidth, NVLS multicast.
#[derive(Debug, Clone)]
pub struct SmallMessageContext {
    /// NCCL's symmetric-kernel table for the model's family (None: the
    /// family is older than every symmetric table).
    pub(crate) table: Option<SymmetricTable>,
    /// Lowest compute capability of the GPUs (x10; 0 when unknown).
    pub compute_capability: u32,
    pub peers: PeerPath,
    /// Bottleneck GPU-GPU bandwidth when every pair talks over NVLink (GB/s,
    /// NCCL's path bandwidth), else None.
    pub nvlink_bw_gbs: Option<f64>,
    pub n_ranks: usize,
    pub n_nodes: usize,
    /// Machines (trays) the job spans; an MNNVL domain of several trays is one node to NCCL's model.
    pub physical_nodes: usize,
    /// NCCL's `nvlsSupport` as the model has it.
    pub nvls_multicast: bool,
}

/// The newest symmetric table whose family is not newer than `family`.
fn symmetric_table_for(family: &str) -> Option<SymmetricTable> {
    let key = |f: &str| -> (u32, u32) {
        let mut it = f.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let wanted = key(family);
    let name = symmetric::EMBEDDED
        .iter()
        .map(|(f, _)| *f)
        .filter(|f| key(f) <= wanted)
        .max_by_key(|f| key(f))?;
    SymmetricTable::builtin(name).ok()
}

impl SmallMessageContext {
    pub(crate) fn new(model: &Model, cluster: &Cluster) -> SmallMessageContext {
        let topo = &cluster.node;
        let gpus: Vec<_> = topo.gpus().map(|(i, _)| i).collect();
        // The worst path type and the narrowest NVLink path between any two GPUs.
        let mut worst = PathType::Loc;
        let mut narrowest: Option<f64> = None;
        for &a in &gpus {
            for &b in gpus.iter().filter(|b| **b != a) {
                let path = topo.path(a, b);
                worst = worst.max(path.map_or(PathType::Dis, |p| p.ptype));
                if let Some(p) = path {
                    narrowest = Some(narrowest.map_or(p.bw, |n: f64| n.min(p.bw)));
                }
            }
        }
        let peers = if worst <= PathType::Nvl {
            PeerPath::NvLink
        } else if worst <= PathType::Pxb {
            PeerPath::P2p
        } else {
            PeerPath::NoP2p
        };
        SmallMessageContext {
            table: symmetric_table_for(&model.table.family),
            compute_capability: topo.sm_range().0,
            peers,
            nvlink_bw_gbs: narrowest.filter(|_| peers == PeerPath::NvLink && gpus.len() > 1),
            n_ranks: model.input.n_ranks,
            n_nodes: model.input.n_nodes,
            physical_nodes: cluster.n_nodes * crate::topo::mnnvl::host_count(&cluster.node).max(1),
            nvls_multicast: model.input.nvls_state.supported(),
        }
    }

    /// NCCL's symmetric path for a call (f32 sum where the bytes allow it,
    /// both buffers registered); None when there is no table or the GPUs'
    /// architecture is unknown.
    pub(crate) fn symmetric(&self, call: &Call) -> Option<SymmetricChoice> {
        let table = self.table.as_ref()?;
        if self.compute_capability == 0 || call.log_bytes == 0 {
            return None;
        }
        let mut input = SymmetricInput::new(
            call.coll,
            call.log_bytes,
            self.n_ranks,
            self.compute_capability,
        );
        if !call.log_bytes.is_multiple_of(SymDtype::F32.size()) {
            input.dtype = SymDtype::I8;
        }
        input.n_nodes = self.n_nodes;
        input.peers = self.peers;
        input.nvls_multicast = self.nvls_multicast;
        symmetric_candidates(&input, table).ok()
    }

    /// A symmetric kernel's time bounded below by the physical NVLink: its nccl-tests bus bytes cannot cross a GPU's
    /// NVLink faster than the GPU-GPU path allows (NCCL's symmetric model does not know the link). With the bound,
    /// an A100's NVLink (240 GB/s) is never shown carrying more.
    pub(crate) fn symmetric_time_us(&self, call: &Call, model_time_us: f32) -> f64 {
        let t = model_time_us as f64;
        match self.nvlink_bw_gbs.filter(|bw| *bw > 0.0) {
            Some(bw) => {
                let bus_bytes = call.log_bytes as f64 * bus_bytes_factor(call.coll, self.n_ranks);
                t.max(bus_bytes / (bw * 1e3))
            }
            None => t,
        }
    }

    /// nccl-tests busbw of a symmetric kernel at `time_us`.
    fn symmetric_busbw(&self, call: &Call, time_us: f64) -> f64 {
        call.log_bytes as f64 * bus_bytes_factor(call.coll, self.n_ranks) / (time_us * 1e3)
    }

    /// planner's own kernels for a call, fastest first (empty where they do
    /// not run: not an all-reduce, one rank, several nodes, no NVLink).
    pub(crate) fn beyond(&self, call: &Call) -> Vec<beyond::Prediction> {
        match self.nvlink_bw_gbs {
            Some(bw) if self.n_ranks > 1 && self.n_nodes == 1 && self.physical_nodes == 1 => {
                beyond::list(call.coll, call.size, self.n_ranks, bw)
            }
            _ => Vec::new(),
        }
    }

    /// Why the beyond-NCCL kernels do not run here (None when they do).
    fn beyond_unavailable(&self, coll: Coll) -> Option<String> {
        if coll != Coll::AllReduce {
            Some(format!(
                "planner's own kernels are all-reduce only, not {}",
                coll.nccl_name()
            ))
        } else if self.n_ranks < 2 {
            Some("one rank: nothing to exchange".into())
        } else if self.n_nodes > 1 {
            Some("they run within one node (peer memory), not across nodes".into())
        } else if self.physical_nodes > 1 {
            Some(format!(
                "they are modelled within one tray's NVLink (peer memory), not across the {} trays of this NVLink domain",
                self.physical_nodes
            ))
        } else if self.nvlink_bw_gbs.is_none() {
            Some("they need NVLink between every GPU pair".into())
        } else {
            None
        }
    }
}

/// One symmetric kernel in `explain --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SymmetricKernelJson {
    pub(crate) kernel: String,
    pub(crate) needs_multicast: bool,
    pub(crate) eligible: bool,
    /// NCCL's symmetric pick.
    pub(crate) picked: bool,
    pub(crate) blocks: Option<u32>,
    pub(crate) time_us: Option<f64>,
    pub(crate) busbw_gbs: Option<f64>,
    pub(crate) ineligible: Vec<String>,
}

/// The `symmetric` key of `explain --json`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SymmetricJson {
    /// Symmetric-kernel table family (e.g. "2.28").
    pub(crate) family: String,
    pub(crate) compute_capability: u32,
    pub(crate) nvls_multicast: bool,
    /// The kernel NCCL would run with registered windows; null: classic path.
    pub(crate) pick: Option<String>,
    pub(crate) pick_time_us: Option<f64>,
    /// Why NCCL stays on its classic path (empty when it runs `pick`).
    pub(crate) classic_path: Vec<String>,
    /// 2.30: the pick runs only when the classic model picks LL too.
    pub(crate) only_if_classic_picks_ll: bool,
    pub(crate) kernels: Vec<SymmetricKernelJson>,
}

/// One of planner's own kernels in `explain --json` (`beyond_nccl`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct BeyondJson {
    pub(crate) algorithm: &'static str,
    pub(crate) protocol: &'static str,
    pub(crate) latency_us: f64,
    pub(crate) wire_bytes: f64,
    pub(crate) bandwidth_gbs: f64,
    pub(crate) time_us: f64,
    pub(crate) busbw_gbs: f64,
    /// Always false for now: the model's defaults (`model::beyond`), not fitted to measurements.
    pub(crate) fitted_to_measurements: bool,
}

/// NCCL's pick, NCCL's symmetric pick and planner's fastest at one size
/// (`possible` in `explain --json`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PossibleJson {
    pub(crate) size_bytes: u64,
    pub(crate) nccl_pick: String,
    pub(crate) nccl_time_us: f64,
    /// null: NCCL would stay on its classic path even with registered windows.
    pub(crate) symmetric_pick: Option<String>,
    pub(crate) symmetric_time_us: Option<f64>,
    pub(crate) fastest: String,
    /// "nccl", "nccl-symmetric" or "beyond-nccl".
    pub(crate) fastest_kind: &'static str,
    pub(crate) fastest_time_us: f64,
    /// Where the time comes from: "model" (no measurement is read here).
    pub(crate) fastest_source: &'static str,
}

/// One band of `possible` over a sweep: consecutive sizes with the same three picks.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PossibleBandJson {
    pub(crate) from_bytes: u64,
    pub(crate) to_bytes: u64,
    pub(crate) points: Vec<PossibleJson>,
}

fn pair_name(algo: Algo, proto: Proto) -> String {
    format!("{}/{}", algo.nccl_name(), proto.nccl_name())
}

/// The symmetric section's JSON for a call (None: no table or unknown GPU).
pub(crate) fn symmetric_json(ctx: &SmallMessageContext, call: &Call) -> Option<SymmetricJson> {
    let choice = ctx.symmetric(call)?;
    let runs = choice.runs_symmetric();
    Some(SymmetricJson {
        family: choice.family.clone(),
        compute_capability: ctx.compute_capability,
        nvls_multicast: ctx.nvls_multicast,
        pick: runs.map(|k| k.kernel.clone()),
        pick_time_us: runs
            .and_then(|k| k.time_us)
            .map(|t| ctx.symmetric_time_us(call, t)),
        classic_path: choice.classic_path.iter().map(|r| r.to_string()).collect(),
        only_if_classic_picks_ll: choice.only_if_classic_picks_ll,
        kernels: choice
            .candidates
            .iter()
            .map(|c| {
                // On the classic path no symmetric kernel runs on this machine, whatever its own mask says.
                let ineligible: Vec<String> = c
                    .ineligible
                    .iter()
                    .chain(&choice.classic_path)
                    .map(|r| match r {
                        SymReason::NeedsMulticast => multicast_reason(ctx).to_string(),
                        r => r.to_string(),
                    })
                    .collect();
                let time = c.time_us.map(|t| ctx.symmetric_time_us(call, t));
                SymmetricKernelJson {
                    kernel: c.kernel.clone(),
                    needs_multicast: c.needs_multicast,
                    eligible: ineligible.is_empty(),
                    picked: choice.pick.as_deref() == Some(c.kernel.as_str()),
                    blocks: c.blocks,
                    time_us: time,
                    busbw_gbs: time.map(|t| ctx.symmetric_busbw(call, t)),
                    ineligible,
                }
            })
            .collect(),
    })
}

/// Bus bytes per byte of `--size` as nccl-tests counts them (all-gather's size is one rank's share).
fn bus_bytes_factor(coll: Coll, n_ranks: usize) -> f64 {
    let share = if coll == Coll::AllReduce {
        1.0
    } else {
        n_ranks as f64
    };
    share * coll.nccl_tests_bus_factor(n_ranks)
}

/// nccl-tests busbw of an all-reduce of `bytes` on `n` ranks in `time_us`.
fn allreduce_busbw(bytes: u64, n: usize, time_us: f64) -> f64 {
    let n = n as f64;
    bytes as f64 / (time_us * 1e3) * 2.0 * (n - 1.0) / n
}

/// The `beyond_nccl` key of `explain --json`.
pub(crate) fn beyond_json(ctx: &SmallMessageContext, call: &Call) -> Vec<BeyondJson> {
    ctx.beyond(call)
        .iter()
        .map(|p| BeyondJson {
            algorithm: p.pair.algo.name(),
            protocol: p.pair.proto.nccl_name(),
            latency_us: p.latency_us,
            wire_bytes: p.wire_bytes,
            bandwidth_gbs: p.bw_gbs,
            time_us: p.time_us,
            busbw_gbs: allreduce_busbw(call.size, ctx.n_ranks, p.time_us),
            fitted_to_measurements: false,
        })
        .collect()
}

/// NCCL's pick, the symmetric pick and the fastest of everything at one call
/// (single op: NCCL's times are per call).
pub(crate) fn possible(ctx: &SmallMessageContext, eval: &Evaluation) -> PossibleJson {
    let call = &eval.call;
    let w = eval.winner();
    let nccl_time = w.time_us as f64;
    let mut fastest = (pair_name(w.algo, w.proto), "nccl", nccl_time);
    for c in eval.candidates.iter().filter(|c| c.usable()) {
        if (c.time_us as f64) < fastest.2 {
            fastest = (pair_name(c.algo, c.proto), "nccl", c.time_us as f64);
        }
    }
    let choice = ctx.symmetric(call);
    let runs = choice.as_ref().and_then(|c| c.runs_symmetric());
    if let Some(choice) = choice.as_ref().filter(|c| c.classic_path.is_empty()) {
        for k in choice.candidates.iter().filter(|k| k.eligible) {
            let time = k.time_us.map(|t| ctx.symmetric_time_us(call, t));
            if let Some(t) = time.filter(|t| *t < fastest.2) {
                fastest = (k.kernel.clone(), "nccl-symmetric", t);
            }
        }
    }
    if let Some(p) = ctx.beyond(call).first() {
        if p.time_us < fastest.2 {
            fastest = (p.pair.to_string(), "beyond-nccl", p.time_us);
        }
    }
    PossibleJson {
        size_bytes: call.size,
        nccl_pick: pair_name(w.algo, w.proto),
        nccl_time_us: nccl_time,
        symmetric_pick: runs.map(|k| k.kernel.clone()),
        symmetric_time_us: runs
            .and_then(|k| k.time_us)
            .map(|t| ctx.symmetric_time_us(call, t)),
        fastest: fastest.0,
        fastest_kind: fastest.1,
        fastest_time_us: fastest.2,
        fastest_source: "model",
    }
}

/// Consecutive sweep sizes with the same three picks, as bands.
pub(crate) fn possible_bands(points: Vec<PossibleJson>) -> Vec<PossibleBandJson> {
    let mut bands: Vec<PossibleBandJson> = Vec::new();
    for p in points {
        let same = |q: &PossibleJson| {
            q.nccl_pick == p.nccl_pick
                && q.symmetric_pick == p.symmetric_pick
                && q.fastest == p.fastest
        };
        match bands.last_mut() {
            Some(b) if b.points.last().is_some_and(same) => {
                b.to_bytes = p.size_bytes;
                b.points.push(p);
            }
            _ => bands.push(PossibleBandJson {
                from_bytes: p.size_bytes,
                to_bytes: p.size_bytes,
                points: vec![p],
            }),
        }
    }
    bands
}

/// `a µs` or `a-b µs` over the points of a band.
fn time_range(times: impl Iterator<Item = f64>) -> String {
    let (lo, hi) = times.fold((f64::INFINITY, 0.0f64), |(lo, hi), t| {
        (lo.min(t), hi.max(t))
    });
    if lo.is_infinite() {
        String::new()
    } else if us(lo) == us(hi) {
        format!("{} µs", us(lo))
    } else {
        format!("{}-{} µs", us(lo), us(hi))
    }
}

/// One line of the "what is possible" summary.
fn possible_line(band: &PossibleBandJson) -> String {
    let first = &band.points[0];
    let sizes = size_span(band.from_bytes, band.to_bytes);
    let symmetric = match &first.symmetric_pick {
        Some(k) => format!(
            "{k} {}",
            time_range(band.points.iter().filter_map(|p| p.symmetric_time_us))
        ),
        None => "classic path".to_string(),
    };
    let kind = match first.fastest_kind {
        "nccl" => "NCCL's menu",
        "nccl-symmetric" => "NCCL symmetric",
        _ => "beyond NCCL",
    };
    format!(
        "  {sizes}: NCCL {} {} | symmetric {symmetric} | fastest {} {} ({kind}, source: {})\n",
        first.nccl_pick,
        time_range(band.points.iter().map(|p| p.nccl_time_us)),
        first.fastest,
        time_range(band.points.iter().map(|p| p.fastest_time_us)),
        first.fastest_source
    )
}

/// The closing lines of `explain`: per size band, NCCL's pick, NCCL's
/// symmetric pick and planner's fastest.
pub(crate) fn possible_text(bands: &[PossibleBandJson]) -> String {
    let mut out = String::from(
        "What is possible (NCCL's pick | NCCL's symmetric pick with registered windows | fastest of NCCL's menu, symmetric kernels and planner's own):\n",
    );
    for b in bands.iter().filter(|b| !b.points.is_empty()) {
        out.push_str(&possible_line(b));
    }
    out
}

/// Why a multicast kernel cannot run here, the one reason that applies: several nodes, NVLS off, or too few ranks.
fn multicast_reason(ctx: &SmallMessageContext) -> &'static str {
    if ctx.n_nodes > 1 || ctx.physical_nodes > 1 {
        "needs NVLS multicast (within one node)"
    } else if !ctx.nvls_multicast {
        "needs NVLS multicast (off)"
    } else if ctx.n_ranks < 3 {
        "needs NVLS multicast (3+ ranks)"
    } else {
        "needs NVLS multicast (NCCL_NVLS_ENABLE, a multicast NVSwitch, 3+ ranks)"
    }
}

/// The section "NCCL symmetric kernels (needs registered windows)" for one call.
pub(crate) fn symmetric_text(ctx: &SmallMessageContext, call: &Call) -> String {
    let mut out = String::from("NCCL symmetric kernels (needs registered windows):\n");
    let Some(choice) = ctx.symmetric(call) else {
        let why = if ctx.table.is_none() {
            "no symmetric-kernel table for this NCCL family (2.28 is the first modelled)"
        } else {
            "the GPUs' architecture is unknown"
        };
        out.push_str(&format!("  not modelled here: {why}\n"));
        return out;
    };
    out.push_str(&format!(
        "  NCCL {} symmetric model, sm {}, f32 sum, both buffers in windows (ncclCommWindowRegister), NVLS multicast {}\n",
        choice.family,
        ctx.compute_capability,
        if ctx.nvls_multicast { "on" } else { "off" }
    ));
    let mut table = Table::new();
    table
        .load_style(presets::UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(vec![
            "pick",
            "kernel",
            "blocks",
            "time µs",
            "busbw GB/s",
            "note",
        ]);
    for c in &choice.candidates {
        let picked = choice.pick.as_deref() == Some(c.kernel.as_str());
        let note = if picked && choice.classic_path.is_empty() {
            "NCCL's symmetric pick".to_string()
        } else if c.eligible {
            String::new()
        } else if c.needs_multicast && c.ineligible.contains(&SymReason::NeedsMulticast) {
            multicast_reason(ctx).to_string()
        } else {
            c.ineligible
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        };
        // On the classic path no kernel runs: times would mislead.
        let timed = c.eligible && choice.classic_path.is_empty();
        let time = c.time_us.map(|t| ctx.symmetric_time_us(call, t));
        let cells = [
            if picked && choice.classic_path.is_empty() {
                "▶"
            } else {
                ""
            }
            .to_string(),
            c.kernel.clone(),
            c.blocks
                .filter(|_| timed)
                .map(|b| b.to_string())
                .unwrap_or_default(),
            time.filter(|_| timed).map(us).unwrap_or_default(),
            time.filter(|_| timed)
                .map(|t| format!("{:.2}", ctx.symmetric_busbw(call, t)))
                .unwrap_or_default(),
            note,
        ];
        table.add_row(cells.into_iter().enumerate().map(|(k, text)| {
            let cell = Cell::new(text);
            if (2..=4).contains(&k) {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    if !choice.candidates.is_empty() {
        out.push_str(&table.to_string());
        out.push('\n');
    }
    if choice.classic_path.is_empty() {
        if let Some(k) = choice.picked() {
            out.push_str(&format!(
                "NCCL's symmetric pick: {} ({} µs){}; NCCL's standard pick above is unchanged without registered windows.\n",
                k.kernel,
                k.time_us
                    .map(|t| us(ctx.symmetric_time_us(call, t)))
                    .unwrap_or_default(),
                if choice.only_if_classic_picks_ll {
                    ", only when NCCL's classic pick is LL"
                } else {
                    ""
                }
            ));
        }
    } else {
        out.push_str(&format!(
            "classic path: NCCL runs its standard pick even with registered windows ({})\n",
            choice
                .classic_path
                .iter()
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    out
}

/// The section "beyond NCCL (planner's own kernels)" for one call.
pub(crate) fn beyond_text(ctx: &SmallMessageContext, call: &Call) -> String {
    let mut out = String::from("beyond NCCL (planner's own kernels):\n");
    if let Some(why) = ctx.beyond_unavailable(call.coll) {
        out.push_str(&format!("  none here: {why}\n"));
        return out;
    }
    for p in ctx.beyond(call) {
        out.push_str(&format!(
            "  {:<16} {} µs  busbw {:.2} GB/s  (latency {} µs + {} bytes at {:.1} GB/s)\n",
            p.pair.to_string(),
            us(p.time_us),
            allreduce_busbw(call.size, ctx.n_ranks, p.time_us),
            us(p.latency_us),
            p.wire_bytes,
            p.bw_gbs
        ));
    }
    out.push_str(&format!(
        "  model defaults, not fitted to measurements (model::beyond; NVLink {:.1} GB/s from the GPU-GPU path); `planner run --pair OneShot/LL` runs them\n",
        ctx.nvlink_bw_gbs.unwrap_or_default()
    ));
    out
}

/// One crossover of a sweep, NCCL's map or the calibrated one: `  A/P -> B/Q at N bytes (size)`.
fn crossover_line(
    from_algo: crate::model::Algo,
    from_proto: crate::model::Proto,
    to_algo: crate::model::Algo,
    to_proto: crate::model::Proto,
    starts_at: u64,
) -> String {
    format!(
        "  {}/{} -> {}/{} at {} bytes ({})",
        from_algo.nccl_name(),
        from_proto.nccl_name(),
        to_algo.nccl_name(),
        to_proto.nccl_name(),
        starts_at,
        format_size(starts_at)
    )
}
