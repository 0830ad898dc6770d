//! `planner doctor` for people: the GPUs' health, each link figure beside its expectation, the NCCL sweep, and
//! the verdict with the causes first. Peer tests are summarised per test (count, lowest, median, highest) and
//! every pair that is not ok gets a row of its own; `--json` has them all.

use super::{right_align, table};
use crate::doctor::judge::FigureStatus;
use crate::doctor::{DoctorRun, LinkResult, TestKind, TestStatus};
use crate::error::Result;
use crate::probe::health::GpuHealth;
use crate::units::format_size;
use comfy_table::Table;

const NOT_REPORTED: &str = "not reported";

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|v| v.to_string())
        .unwrap_or_else(|| NOT_REPORTED.into())
}

fn gen_width(gen: Option<u32>, width: Option<u32>) -> String {
    match (gen, width) {
        (None, None) => NOT_REPORTED.into(),
        (g, w) => format!(
            "Gen{} x{}",
            g.map(|g| g.to_string()).unwrap_or_else(|| "?".into()),
            w.map(|w| w.to_string()).unwrap_or_else(|| "?".into())
        ),
    }
}

/// One line about the machine and the run.
pub fn describe(run: &DoctorRun) -> String {
    let m = &run.machine;
    let mut names: Vec<String> = Vec::new();
    for g in &m.gpus {
        if !names.contains(&g.name) {
            names.push(g.name.clone());
        }
    }
    let mut parts = vec![
        format!("host {}", m.hosts.join(", ")),
        format!(
            "{}: {}",
            crate::units::count(m.gpus.len(), "GPU"),
            names.join(", ")
        ),
        format!(
            "driver {}",
            m.driver_version.as_deref().unwrap_or(NOT_REPORTED)
        ),
    ];
    if let Some(c) = m.cuda_driver_version {
        parts.push(format!("CUDA {}.{}", c / 1000, c % 1000 / 10));
    }
    if let Some(n) = &m.nccl_version {
        parts.push(format!("NCCL {n}"));
    }
    parts.push(run.created_utc.clone());
    parts.push(format!("backend {}", m.backend));
    format!("planner doctor · {}", parts.join(" · "))
}

fn health_table(gpus: &[GpuHealth]) -> String {
    let mut t = table(vec![
        "GPU",
        "name",
        "PCIe now",
        "PCIe max",
        "PCIe replays",
        "NVLinks up",
        "NVLink errors",
        "throttle",
        "SM MHz",
        "ECC uncorrected",
        "processes",
    ]);
    for g in gpus {
        let (gen, width) = g.pcie.trained();
        let now = format!(
            "{}{}",
            gen_width(gen, width),
            if g.pcie.under_load_gen.is_some() {
                " (load)"
            } else {
                " (idle)"
            }
        );
        let up = g.nvlinks.iter().filter(|l| l.active == Some(true)).count();
        let links = if g.nvlinks.is_empty() {
            "none reported".to_string()
        } else {
            format!("{up} of {}", g.nvlinks.len())
        };
        let reported: Vec<u64> = g
            .nvlinks
            .iter()
            .flat_map(|l| l.errors.reported())
            .map(|(_, v)| v)
            .collect();
        let errors = if g.nvlinks.is_empty() || reported.is_empty() {
            NOT_REPORTED.to_string()
        } else {
            reported.iter().sum::<u64>().to_string()
        };
        let throttle = match &g.throttle {
            None => NOT_REPORTED.to_string(),
            Some(r) if r.is_empty() => "none".into(),
            Some(r) => r.iter().map(|r| r.label()).collect::<Vec<_>>().join(", "),
        };
        let clock = match (g.sm_clock_mhz, g.sm_clock_max_mhz) {
            (Some(c), Some(m)) => format!("{c} / {m}"),
            _ => NOT_REPORTED.into(),
        };
        t.add_row(vec![
            g.index.to_string(),
            g.name.clone(),
            now,
            gen_width(g.pcie.max_gen, g.pcie.max_width),
            opt(g.pcie.replay_count),
            links,
            errors,
            throttle,
            clock,
            opt(g.ecc.volatile_uncorrected),
            opt(g.compute_processes),
        ]);
    }
    right_align(&mut t, &[0, 4, 6, 9, 10]);
    t.to_string()
}

fn gbs(v: Option<f64>) -> String {
    v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into())
}

fn status_of(r: &LinkResult) -> String {
    match r.status {
        TestStatus::Ok => r
            .figure
            .as_ref()
            .map(|f| f.status.label().to_string())
            .unwrap_or_else(|| "-".into()),
        TestStatus::Refused => "P2P refused".into(),
        TestStatus::Failed => "failed".into(),
        TestStatus::Hung => "hung".into(),
        TestStatus::NotRun => "not run".into(),
    }
}

fn pct(r: &LinkResult) -> String {
    match r.figure.as_ref().map(|f| (f.measured_gbs, f.expected_gbs)) {
        Some((Some(m), Some(e))) if e > 0.0 => format!("{:.0} %", 100.0 * m / e),
        _ => "-".into(),
    }
}

fn link_row(t: &mut Table, r: &LinkResult, name: &str, route: String) {
    let f = r.figure.as_ref();
    t.add_row(vec![
        name.to_string(),
        route,
        gbs(f.and_then(|f| f.measured_gbs)),
        gbs(f.and_then(|f| f.expected_gbs)),
        pct(r),
        status_of(r),
        f.map(|f| f.expected_from.clone()).unwrap_or_default(),
    ]);
}

