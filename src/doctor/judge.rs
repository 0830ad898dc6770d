//! Each figure beside its expectation, and the verdict: the likely causes first.
//!
//! Expectations (rules of `tuning-tables/doctor.json`):
//! - host <-> GPU: efficiency x PCIe lane rate(max generation) x max width: what a healthy link of this GPU in
//!   this slot shows (NVML's maximum is that of the GPU and the system together);
//! - GPU <-> GPU over NVLink: efficiency x per-link rate(generation of the GPU's architecture) x the links between
//!   them (all links of each GPU, up or down, when they go to NVSwitches: the healthy count); over PCIe: the peer
//!   efficiency x the slower GPU's link;
//! - the NCCL sweep: the expected model's all-reduce busbw where one is given (`NcclExpectation`).
//!
//! The verdict takes the health readings first (a GPU lost or hung, throttled, a PCIe link below its maximum,
//! NVLinks down, P2P refused, uncorrected ECC errors), then explains each slow figure by one of them, or says
//! that none does.

use super::rates::{nvlink_gen_of, Rates};
use super::{DoctorRun, LinkResult, TestKind, TestStatus};
use crate::probe::health::GpuHealth;
use serde::{Deserialize, Serialize};

/// A figure's status against its expectation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum FigureStatus {
    Ok,
    Slow,
    /// Faster than the link allows: the link facts or the timing are wrong.
    SuspiciouslyFast,
    /// Nothing to compare with.
    NoExpectation,
}

impl FigureStatus {
    pub(crate) fn label(self) -> &'static str {
        match self {
            FigureStatus::Ok => "ok",
            FigureStatus::Slow => "slow",
            FigureStatus::SuspiciouslyFast => "suspiciously fast",
            FigureStatus::NoExpectation => "-",
        }
    }
}

/// One measured figure beside its expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    pub(crate) measured_gbs: Option<f64>,
    pub(crate) expected_gbs: Option<f64>,
    /// How the expectation was made ("PCIe Gen5 x16: 0.865 x 3.94 GB/s x 16").
    pub(crate) expected_from: String,
    /// The expected band where the expectation has one (the NCCL sweep: the expected model's class band).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expected_low_gbs: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) expected_high_gbs: Option<f64>,
    pub(crate) status: FigureStatus,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Explains lost bandwidth, or is a fault by itself.
    Culprit,
    /// Worth a look; not (alone) a slow figure.
    Warning,
    /// What could not be checked.
    Note,
}

/// One cause with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub(crate) severity: Severity,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) gpu: Option<u32>,
    /// One line, the cause first: "GPU 2: PCIe link trained at Gen4 x8 of Gen5 x16".
    pub cause: String,
    pub(crate) evidence: Vec<String>,
}

/// The whole machine's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// "healthy", "unhealthy", or "incomplete" (stopped before the end with nothing wrong so far).
    pub summary: String,
    pub findings: Vec<Finding>,
    pub(crate) figures_ok: usize,
    pub(crate) figures_slow: usize,
    pub(crate) figures_fast: usize,
}

impl Verdict {
    /// Exit status of `planner doctor`: 0 healthy, 1 when anything is to blame.
    pub(crate) fn exit_code(&self) -> i32 {
        if self.summary == "unhealthy" {
            1
        } else {
            0
        }
    }
}

/// The expected model's all-reduce, for the NCCL sweep (None where it says nothing).
pub(crate) trait NcclExpectation {
    fn label(&self) -> String;
    /// Expected all-reduce busbw at `bytes` over `ranks` ranks, GB/s: (expected, band low, band high).
    fn all_reduce_busbw_gbs(&self, bytes: u64, ranks: usize) -> Option<(f64, f64, f64)>;
}

/// A PCIe link of `gen` x `width` at the efficiency `eff`: GB/s and how it was made.
fn pcie_rate(rates: &Rates, gen: u32, width: u32, eff: f64) -> Option<(f64, String)> {
    let lane = rates.pcie_lane(gen)?;
    Some((
        eff * lane * f64::from(width),
        format!("PCIe Gen{gen} x{width}: {eff:.3} x {lane:.2} GB/s x {width}"),
    ))
}

