//! Output of `planner verify`: tables for people, JSON for scripts, CSV rows,
//! and an SVG of measured and predicted time against size per pair.

use super::{right_align, table};
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::measure::{coll_label, RowStatus};
use crate::result_file::VerifyRun;
use crate::units::format_size;
use crate::verify::score::{
    ran_label, BackendSummary, FreeComparison, Scored, ScoredRow, SizeVerdict,
};
use serde::Serialize;

/// Microseconds with sensible precision.
pub(crate) fn format_us(us: f64) -> String {
    if us < 10.0 {
        format!("{us:.2}")
    } else if us < 1000.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.0}")
    }
}

fn opt<T>(v: Option<T>, f: impl Fn(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

fn pct(v: f64) -> String {
    format!("{v:+.1}%")
}

/// One line about the machine and the run.
pub(crate) fn describe_machine(run: &VerifyRun) -> String {
    let m = &run.machine;
    let mut gpu_names: Vec<String> = Vec::new();
    for g in &m.gpus {
        let label = format!("{} (sm {})", g.name, g.compute_capability);
        if !gpu_names.contains(&label) {
            gpu_names.push(label);
        }
    }
    let gpus = if gpu_names.is_empty() {
        crate::units::count(m.world_size, "rank")
    } else {
        format!("{} x {}", m.world_size, gpu_names.join(" + "))
    };
    let mut parts = vec![gpus];
    if let Some(d) = &m.driver_version {
        parts.push(format!("driver {d}"));
    }
    if let Some(c) = &m.cuda_version {
        parts.push(format!("CUDA {c}"));
    }
    if let Some(n) = &m.nccl_version {
        parts.push(format!("NCCL {n}"));
    }
    parts.push(format!(
        "{} process(es) on {}",
        m.processes,
        m.hosts.join(", ")
    ));
    parts.push(format!(
        "topology {}{}",
        m.topology_source,
        if m.topology_hash.is_empty() {
            String::new()
        } else {
            format!(" #{}", m.topology_hash)
        }
    ));
    parts.join(" · ")
}

fn describe_options(run: &VerifyRun) -> String {
    let o = &run.options;
    format!(
        "{} {} · sizes {}..{} ({}) · pairs {} · backends {} · iters {} (loops capped at {}), warmup {}, repeats {}{} · {}",
        coll_label(o.collective),
        o.dtype,
        o.sizes.first().map(|s| format_size(*s)).unwrap_or_default(),
        o.sizes.last().map(|s| format_size(*s)).unwrap_or_default(),
        o.sizes.len(),
        o.pairs,
        o.backends.iter().map(|b| b.name()).collect::<Vec<_>>().join("+"),
        o.plan.iters,
        format_size(o.plan.loop_bytes_cap),
        o.plan.warmup,
        o.plan.repeats,
        if o.graph { " · CUDA graphs" } else { "" },
        o.launch
    )
}

fn measured_cell(r: &ScoredRow) -> String {
    match r.row.status {
        RowStatus::Ok => opt(r.row.median_us, format_us),
        RowStatus::Unavailable => "unavailable".into(),
        RowStatus::Failed => "FAILED".into(),
        RowStatus::Skipped => "skipped".into(),
    }
}

fn marks(r: &ScoredRow, regret: Option<f64>) -> String {
    let mut m = Vec::new();
    if let Some(decision) = &r.row.tuner_decision {
        m.push(format!("plugin {decision}"));
    }
    if let Some(kernel) = &r.model_kernel {
        if ran_label(&r.row).as_ref() == Some(kernel) {
            m.push("model's kernel".into());
        } else {
            m.push(format!("model: {kernel}"));
        }
    }
    if r.model_pick {
        match regret {
            Some(g) if g > 1.0 => m.push(format!("model pick ({} slower)", pct((g - 1.0) * 100.0))),
            _ => m.push("model pick".to_string()),
        }
    }
    if r.measured_best {
        m.push("best".into());
    }
    if r.nccl_pick {
        m.push("NCCL's choice".into());
    }
    m.join(", ")
}

fn hit_rate_cell(s: &BackendSummary) -> String {
    match s.hit_rate {
        Some(h) => format!("{}/{} ({:.0}%)", s.hits, s.sizes_with_best, h * 100.0),
        None => "-".into(),
    }
}

/// The worst regret and its size (the pairs follow the table, `worst_regret_pairs`, to keep it in 120 columns).
fn worst_regret_cell(s: &BackendSummary) -> String {
    match (s.worst_regret, s.worst_regret_bytes) {
        (Some(g), Some(b)) if g > 1.0 => {
            format!("{} at {}", pct((g - 1.0) * 100.0), format_size(b))
        }
        (Some(_), _) => "none".into(),
        _ => "-".into(),
    }
}

/// "native worst regret at 1 MiB: the model picked Ring/LL, the best was Ring/LL128", or None without a regret.
fn worst_regret_pairs(s: &BackendSummary, whose: &str) -> Option<String> {
    match (
        s.worst_regret,
        s.worst_regret_bytes,
        s.worst_regret_pick,
        s.worst_regret_best,
    ) {
        (Some(g), Some(b), Some(p), Some(best)) if g > 1.0 => Some(format!(
            "{} worst regret at {}: {whose} picked {p}, the best was {best}",
            s.backend,
            format_size(b)
        )),
        _ => None,
    }
}

/// The row's label in the table: the pair, or for a free-choice row what
/// NCCL ran (`auto = Ring/LL [0..7]`, `symm = AllReduce_AGxLL_R [1 ch]`).
fn row_label(r: &ScoredRow) -> String {
    let row = &r.row;
    if row.pair.is_some() {
        return r.label.clone();
    }
    match (&row.symmetric, row.nccl_choice) {
        (Some(launch), _) => format!("{} = {} [{} ch]", r.label, launch.kernel, launch.channels),
        (None, Some(c)) => format!(
            "{} = {} [{}..{}]",
            r.label,
            ran_label(row).unwrap_or_else(|| c.pair.to_string()),
            c.channel_lo,
            c.channel_hi
        ),
        (None, None) => r.label.clone(),
    }
}

/// `tuned` or `symm` against `auto`, size by size.
fn render_comparison(c: &FreeComparison) -> String {
    let what = match c.label.as_str() {
        "tuned" => "NCCL steered by the tuner plugin against NCCL alone",
        _ => "NCCL on symmetric windows against NCCL's default",
    };
    let other_ran = format!("{} ran", c.label);
    let other_us = format!("{} µs", c.label);
    let ratio = format!("{} / auto", c.label);
    let mut t = table(vec![
        "size", "auto ran", "auto µs", &other_ran, &other_us, &ratio,
    ]);
    right_align(&mut t, &[0, 2, 4, 5]);
    for size in &c.sizes {
        t.add_row(vec![
            format_size(size.bytes),
            size.auto_ran.clone().unwrap_or_else(|| "-".into()),
            format_us(size.auto_us),
            size.other_ran.clone().unwrap_or_else(|| "-".into()),
            format_us(size.other_us),
            format!("{:.3}", size.ratio),
        ]);
    }
    let r3 = |v: Option<f64>| opt(v, |x| format!("{x:.3}"));
    let at = |ratio: Option<f64>, bytes: Option<u64>| match (ratio, bytes) {
        (Some(r), Some(b)) => format!("{r:.3} at {}", format_size(b)),
        _ => "-".into(),
    };
    format!(
        "\n{} / auto: {what} (below 1: {} is faster)\n{t}\ngeomean {} over {} sizes · 1-16 MiB {} over {} sizes · worst {} · best {}\n",
        c.label,
        c.label,
        r3(c.geomean_ratio),
        c.sizes.len(),
        r3(c.geomean_ratio_1_16mib),
        c.sizes_1_16mib,
        at(c.worst_ratio, c.worst_bytes),
        at(c.best_ratio, c.best_bytes),
    )
}

/// The full text report; with `stock` (the same run scored by the stock
/// model, `verify --load --calibration`) its predictions, errors and picks
/// stand in extra columns next to `scored`'s.
pub(crate) fn render_text_compared(
    run: &VerifyRun,
    scored: &Scored,
    stock: Option<&Scored>,
) -> String {
    let mut out = String::new();
    compared_header(&mut out, run, scored, stock);
    let mut notes: Vec<String> = Vec::new();
    backend_tables(&mut out, scored, stock, &mut notes);
    regime_table(&mut out, scored, stock);
    picks_table(&mut out, scored, stock);
    for c in &scored.comparisons {
        out.push_str(&render_comparison(c));
    }

    ratios_table(&mut out, scored);
    if !notes.is_empty() {
        notes.dedup();
        out.push_str("\nnotes\n");
        for n in notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}

/// The machine, the options, the predictors and the tuner plugin the run used.
fn compared_header(out: &mut String, run: &VerifyRun, scored: &Scored, stock: Option<&Scored>) {
    out.push_str(&format!(
        "{}\n{}\npredictions: {}\n",
        describe_machine(run),
        describe_options(run),
        scored.predictor
    ));
    if let Some(stock) = stock {
        out.push_str(&format!("compared with: {}\n", stock.predictor));
    }
    if let Some(label) = &scored.symmetric_predictor {
        out.push_str(&format!("symm predictions: {label}\n"));
    }
    if let Some(tuner) = &run.options.tuner {
        out.push_str(&format!(
            "tuner plugin: {} with plan {} #{}\n",
            tuner.plugin_path, tuner.plan_path, tuner.plan_hash
        ));
        for line in &tuner.plugin_log {
            out.push_str(&format!("  {line}\n"));
        }
    }
}

/// One table per backend: every row, with the stock model's columns when compared; rows' failure notes into `notes`.
fn backend_tables(
    out: &mut String,
    scored: &Scored,
    stock: Option<&Scored>,
    notes: &mut Vec<String>,
) {
    let mut backends: Vec<Backend> = scored.rows.iter().map(|r| r.row.backend).collect();
    backends.sort();
    backends.dedup();
    // Looked up per row: a map, not a scan of every size per row (issue 28 class 3: 178,000 rows of distinct
    // sizes took 140 s).
    let verdicts: std::collections::HashMap<(Backend, u64), &SizeVerdict> = scored
        .sizes
        .iter()
        .rev()
        .map(|v| ((v.backend, v.bytes), v))
        .collect();
    // (backend, row label, note) already in `notes`.
    let mut noted: std::collections::HashSet<(Backend, String, String)> =
        std::collections::HashSet::new();
    for backend in &backends {
        let mut header = vec![
            "size",
            "pair",
            "predicted µs",
            "measured µs",
            "max µs",
            "error",
            "algbw GB/s",
            "busbw GB/s",
            "#wrong",
            "marks",
        ];
        if stock.is_some() {
            header.extend(["stock µs", "stock error"]);
        }
        let mut t = table(header);
        right_align(&mut t, &[0, 2, 3, 4, 5, 6, 7, 8]);
        if stock.is_some() {
            right_align(&mut t, &[10, 11]);
        }
        // Indices into `scored.rows` (and the rows of `stock`, scored from the same run).
        let mut rows: Vec<(usize, &ScoredRow)> = scored
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.row.backend == *backend)
            .collect();
        rows.sort_by_key(|(_, r)| (r.row.bytes, r.row.pair.is_none(), r.row.pair, r.row.tuned));
        for (index, r) in rows {
            let verdict = verdicts.get(&(*backend, r.row.bytes)).copied();
            let label = row_label(r);
            if let Some(note) = &r.row.note {
                if r.row.status != RowStatus::Ok {
                    let n = format!("{} {}: {note}", backend, r.label);
                    if noted.insert((*backend, r.label.clone(), note.clone())) {
                        notes.push(n);
                    }
                }
            }
            let mut cells = vec![
                format_size(r.row.bytes),
                label,
                opt(r.predicted_us, format_us),
                measured_cell(r),
                if r.row.status == RowStatus::Ok {
                    opt(r.row.max_us, format_us)
                } else {
                    String::new()
                },
                opt(r.error_pct, pct),
                opt(r.algbw_gbs, |v| format!("{v:.2}")),
                opt(r.busbw_gbs, |v| format!("{v:.2}")),
                opt(r.row.wrong, |w| w.to_string()),
                marks(r, verdict.and_then(|v| v.regret)),
            ];
            if let Some(stock) = stock {
                let s = stock.rows.get(index);
                cells.push(opt(s.and_then(|s| s.predicted_us), format_us));
                cells.push(opt(s.and_then(|s| s.error_pct), pct));
            }
            t.add_row(cells);
        }
        out.push_str(&format!("\n{} backend\n{t}\n", backend));
    }
}

/// Error per regime.
fn regime_table(out: &mut String, scored: &Scored, stock: Option<&Scored>) {
    let mut header = vec![
        "backend",
        "size regime",
        "rows",
        "median |error|",
        "worst |error|",
        "worst at",
    ];
    if stock.is_some() {
        header.extend(["stock median |error|", "stock worst |error|"]);
    }
    let mut t = table(header);
    right_align(&mut t, &[2, 3, 4]);
    if stock.is_some() {
        right_align(&mut t, &[6, 7]);
    }
    for s in &scored.summaries {
        for g in &s.regimes {
            let mut cells = vec![
                s.backend.to_string(),
                g.label.to_string(),
                g.rows.to_string(),
                opt(g.median_abs_error_pct, |v| format!("{v:.1}%")),
                opt(g.worst_abs_error_pct, |v| format!("{v:.1}%")),
                match (g.worst_pair, g.worst_bytes) {
                    (Some(p), Some(b)) => format!("{p} {}", format_size(b)),
                    // the `symm` row has no pair
                    (None, Some(b)) => format!("symm {}", format_size(b)),
                    _ => "-".into(),
                },
            ];
            if let Some(stock) = stock {
                let sg = stock
                    .summaries
                    .iter()
                    .find(|x| x.backend == s.backend)
                    .and_then(|x| x.regimes.iter().find(|r| r.regime == g.regime));
                cells.push(opt(sg.and_then(|r| r.median_abs_error_pct), |v| {
                    format!("{v:.1}%")
                }));
                cells.push(opt(sg.and_then(|r| r.worst_abs_error_pct), |v| {
                    format!("{v:.1}%")
                }));
            }
            t.add_row(cells);
        }
    }
    out.push_str(&format!(
        "\nprediction error (predicted vs measured median)\n{t}\n"
    ));
}

/// Picks: how often the model's and NCCL's picks were the measured best, and the worst regrets.
fn picks_table(out: &mut String, scored: &Scored, stock: Option<&Scored>) {
    let header = vec![
        "backend",
        "pick = best",
        "worst regret",
        "NCCL = best",
        "NCCL worst",
        "pick = NCCL",
        "ok/n.a./failed",
        "#wrong",
    ];
    let mut regret_lines = Vec::new();
    let mut t = table(header);
    for s in &scored.summaries {
        let cells = vec![
            s.backend.to_string(),
            hit_rate_cell(s),
            worst_regret_cell(s),
            if s.nccl_sizes > 0 {
                format!("{}/{}", s.nccl_hits, s.nccl_sizes)
            } else {
                "-".into()
            },
            opt(s.nccl_worst_regret, |g| {
                if g > 1.0 {
                    pct((g - 1.0) * 100.0)
                } else {
                    "none".into()
                }
            }),
            if s.nccl_sizes > 0 {
                s.agrees_with_nccl.to_string()
            } else {
                "-".into()
            },
            format!("{}/{}/{}", s.rows_ok, s.rows_unavailable, s.rows_failed),
            s.wrong.to_string(),
        ];
        regret_lines.extend(worst_regret_pairs(s, "the model"));
        t.add_row(cells);
        // The stock model's picks on a row of their own (columns would pass 120).
        if let Some(ss) = stock.and_then(|st| st.summaries.iter().find(|x| x.backend == s.backend))
        {
            let mut row = vec![
                format!("{} stock", s.backend),
                hit_rate_cell(ss),
                worst_regret_cell(ss),
            ];
            row.extend(std::iter::repeat_n("-".to_string(), 5));
            t.add_row(row);
            regret_lines
                .extend(worst_regret_pairs(ss, "the stock model").map(|l| format!("stock: {l}")));
        }
    }
    out.push_str(&format!(
        "\npicks: pick = the model's pick was the measured best; NCCL = NCCL's own choice; regret = measured time of the pick / measured best - 1; n.a. = unavailable\n{t}\n"
    ));
    for line in regret_lines {
        out.push_str(&format!("  {line}\n"));
    }
}

/// Native / NCCL time per pair, when both ran.
fn ratios_table(out: &mut String, scored: &Scored) {
    if !scored.ratios.is_empty() {
        let mut t = table(vec![
            "pair",
            "sizes",
            "median",
            "min",
            "max",
            "< 64 KiB",
            "64 KiB - 16 MiB",
            "> 16 MiB",
        ]);
        right_align(&mut t, &[1, 2, 3, 4, 5, 6, 7]);
        let r2 = |v: Option<f64>| opt(v, |x| format!("{x:.2}"));
        for r in &scored.ratios {
            t.add_row(vec![
                r.pair.to_string(),
                r.sizes.to_string(),
                r2(r.median),
                r2(r.min),
                r2(r.max),
                r2(r.by_regime.first().and_then(|x| x.1)),
                r2(r.by_regime.get(1).and_then(|x| x.1)),
                r2(r.by_regime.get(2).and_then(|x| x.1)),
            ]);
        }
        out.push_str(&format!(
            "\nnative / NCCL time per pair (below 1: ours is faster)\n{t}\n"
        ));
    }
}

/// What `--json` prints.
#[derive(Serialize)]
pub(crate) struct JsonReport<'a> {
    pub(crate) machine: &'a crate::result_file::Fingerprint,
    pub(crate) options: &'a crate::result_file::RunOptions,
    /// Only for an incomplete result file: `false`, and why it stopped when known.
    #[serde(skip_serializing_if = "is_true")]
    pub(crate) complete: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stopped: Option<&'a crate::result_file::Stopped>,
    #[serde(flatten)]
    pub(crate) scored: &'a Scored,
    /// `verify --load --calibration`: the stock model on the same rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) stock: Option<StockJson<'a>>,
}

fn is_true(value: &bool) -> bool {
    *value
}

/// The stock model's scoring next to a calibrated one.
#[derive(Serialize)]
pub(crate) struct StockJson<'a> {
    pub(crate) predictor: &'a str,
    pub(crate) summaries: &'a [BackendSummary],
    /// Per row, in the order of `rows`.
    pub(crate) rows: Vec<StockRowJson>,
}

