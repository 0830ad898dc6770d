//! Output of `planner explain`: the ranked table of every algorithm/protocol
//! pair, the masked pairs with their reasons, sweep bands, an SVG plot, and
//! NCCL's own formats (init table, per-call lines) to diff against a log.

use crate::calibrate::{CalibratedCall, CalibratedSweep};
use crate::error::{Error, Result};
use crate::model::schedule::GroupPlan;
use crate::model::select::Evaluation;
use crate::model::sweep::Sweep;
use crate::model::{Algo, Coll, Model, Proto};
use crate::units::format_size;
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
pub struct TableEntryJson {
    pub function: &'static str,
    pub algorithm: &'static str,
    pub protocol: &'static str,
    pub latency_us: f32,
    pub bandwidth_gbps: f32,
    pub max_threads: i64,
    pub thread_threshold: i64,
    pub masked_by: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct NcclTableJson {
    pub tuning_table: String,
    pub ranks: usize,
    pub nodes: usize,
    pub runtime_channels: usize,
    pub nvls_channels: usize,
    /// Every function x algorithm x protocol in NCCL's order.
    pub entries: Vec<TableEntryJson>,
}

pub fn nccl_table_json(model: &Model) -> NcclTableJson {
    let t = &model.tuned;
    let mut entries = Vec::with_capacity(105);
    for c in Coll::ALL {
        for a in Algo::ALL {
            for p in Proto::ALL {
                let (ci, ai, pi) = (c as usize, a as usize, p as usize);
                entries.push(TableEntryJson {
                    function: c.nccl_name(),
                    algorithm: a.nccl_name(),
                    protocol: p.nccl_name(),
                    latency_us: t.latency[ci][ai][pi],
                    bandwidth_gbps: t.bandwidth[ci][ai][pi],
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
pub struct PairJson {
    pub algorithm: &'static str,
    pub protocol: &'static str,
    pub usable: bool,
    pub channels: usize,
    pub threads: usize,
    pub latency_us: f64,
    pub bandwidth_term_us: f64,
    pub time_us: Option<f64>,
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
    pub bus_factor: f64,
    pub margin_us: Option<f64>,
    pub masked_by: Vec<String>,
    /// With `--calibration`: the calibrated time (null where the pair is
    /// masked or was not measured); absent without a calibration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated_time_us: Option<Option<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated_busbw_gbps: Option<Option<f64>>,
}

/// The calibrated pick in `--json` (with `--calibration`).
#[derive(Debug, Clone, Serialize)]
pub struct CalibratedPickJson {
    pub algorithm: &'static str,
    pub protocol: &'static str,
    pub time_us: f64,
}

/// What `--calibration` adds to `explain --json`.
#[derive(Debug, Clone, Serialize)]
pub struct CalibrationJson {
    pub calibration: String,
    /// Whose times it fits: "nccl" or "native".
    pub backend: String,
    pub calibrated_pick: Option<CalibratedPickJson>,
    /// NCCL's pick as the calibration times it (null: not calibrated).
    pub nccl_pick_calibrated_time_us: Option<f64>,
    /// NCCL's pick minus the calibrated pick, calibrated times (>= 0).
    pub margin_us: Option<f64>,
    pub margin_pct: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ExplainJson {
    pub collective: &'static str,
    pub size_bytes: u64,
    /// Bytes NCCL's per-call line shows for one op.
    pub call_bytes: u64,
    /// Bytes NCCL's model costs for the whole group.
    pub model_bytes: u64,
    pub ops: usize,
    pub num_pipe_ops: u64,
    pub tuning_table: String,
    pub ranks: usize,
    pub nodes: usize,
    pub runtime_channels: usize,
    pub winner: PairJson,
    /// Usable pairs fastest first, then masked pairs in NCCL's order.
    pub pairs: Vec<PairJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<CalibrationJson>,
}

/// Calibrated busbw from a calibrated time, with the same bytes and bus
/// factor as NCCL's columns.
fn calibrated_busbw(model: &Model, eval: &Evaluation, index: usize, time_us: f64) -> Option<f64> {
    let c = &eval.candidates[index];
    (time_us > 0.0).then(|| {
        eval.group_bytes as f64 / (time_us * 1000.0) * model.bus_factor(eval.call.coll, c.algo)
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
        p.calibrated_busbw_gbps = Some(t.and_then(|t| calibrated_busbw(model, eval, index, t)));
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
    let factor = model.bus_factor(eval.call.coll, c.algo);
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
        algbw_gbps: algbw,
        busbw_gbps: algbw.map(|b| b * factor),
        bus_factor: factor,
        margin_us: time.map(|t| t - winner_time),
        masked_by: c
            .masks
            .iter()
            .map(|m| m.text(eval.call.coll, c.algo, c.proto))
            .collect(),
        calibrated_time_us: None,
        calibrated_busbw_gbps: None,
    }
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

pub fn explain_json(model: &Model, eval: &Evaluation) -> ExplainJson {
    explain_json_calibrated(model, eval, None)
}

/// `explain_json` with the calibrated columns of `--calibration`.
pub fn explain_json_calibrated(
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
    }
}

fn us(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// The table for people: every usable pair ranked, the winner marked, then
/// one line per masked pair.
pub fn explain_text(model: &Model, eval: &Evaluation) -> String {
    explain_text_calibrated(model, eval, None)
}

/// `x µs (+y%)` of `extra` over `base`.
fn margin_text(extra: f64, base: f64) -> String {
    if base > 0.0 {
        format!("+{} µs (+{:.0}%)", us(extra), 100.0 * extra / base)
    } else {
        format!("+{} µs", us(extra))
    }
}

/// `explain_text` with the calibrated columns of `--calibration`: calibrated
/// time, calibrated busbw, the margin to the calibrated pick; then a line on
/// the calibrated pick against NCCL's.
pub fn explain_text_calibrated(
    model: &Model,
    eval: &Evaluation,
    cal: Option<&CalibratedCall>,
) -> String {
    let call = &eval.call;
    let mut out = String::new();
    let ops = if call.ops > 1 {
        format!(
            " x {} ops (one group, {} per op)",
            call.ops,
            format_size(call.model_bytes)
        )
    } else {
        String::new()
    };
    out.push_str(&format!(
        "{} of {}{ops}: {} ranks on {} node(s), {} channels, NCCL {} model ({})\n",
        call.coll.nccl_name(),
        format_size(call.size),
        model.input.n_ranks,
        model.input.n_nodes,
        model.input.channels,
        model.table.family,
        model.table.source
    ));
    let (usable, masked) = ranked(eval);
    let mut header = vec![
        "",
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
    for &i in &usable {
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
            p.algbw_gbps.map(|b| format!("{b:.2}")).unwrap_or_default(),
            p.busbw_gbps.map(|b| format!("{b:.2}")).unwrap_or_default(),
            margin,
        ];
        if let Some(cal) = cal {
            let t = cal.times_us[i];
            cells.push(t.map(us).unwrap_or_else(|| "-".into()));
            cells.push(
                p.calibrated_busbw_gbps
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
                if (3..=9).contains(&k) || (11..=12).contains(&k) {
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
    out.push_str(&table.to_string());
    out.push('\n');
    let w = eval.winner();
    out.push_str(&format!(
        "NCCL picks {}/{} on {} channels x {} threads: {} µs",
        w.algo.nccl_name(),
        w.proto.nccl_name(),
        w.channels,
        w.threads,
        us(w.time_us as f64)
    ));
    if call.ops > 1 {
        out.push_str(&format!(
            " for the group ({} µs per op, numPipeOps {})",
            us(w.time_us as f64 / call.ops as f64),
            eval.num_pipe_ops
        ));
    }
    out.push_str(". busbw uses each algorithm's own bus factor.\n");
    if let Some(cal) = cal {
        out.push_str(&calibrated_line(eval, cal));
    }
    if !masked.is_empty() {
        out.push_str("Masked:\n");
        for &i in &masked {
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
            out.push_str(&format!(
                "  {:<14} {:<7} {}\n",
                c.algo.nccl_name(),
                c.proto.nccl_name(),
                reasons.join("; ")
            ));
        }
    }
    out
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
    match (cal.pick, cal.pick_us()) {
        (Some(i), Some(t)) if i == eval.winner => {
            out.push_str(&format!("picks {nccl} too, {} µs.\n", us(t)));
        }
        (Some(i), Some(t)) => {
            let c = &eval.candidates[i];
            out.push_str(&format!(
                "picks {}/{}, {} µs; ",
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
    if cal
        .times_us
        .iter()
        .zip(&eval.candidates)
        .any(|(t, c)| c.usable() && t.is_none())
    {
        out.push_str(
            "calibrated -: the pair was not measured, so the calibration has no time for it.\n",
        );
    }
    out
}

/// Bands of a sweep for people.
pub fn sweep_text(model: &Model, sweep: &Sweep) -> String {
    let mut out = format!(
        "{} crossover map{}: {} ranks on {} node(s), NCCL {} model\n",
        sweep.coll.nccl_name(),
        if sweep.ops > 1 {
            format!(" ({} ops per group)", sweep.ops)
        } else {
            String::new()
        },
        model.input.n_ranks,
        model.input.n_nodes,
        model.table.family
    );
    for band in &sweep.bands {
        let channels = if band.min_channels == band.max_channels {
            format!("{} channels", band.min_channels)
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
        .map(|w| {
            format!(
                "  {}/{} -> {}/{} at {} bytes ({})",
                w[0].algo.nccl_name(),
                w[0].proto.nccl_name(),
                w[1].algo.nccl_name(),
                w[1].proto.nccl_name(),
                w[1].starts_at,
                format_size(w[1].starts_at)
            )
        })
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
            "Skipped (too small for {} on {} ranks): {}\n",
            sweep.coll.nccl_name(),
            model.input.n_ranks,
            sweep
                .skipped
                .iter()
                .map(|s| format_size(*s))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    out
}

/// The calibrated crossover map of `--sweep --calibration`, after NCCL's.
pub fn calibrated_sweep_text(cal: &CalibratedSweep) -> String {
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
            format!(
                "  {}/{} -> {}/{} at {} bytes ({})\n",
                w[0].algo.nccl_name(),
                w[0].proto.nccl_name(),
                w[1].algo.nccl_name(),
                w[1].proto.nccl_name(),
                w[1].starts_at,
                format_size(w[1].starts_at)
            )
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

#[derive(Debug, Clone, Serialize)]
pub struct SweepJson<'a> {
    pub collective: &'static str,
    pub ops: usize,
    pub tuning_table: String,
    pub sweep: &'a Sweep,
    /// With `--calibration`: the calibrated crossover map.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibrated: Option<&'a CalibratedSweep>,
}

pub fn sweep_json<'a>(model: &Model, sweep: &'a Sweep) -> SweepJson<'a> {
    sweep_json_calibrated(model, sweep, None)
}

/// `sweep_json` with the calibrated crossover map of `--calibration`.
pub fn sweep_json_calibrated<'a>(
    model: &Model,
    sweep: &'a Sweep,
    calibrated: Option<&'a CalibratedSweep>,
) -> SweepJson<'a> {
    SweepJson {
        collective: sweep.coll.nccl_name(),
        ops: sweep.ops,
        tuning_table: model.table.source.clone(),
        sweep,
        calibrated,
    }
}

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::runtime(format!("cannot draw the plot: {e}"))
}

/// Predicted time of every pair that is usable at some size, against size,
/// log-log, as an SVG document.
pub fn plot_svg(model: &Model, coll: Coll, sizes: &[u64], ops: usize) -> Result<String> {
    use plotters::prelude::*;
    let mut series: Vec<(String, Vec<(u64, f64)>)> = Vec::new();
    for a in Algo::ALL {
        for p in Proto::ALL {
            let mut pts = Vec::new();
            for &size in sizes {
                let Ok(call) =
                    crate::model::select::Call::new(coll, size, model.input.n_ranks, ops)
                else {
                    continue;
                };
                let eval = model.evaluate(&call)?;
                let cand = &eval.candidates[a as usize * 3 + p as usize];
                if cand.usable() && cand.time_us > 0.0 {
                    pts.push((size, cand.time_us as f64));
                }
            }
            if !pts.is_empty() {
                series.push((format!("{}/{}", a.nccl_name(), p.nccl_name()), pts));
            }
        }
    }
    if series.is_empty() {
        return Err(Error::bad_input(format!(
            "nothing to plot: no usable algorithm/protocol for {} at these sizes",
            coll.nccl_name()
        )));
    }
    let x_lo = sizes.iter().copied().min().unwrap_or(1).max(1);
    let x_hi = sizes.iter().copied().max().unwrap_or(2).max(x_lo * 2);
    let ys = series.iter().flat_map(|(_, p)| p.iter().map(|q| q.1));
    let (mut y_lo, mut y_hi) = (f64::MAX, 0.0f64);
    for y in ys {
        y_lo = y_lo.min(y);
        y_hi = y_hi.max(y);
    }
    let y_lo = (y_lo / 1.5).max(1e-3);
    let y_hi = (y_hi * 1.5).max(y_lo * 10.0);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1100, 700)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let caption = format!(
            "{}: predicted time per algorithm/protocol ({} ranks, {} node(s), NCCL {} model)",
            coll.nccl_name(),
            model.input.n_ranks,
            model.input.n_nodes,
            model.table.family
        );
        let mut chart = ChartBuilder::on(&root)
            .caption(caption, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), (y_lo..y_hi).log_scale())
            .map_err(plot_error)?;
        chart
            .configure_mesh()
            .x_desc("size")
            .y_desc("predicted time (µs)")
            .x_label_formatter(&|v| format_size(*v))
            .draw()
            .map_err(plot_error)?;
        for (k, (name, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(k).to_rgba();
            chart
                .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
                .map_err(plot_error)?
                .label(name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(plot_error)?;
        root.present().map_err(plot_error)?;
    }
    Ok(svg)
}