fn gpu(gpus: &[GpuHealth], index: u32) -> Option<&GpuHealth> {
    gpus.iter().find(|g| g.index == index)
}

/// NVLinks between `a` and `b` when healthy, and whether they go through NVSwitches.
fn nvlinks_between(a: &GpuHealth, b: &GpuHealth) -> (usize, bool) {
    let switch_links = |g: &GpuHealth| {
        if g.nvlinks.iter().any(|l| l.remote_is_switch == Some(true)) {
            Some(g.nvlinks.len())
        } else {
            None
        }
    };
    if let (Some(na), Some(nb)) = (switch_links(a), switch_links(b)) {
        return (na.min(nb), true);
    }
    let direct = a
        .nvlinks
        .iter()
        .filter(|l| l.remote_bus_id.as_deref() == Some(b.bus_id.as_str()))
        .count();
    (direct, false)
}

/// The expectation of one test, and how it was made.
pub(crate) fn expectation(
    rates: &Rates,
    gpus: &[GpuHealth],
    r: &LinkResult,
) -> Option<(f64, String)> {
    let t = &r.test;
    let e = &rates.pcie_efficiency;
    let g = gpu(gpus, t.gpu)?;
    let max_link =
        |g: &GpuHealth, eff: f64| pcie_rate(rates, g.pcie.max_gen?, g.pcie.max_width?, eff);
    match t.test {
        TestKind::HostToDeviceMemcpyCe => max_link(g, e.host_to_device),
        TestKind::DeviceToHostMemcpyCe => max_link(g, e.device_to_host),
        TestKind::HostToDeviceBidirectionalMemcpyCe => max_link(g, e.bidirectional)
            .map(|(v, how)| (v, format!("{how} each way (full duplex)"))),
        kind => {
            let p = gpu(gpus, t.peer?)?;
            let (links, switched) = nvlinks_between(g, p);
            if links > 0 {
                let gen = nvlink_gen_of(g.compute_capability)?;
                let per = rates.nvlink_link(gen)?;
                let eff = if kind.is_sm() {
                    rates.nvlink_efficiency.sm
                } else {
                    rates.nvlink_efficiency.copy_engine
                };
                let via = if switched { " through NVSwitch" } else { "" };
                Some((
                    eff * per * links as f64,
                    format!("{links} NVLink {gen} links{via}: {eff:.3} x {per:.0} GB/s x {links}"),
                ))
            } else {
                let (va, ha) = max_link(g, e.peer)?;
                let (vb, hb) = max_link(p, e.peer)?;
                Some(if va <= vb {
                    (va, format!("over PCIe, {ha}"))
                } else {
                    (vb, format!("over PCIe, {hb}"))
                })
            }
        }
    }
}

fn figure_of(rates: &Rates, measured: Option<f64>, expected: Option<(f64, String)>) -> Figure {
    let tol = &rates.tolerance;
    let (expected_gbs, expected_from) = match expected {
        Some((v, how)) => (Some(v), how),
        None => (None, "no expectation (link facts not reported)".to_string()),
    };
    let status = match (measured, expected_gbs) {
        (Some(m), Some(e)) if e > 0.0 => {
            if m < tol.slow_below * e {
                FigureStatus::Slow
            } else if m > tol.fast_above * e {
                FigureStatus::SuspiciouslyFast
            } else {
                FigureStatus::Ok
            }
        }
        _ => FigureStatus::NoExpectation,
    };
    Figure {
        measured_gbs: measured,
        expected_gbs,
        expected_from,
        expected_low_gbs: None,
        expected_high_gbs: None,
        status,
    }
}