#[derive(Serialize)]
pub(crate) struct StockRowJson {
    pub(crate) predicted_us: Option<f64>,
    pub(crate) error_pct: Option<f64>,
    pub(crate) model_pick: bool,
}

/// `render_json` with the stock model's scoring of the same run (`stock`).
pub(crate) fn render_json_compared(
    run: &VerifyRun,
    scored: &Scored,
    stock: Option<&Scored>,
) -> Result<String> {
    super::json::render(
        &JsonReport {
            machine: &run.machine,
            options: &run.options,
            complete: run.complete,
            stopped: run.stopped.as_ref(),
            scored,
            stock: stock.map(|s| StockJson {
                predictor: &s.predictor,
                summaries: &s.summaries,
                rows: s
                    .rows
                    .iter()
                    .map(|r| StockRowJson {
                        predicted_us: r.predicted_us,
                        error_pct: r.error_pct,
                        model_pick: r.model_pick,
                    })
                    .collect(),
            }),
        },
        "",
    )
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// One line per row.
pub(crate) fn render_csv(scored: &Scored) -> String {
    let mut out = String::from(
        "backend,pair,bytes,status,iters,repeats,median_us,max_us,p99_us,predicted_us,error_pct,algbw_gbs,busbw_gbs,wrong,model_pick,measured_best,nccl_pick,nccl_choice,note\n",
    );
    let num = |v: Option<f64>| v.map(|x| format!("{x}")).unwrap_or_default();
    for r in &scored.rows {
        let status = match r.row.status {
            RowStatus::Ok => "ok",
            RowStatus::Unavailable => "unavailable",
            RowStatus::Failed => "failed",
            RowStatus::Skipped => "skipped",
        };
        let fields = [
            r.row.backend.to_string(),
            r.label.clone(),
            r.row.bytes.to_string(),
            status.to_string(),
            r.row.iters.to_string(),
            r.row.repeats.to_string(),
            num(r.row.median_us),
            num(r.row.max_us),
            num(r.row.p99_us),
            num(r.predicted_us),
            num(r.error_pct),
            num(r.algbw_gbs),
            num(r.busbw_gbs),
            r.row.wrong.map(|w| w.to_string()).unwrap_or_default(),
            r.model_pick.to_string(),
            r.measured_best.to_string(),
            r.nccl_pick.to_string(),
            ran_label(&r.row).unwrap_or_default(),
            r.row.note.clone().unwrap_or_default(),
        ];
        let line: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
        out.push_str(&line.join(","));
        out.push('\n');
    }
    out
}

/// Measured (solid, a colour per backend) and predicted (dashed) time and busbw against size:
/// one panel per pair and one for NCCL's free choice, shaded where NCCL's free choice ran the
/// panel's pair.
pub(crate) fn render_svg(run: &VerifyRun, scored: &Scored) -> Result<String> {
    use crate::plot::{Mark, Panel, Series, COLORS, DARK};
    let coll = run.options.collective;
    let factor = coll.nccl_tests_bus_factor(scored.world_size);
    let busbw = |bytes: u64, t: f64| crate::measure::algbw_gbs(bytes, t) * factor;
    // Panels: every pinned pair in order, then NCCL's free choice.
    let mut keys: Vec<Option<crate::model::Pair>> =
        scored.rows.iter().map(|r| r.row.pair).collect();
    keys.sort_by_key(|p| (p.is_none(), *p));
    keys.dedup();
    // One series per backend (and per free-choice label: auto, tuned, symm).
    let series_key = |r: &ScoredRow| -> (String, usize) {
        if r.row.tuned {
            ("NCCL + planner tuner".to_string(), 4)
        } else {
            match r.row.backend {
                Backend::Native => ("planner kernels".to_string(), 0),
                Backend::Nccl => ("NCCL".to_string(), 1),
                Backend::NcclSymm => ("NCCL symmetric".to_string(), 2),
            }
        }
    };
    let mut legend: Vec<(String, plotters::style::RGBColor, Mark)> = Vec::new();
    let mut time_panels = Vec::new();
    let mut bw_panels = Vec::new();
    for key in &keys {
        let mine: Vec<&ScoredRow> = scored.rows.iter().filter(|r| r.row.pair == *key).collect();
        let mut names: Vec<(String, usize)> = mine.iter().map(|r| series_key(r)).collect();
        names.sort_by_key(|n| n.1);
        names.dedup();
        let mut time_series = Vec::new();
        let mut bw_series = Vec::new();
        for (name, color) in &names {
            let rows: Vec<&&ScoredRow> = mine
                .iter()
                .filter(|r| series_key(r).0 == *name && r.row.status == RowStatus::Ok)
                .collect();
            let mark = if *color == 0 {
                Mark::LinePoints
            } else {
                Mark::Line
            };
            let times = rows
                .iter()
                .filter_map(|r| Some((r.row.bytes, r.row.median_us?)))
                .collect();
            let bws = rows
                .iter()
                .filter_map(|r| Some((r.row.bytes, r.busbw_gbs?)))
                .collect();
            time_series.push(Series::new(COLORS[*color], mark).with_points(times));
            bw_series.push(Series::new(COLORS[*color], mark).with_points(bws));
            let entry = (format!("{name} (measured)"), COLORS[*color], mark);
            if !legend.contains(&entry) {
                legend.push(entry);
            }
        }
        let mut predicted: Vec<(u64, f64)> = mine
            .iter()
            .filter_map(|r| Some((r.row.bytes, r.predicted_us?)))
            .collect();
        predicted.sort_by_key(|p| p.0);
        predicted.dedup_by_key(|p| p.0);
        if !predicted.is_empty() {
            let bws = predicted.iter().map(|&(b, t)| (b, busbw(b, t))).collect();
            time_series.push(Series::new(DARK, Mark::Dashed).with_points(predicted));
            bw_series.push(Series::new(DARK, Mark::Dashed).with_points(bws));
        }
        let shaded: Vec<u64> = mine
            .iter()
            .filter(|r| r.nccl_pick)
            .map(|r| r.row.bytes)
            .collect();
        let title = match key {
            Some(p) => p.to_string(),
            None => "NCCL's free choice".to_string(),
        };
        time_panels.push(Panel {
            title: title.clone(),
            series: time_series,
            shaded_sizes: shaded.clone(),
            reference_y: None,
        });
        bw_panels.push(Panel {
            title,
            series: bw_series,
            shaded_sizes: shaded,
            reference_y: None,
        });
    }
    if time_panels.is_empty() {
        return Err(Error::bad_input(
            "--plot: the result file has no rows to plot",
        ));
    }
    legend.push(("model's prediction".to_string(), DARK, Mark::Dashed));
    let what = format!(
        "{} {}, {}",
        coll.nccl_name(),
        run.options.dtype,
        crate::units::count(scored.world_size, "rank")
    );
    let shaded = Some("NCCL's free choice ran this pair".to_string());
    crate::plot::render_time_and_busbw(
        format!("Time per call, measured and predicted ({what})"),
        format!("busbw, nccl-tests definition ({what})"),
        time_panels,
        bw_panels,
        legend,
        shaded,
    )
}