fn links_table(run: &DoctorRun) -> String {
    let mut t = table(vec![
        "test",
        "route",
        "measured GB/s",
        "expected GB/s",
        "of expected",
        "status",
        "expected from",
    ]);
    for r in run.links.iter().filter(|r| !r.test.test.is_peer()) {
        link_row(&mut t, r, r.test.test.name(), r.test.route());
    }
    for kind in TestKind::PEER {
        let of_kind: Vec<&LinkResult> = run.links.iter().filter(|r| r.test.test == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        let mut measured: Vec<f64> = of_kind
            .iter()
            .filter_map(|r| r.figure.as_ref().and_then(|f| f.measured_gbs))
            .collect();
        measured.sort_by(f64::total_cmp);
        let ok = of_kind
            .iter()
            .filter(|r| r.figure.as_ref().map(|f| f.status) == Some(FigureStatus::Ok))
            .count();
        let mut expected: Vec<f64> = of_kind
            .iter()
            .filter_map(|r| r.figure.as_ref().and_then(|f| f.expected_gbs))
            .collect();
        expected.sort_by(f64::total_cmp);
        expected.dedup_by(|a, b| (*a - *b).abs() < 0.05);
        let range = |v: &[f64]| match v {
            [] => "-".to_string(),
            [one] => format!("{one:.1}"),
            [lo, .., hi] => format!("{lo:.1}..{hi:.1}"),
        };
        let median = crate::measure::median(&measured)
            .map(|m| format!(" (median {m:.1})"))
            .unwrap_or_default();
        t.add_row(vec![
            kind.name().to_string(),
            crate::units::count(of_kind.len(), "pair"),
            format!("{}{median}", range(&measured)),
            range(&expected),
            "-".into(),
            format!("{ok} of {} ok", of_kind.len()),
            of_kind
                .iter()
                .find_map(|r| r.figure.as_ref().map(|f| f.expected_from.clone()))
                .unwrap_or_default(),
        ]);
        for r in of_kind {
            let fine = r.status == TestStatus::Ok
                && r.figure.as_ref().map(|f| f.status) == Some(FigureStatus::Ok);
            if !fine {
                link_row(&mut t, r, "  (pair)", r.test.route());
            }
        }
    }
    right_align(&mut t, &[2, 3, 4]);
    t.to_string()
}

fn nccl_table(run: &DoctorRun) -> String {
    let mut t = table(vec![
        "size",
        "time µs (median)",
        "busbw GB/s",
        "expected GB/s",
        "status",
        "NCCL's pick",
        "expected from",
    ]);
    let ranks = run.machine.nccl_ranks;
    for p in &run.nccl {
        let f = p.figure.as_ref();
        let status = if p.status == "ok" {
            f.map(|f| f.status.label().to_string()).unwrap_or_default()
        } else {
            let note = p.note.as_deref().unwrap_or("");
            format!("{} {note}", p.status).trim().to_string()
        };
        t.add_row(vec![
            format_size(p.bytes),
            crate::measure::median(&p.times_us)
                .map(|v| format!("{v:.1}"))
                .unwrap_or_else(|| "-".into()),
            gbs(p.busbw_gbs(ranks).filter(|_| p.status == "ok" && ranks > 1)),
            gbs(f.and_then(|f| f.expected_gbs)),
            status,
            p.nccl_choice.clone().unwrap_or_else(|| "-".into()),
            f.map(|f| f.expected_from.clone()).unwrap_or_default(),
        ]);
    }
    right_align(&mut t, &[0, 1, 2, 3]);
    t.to_string()
}

/// The whole report.
pub fn render_text(run: &DoctorRun) -> String {
    let mut out = String::new();
    out.push_str(&describe(run));
    out.push_str("\n\nGPU health (NVML)\n");
    out.push_str(&health_table(&run.machine.gpus));
    out.push('\n');
    if !run.links.is_empty() {
        out.push_str(&format!(
            "\nLink tests ({} per copy, median of {} repeats, GB/s per direction; bidirectional: the slower direction)\n",
            format_size(run.options.bytes),
            run.options.repeats
        ));
        out.push_str(&links_table(run));
        out.push('\n');
    }
    if !run.nccl.is_empty() {
        out.push_str(&format!(
            "\nNCCL all-reduce, NCCL's own choice ({} ranks, {})\n",
            run.machine.nccl_ranks, run.machine.launch
        ));
        out.push_str(&nccl_table(run));
        out.push('\n');
    }
    if let Some(v) = &run.verdict {
        out.push_str(&format!(
            "\nVerdict: {} ({} figures ok, {} slow, {} suspiciously fast)\n",
            v.summary, v.figures_ok, v.figures_slow, v.figures_fast
        ));
        for (i, f) in v.findings.iter().enumerate() {
            let tag = match f.severity {
                crate::doctor::Severity::Culprit => "cause",
                crate::doctor::Severity::Warning => "warning",
                crate::doctor::Severity::Note => "note",
            };
            out.push_str(&format!("  {}. [{tag}] {}\n", i + 1, f.cause));
            for e in f.evidence.iter().filter(|e| !e.is_empty()) {
                out.push_str(&format!("       {e}\n"));
            }
        }
    }
    if let Some(why) = &run.stopped {
        out.push_str(&format!("\nIncomplete: {why}\n"));
    }
    out
}

/// `--json`: the result file in the schema's conventions (docs/json.md, `doctor`).
pub fn render_json(run: &DoctorRun) -> Result<String> {
    crate::report::json::render(run, "doctor")
}