/// A figure judged by a band (the NCCL sweep): slow below `low`, suspiciously fast above `high`.
fn banded_figure(
    measured: Option<f64>,
    expected: f64,
    low: f64,
    high: f64,
    from: String,
) -> Figure {
    let status = match measured {
        Some(m) if m < low => FigureStatus::Slow,
        Some(m) if m > high => FigureStatus::SuspiciouslyFast,
        Some(_) => FigureStatus::Ok,
        None => FigureStatus::NoExpectation,
    };
    Figure {
        measured_gbs: measured,
        expected_gbs: Some(expected),
        expected_from: from,
        expected_low_gbs: Some(low),
        expected_high_gbs: Some(high),
        status,
    }
}

/// Judge every figure of `run` and write its verdict.
pub(crate) fn judge(run: &mut DoctorRun, rates: &Rates) {
    judge_with(run, rates, None);
}

/// As `judge`, with the expected model's word on the NCCL sweep.
pub(crate) fn judge_with(run: &mut DoctorRun, rates: &Rates, nccl: Option<&dyn NcclExpectation>) {
    let gpus = run.machine.gpus.clone();
    for r in run.links.iter_mut() {
        let expected = expectation(rates, &gpus, r);
        r.figure = Some(figure_of(rates, r.measured_gbs(), expected));
    }
    let ranks = run.machine.nccl_ranks;
    for p in run.nccl.iter_mut() {
        let measured = p.busbw_gbs(ranks).filter(|_| p.status == "ok");
        // The expected model's word: from the model when given, else as recorded at measurement time.
        let recorded = p.figure.as_ref().and_then(|f| {
            Some((
                f.expected_gbs?,
                f.expected_low_gbs?,
                f.expected_high_gbs?,
                f.expected_from.clone(),
            ))
        });
        let expected = match nccl {
            Some(m) if ranks > 1 => m
                .all_reduce_busbw_gbs(p.bytes, ranks)
                .map(|(e, lo, hi)| (e, lo, hi, m.label())),
            Some(_) => None,
            None => recorded,
        };
        p.figure = Some(match expected {
            Some((e, lo, hi, from)) if ranks > 1 => banded_figure(measured, e, lo, hi, from),
            _ => {
                let mut f = figure_of(rates, measured, None);
                f.expected_from = if ranks <= 1 {
                    "one rank: no link is crossed (a local copy)".into()
                } else {
                    "no expected model for this machine".into()
                };
                f
            }
        });
    }
    run.verdict = Some(verdict(run));
}

fn gen_width(gen: Option<u32>, width: Option<u32>) -> String {
    let g = gen
        .map(|g| format!("Gen{g}"))
        .unwrap_or_else(|| "Gen?".into());
    let w = width
        .map(|w| format!("x{w}"))
        .unwrap_or_else(|| "x?".into());
    format!("{g} {w}")
}

fn figure_line(r: &LinkResult) -> Option<String> {
    let f = r.figure.as_ref()?;
    let m = f.measured_gbs?;
    let e = f.expected_gbs?;
    Some(format!(
        "{} {}: {m:.1} GB/s measured, {e:.1} expected ({:.0} %)",
        r.test.test.name(),
        r.test.route(),
        100.0 * m / e
    ))
}

/// Which tests a GPU's fault can slow: its host tests (PCIe) or its peer tests (NVLink), or its SM tests
/// (clocks).
fn touches(r: &LinkResult, g: u32) -> bool {
    r.test.gpu == g || r.test.peer == Some(g)
}

/// The findings of one run as they are gathered: each check pushes its own, in the order the report lists them
/// (sorted by severity at the end, stably).
struct Judging<'a> {
    run: &'a DoctorRun,
    /// Indices of the slow figures.
    slow: Vec<usize>,
    /// Slow figures an earlier finding explains.
    explained: Vec<usize>,
    findings: Vec<Finding>,
}

fn verdict(run: &DoctorRun) -> Verdict {
    let mut judging = Judging::new(run);
    judging.unfinished_tests();
    for g in &run.machine.gpus {
        judging.clocks(g);
        judging.pcie(g);
        judging.nvlinks(g);
        judging.ecc_and_jobs(g);
        judging.unreported(g);
    }
    judging.p2p_refused();
    judging.unexplained_slow();
    judging.suspiciously_fast();
    judging.nccl_sweep();
    judging.into_verdict()
}

impl<'a> Judging<'a> {
    fn new(run: &'a DoctorRun) -> Judging<'a> {
        let slow = run
            .links
            .iter()
            .enumerate()
            .filter(|(_, r)| r.figure.as_ref().map(|f| f.status) == Some(FigureStatus::Slow))
            .map(|(i, _)| i)
            .collect();
        Judging {
            run,
            slow,
            explained: Vec::new(),
            findings: Vec::new(),
        }
    }

    /// The figure lines of the slow figures `filter` selects, which count as explained from then on.
    fn explain(&mut self, filter: &dyn Fn(&LinkResult) -> bool) -> Vec<String> {
        let mut lines = Vec::new();
        for &i in &self.slow {
            if filter(&self.run.links[i]) {
                if let Some(l) = figure_line(&self.run.links[i]) {
                    lines.push(l);
                }
                self.explained.push(i);
            }
        }
        lines
    }

    /// Tests that did not finish: the GPU hung or failed.
    fn unfinished_tests(&mut self) {
        for r in &self.run.links {
            let what = format!("{} {}", r.test.test.name(), r.test.route());
            let note = r.note.clone().unwrap_or_default();
            match r.status {
                TestStatus::Hung => self.findings.push(Finding {
                    severity: Severity::Culprit,
                    gpu: Some(r.test.gpu),
                    cause: format!(
                        "GPU {}: copy hung ({what} did not finish within {} s); the tests after it did not run",
                        r.test.gpu, self.run.options.timeout_s
                    ),
                    evidence: vec![note],
                }),
                TestStatus::Failed => self.findings.push(Finding {
                    severity: Severity::Culprit,
                    gpu: Some(r.test.gpu),
                    cause: format!("GPU {}: {what} failed (GPU busy or lost?)", r.test.gpu),
                    evidence: vec![note],
                }),
                _ => {}
            }
        }
    }

    /// Clocks held down.
    fn clocks(&mut self, g: &GpuHealth) {
        let i = g.index;
        if let Some(reasons) = &g.throttle {
            let slowing: Vec<&str> = reasons
                .iter()
                .filter(|r| r.is_slowdown())
                .map(|r| r.label())
                .collect();
            if !slowing.is_empty() {
                let mut evidence = vec![match (g.sm_clock_mhz, g.sm_clock_max_mhz) {
                    (Some(c), Some(m)) => format!("SM clock {c} MHz of {m} MHz"),
                    _ => "SM clock not reported".to_string(),
                }];
                if let Some(t) = g.temperature_c {
                    evidence.push(format!("temperature {t} C"));
                }
                evidence.extend(self.explain(&|r| touches(r, i) && r.test.test.is_sm()));
                self.findings.push(Finding {
                    severity: Severity::Culprit,
                    gpu: Some(i),
                    cause: format!("GPU {i} throttled: {}", slowing.join(", ")),
                    evidence,
                });
            }
        }
    }

    /// The PCIe link below its maximum, and its replays.
    fn pcie(&mut self, g: &GpuHealth) {
        let i = g.index;
        let (gen, width) = g.pcie.trained();
        let (max_gen, max_width) = (g.pcie.max_gen, g.pcie.max_width);
        let under_load = g.pcie.under_load_gen.is_some();
        let width_low = matches!((width, max_width), (Some(w), Some(m)) if w < m);
        let gen_low = matches!((gen, max_gen), (Some(c), Some(m)) if c < m);
        if width_low || (gen_low && under_load) {
            let mut evidence = vec![format!(
                "NVML: current {} ({}), maximum {}",
                gen_width(gen, width),
                if under_load {
                    "read under load"
                } else {
                    "read idle"
                },
                gen_width(max_gen, max_width)
            )];
            evidence.extend(self.explain(&|r| r.test.gpu == i && !r.test.test.is_peer()));
            self.findings.push(Finding {
                severity: Severity::Culprit,
                gpu: Some(i),
                cause: format!(
                    "GPU {i}: PCIe link trained at {} of {}",
                    gen_width(gen, width),
                    gen_width(max_gen, max_width)
                ),
                evidence,
            });
        } else if gen_low {
            self.findings.push(Finding {
                severity: Severity::Note,
                gpu: Some(i),
                cause: format!(
                    "GPU {i}: PCIe at {} of {} while idle (GPUs lower the link speed when idle; not read under load)",
                    gen_width(gen, width),
                    gen_width(max_gen, max_width)
                ),
                evidence: Vec::new(),
            });
        }
        if let Some(n) = g.pcie.replay_count.filter(|n| *n > 0) {
            self.findings.push(Finding {
                severity: Severity::Warning,
                gpu: Some(i),
                cause: format!(
                    "GPU {i}: {n} PCIe replays since the driver loaded (a marginal link or riser)"
                ),
                evidence: Vec::new(),
            });
        }
    }

    /// NVLinks down, and NVLink errors.
    fn nvlinks(&mut self, g: &GpuHealth) {
        let i = g.index;
        // NVLinks down.
        let down: Vec<u32> = g
            .nvlinks
            .iter()
            .filter(|l| l.active == Some(false))
            .map(|l| l.link)
            .collect();
        let up = g.nvlinks.iter().filter(|l| l.active == Some(true)).count();
        // A GPU whose links are all down has none in use (a PCIe card with an unbridged NVLink port), unless other
        // GPUs of the same model use theirs.
        let peers_use_theirs = self.run.machine.gpus.iter().any(|o| {
            o.index != i && o.name == g.name && o.nvlinks.iter().any(|l| l.active == Some(true))
        });
        if !down.is_empty() && (up > 0 || peers_use_theirs) {
            let mut evidence = vec![format!(
                "NVML: links {} inactive, {up} active",
                down.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )];
            evidence.extend(self.explain(&|r| touches(r, i) && r.test.test.is_peer()));
            self.findings.push(Finding {
                severity: Severity::Culprit,
                gpu: Some(i),
                cause: format!("GPU {i}: NVLink {} of {} down", down.len(), g.nvlinks.len()),
                evidence,
            });
        }
        // NVLink errors.
        for l in &g.nvlinks {
            let errors: Vec<String> = l
                .errors
                .reported()
                .into_iter()
                .filter(|(_, v)| *v > 0)
                .map(|(n, v)| format!("{v} {n}"))
                .collect();
            if !errors.is_empty() {
                self.findings.push(Finding {
                    severity: Severity::Warning,
                    gpu: Some(i),
                    cause: format!("GPU {i} NVLink {}: {} errors", l.link, errors.join(", ")),
                    evidence: Vec::new(),
                });
            }
        }
    }

    /// ECC, and other jobs on the GPU.
    fn ecc_and_jobs(&mut self, g: &GpuHealth) {
        let i = g.index;
        // ECC.
        if let Some(n) = g.ecc.volatile_uncorrected.filter(|n| *n > 0) {
            self.findings.push(Finding {
                severity: Severity::Culprit,
                gpu: Some(i),
                cause: format!("GPU {i}: {n} uncorrected ECC errors since the driver loaded"),
                evidence: vec!["the GPU needs draining and a reset by its administrator".into()],
            });
        }
        if g.ecc.enabled == Some(false) {
            self.findings.push(Finding {
                severity: Severity::Note,
                gpu: Some(i),
                cause: format!("GPU {i}: ECC is off"),
                evidence: Vec::new(),
            });
        }
        // Other jobs on the GPU.
        if let Some(n) = g.compute_processes.filter(|n| *n > 0) {
            self.findings.push(Finding {
                severity: Severity::Warning,
                gpu: Some(i),
                cause: format!("GPU {i} busy: {n} other compute process(es) ran when the probe did; figures may be low"),
                evidence: Vec::new(),
            });
        }
    }

    /// What NVML did not say.
    fn unreported(&mut self, g: &GpuHealth) {
        let i = g.index;
        let mut missing = Vec::new();
        if g.pcie.max_gen.is_none() || g.pcie.max_width.is_none() {
            missing.push("PCIe maximum");
        }
        if g.throttle.is_none() {
            missing.push("throttle reasons");
        }
        if g.ecc.volatile_uncorrected.is_none() {
            missing.push("ECC error counts");
        }
        if g.nvlinks.iter().any(|l| l.errors.reported().is_empty()) {
            missing.push("NVLink error counters");
        }
        if g.pcie.replay_count.is_none() {
            missing.push("PCIe replay counter");
        }
        if !missing.is_empty() {
            self.findings.push(Finding {
                severity: Severity::Note,
                gpu: Some(i),
                cause: format!(
                    "GPU {i}: not reported by NVML (a VM or an older driver?): {}",
                    missing.join(", ")
                ),
                evidence: Vec::new(),
            });
        }
    }

    /// P2P refused, once per pair.
    fn p2p_refused(&mut self) {
        let mut pairs_seen: Vec<(u32, u32)> = Vec::new();
        for r in self
            .run
            .links
            .iter()
            .filter(|r| r.status == TestStatus::Refused)
        {
            let Some(p) = r.test.peer else { continue };
            let key = (r.test.gpu.min(p), r.test.gpu.max(p));
            if pairs_seen.contains(&key) {
                continue;
            }
            pairs_seen.push(key);
            self.findings.push(Finding {
                severity: Severity::Culprit,
                gpu: Some(key.0),
                cause: format!("P2P refused between GPU {} and {}", key.0, key.1),
                evidence: vec![r
                    .note
                    .clone()
                    .unwrap_or_else(|| "the driver refused peer access".into())],
            });
        }
    }

    /// Slow figures nothing above explains.
    fn unexplained_slow(&mut self) {
        for &i in &self.slow {
            if self.explained.contains(&i) {
                continue;
            }
            let r = &self.run.links[i];
            let hint = if r.test.test.is_peer() {
                "no health fault explains it (another job on the links? the PCIe/NVSwitch path?)"
            } else {
                "no health fault explains it (the GPU's NUMA node vs the host memory used? an IOMMU? another job?)"
            };
            self.findings.push(Finding {
                severity: Severity::Culprit,
                gpu: Some(r.test.gpu),
                cause: format!("{} {} slow: {hint}", r.test.test.name(), r.test.route()),
                evidence: figure_line(r).into_iter().collect(),
            });
        }
    }

    /// Suspiciously fast figures.
    fn suspiciously_fast(&mut self) {
        for r in &self.run.links {
            if r.figure.as_ref().map(|f| f.status) == Some(FigureStatus::SuspiciouslyFast) {
                self.findings.push(Finding {
                    severity: Severity::Warning,
                    gpu: Some(r.test.gpu),
                    cause: format!(
                        "{} {} suspiciously fast: the link facts NVML gave (or the timing) are wrong",
                        r.test.test.name(),
                        r.test.route()
                    ),
                    evidence: figure_line(r).into_iter().collect(),
                });
            }
        }
    }

    /// The NCCL sweep.
    fn nccl_sweep(&mut self) {
        for p in &self.run.nccl {
            let Some(f) = &p.figure else { continue };
            let size = crate::units::format_size(p.bytes);
            if p.status != "ok" {
                self.findings.push(Finding {
                    severity: Severity::Culprit,
                    gpu: None,
                    cause: format!("NCCL all-reduce at {size}: {}", p.status),
                    evidence: p.note.clone().into_iter().collect(),
                });
            } else if f.status == FigureStatus::Slow {
                self.findings.push(Finding {
                    severity: Severity::Culprit,
                    gpu: None,
                    cause: format!("NCCL all-reduce at {size} slow"),
                    evidence: vec![format!(
                        "busbw {:.1} GB/s measured, {:.1} expected ({})",
                        f.measured_gbs.unwrap_or(0.0),
                        f.expected_gbs.unwrap_or(0.0),
                        f.expected_from
                    )],
                });
            }
        }
    }

    /// The findings by severity, the summary and the figure counts.
    fn into_verdict(self) -> Verdict {
        let run = self.run;
        let mut findings = self.findings;
        findings.sort_by_key(|f| f.severity);
        let count = |s: FigureStatus| {
            run.links
                .iter()
                .filter_map(|r| r.figure.as_ref())
                .chain(run.nccl.iter().filter_map(|p| p.figure.as_ref()))
                .filter(|f| f.status == s)
                .count()
        };
        let culprits = findings.iter().any(|f| f.severity == Severity::Culprit);
        let summary = if culprits {
            "unhealthy"
        } else if !run.complete {
            "incomplete"
        } else {
            "healthy"
        };
        Verdict {
            summary: summary.into(),
            findings,
            figures_ok: count(FigureStatus::Ok),
            figures_slow: count(FigureStatus::Slow),
            figures_fast: count(FigureStatus::SuspiciouslyFast),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::{DoctorMachine, DoctorOptions, NcclPoint};

    struct Hand;
    impl NcclExpectation for Hand {
        fn label(&self) -> String {
            "hand".into()
        }
        fn all_reduce_busbw_gbs(&self, _bytes: u64, ranks: usize) -> Option<(f64, f64, f64)> {
            (ranks == 4).then_some((300.0, 270.0, 330.0))
        }
    }

    fn run_with(times_us: f64) -> DoctorRun {
        DoctorRun {
            format: crate::doctor::DOCTOR_FORMAT.into(),
            version: 1,
            planner_version: "t".into(),
            created_unix: 0,
            created_utc: String::new(),
            machine: DoctorMachine {
                hosts: vec![],
                backend: "t".into(),
                gpus: vec![],
                driver_version: None,
                cuda_driver_version: None,
                nccl_version: None,
                cuda_version: None,
                nccl_ranks: 4,
                launch: "one process".into(),
            },
            options: DoctorOptions {
                bytes: 1 << 30,
                repeats: 1,
                timeout_s: 1,
                nccl_sizes: vec![1 << 30],
                command: String::new(),
            },
            links: vec![],
            nccl: vec![NcclPoint {
                bytes: 1 << 30,
                status: "ok".into(),
                note: None,
                times_us: vec![times_us],
                nccl_choice: None,
                figure: None,
            }],
            complete: true,
            stopped: None,
            verdict: None,
        }
    }

    #[test]
    fn the_nccl_sweep_is_judged_by_the_band_and_keeps_it_on_reload() {
        let rates = Rates::built_in().unwrap();
        // 1 GiB over 4 ranks in 5000 us: algbw 214.7 GB/s, busbw x 1.5 = 322.1: inside 270..330.
        let mut run = run_with(5000.0);
        judge_with(&mut run, &rates, Some(&Hand));
        let f = run.nccl[0].figure.clone().unwrap();
        assert!((f.measured_gbs.unwrap() - 322.1).abs() < 0.1, "{f:?}");
        assert_eq!(f.status, FigureStatus::Ok);
        // 8000 us: busbw 201.3, below the band: slow, and a culprit.
        let mut run = run_with(8000.0);
        judge_with(&mut run, &rates, Some(&Hand));
        assert_eq!(
            run.nccl[0].figure.as_ref().unwrap().status,
            FigureStatus::Slow
        );
        assert_eq!(run.verdict.as_ref().unwrap().summary, "unhealthy");
        // Re-judged without the model (--load): the recorded band still judges it.
        judge(&mut run, &rates);
        let f = run.nccl[0].figure.as_ref().unwrap();
        assert_eq!(
            (f.status, f.expected_low_gbs),
            (FigureStatus::Slow, Some(270.0))
        );
        assert_eq!(f.expected_from, "hand");
    }
}
