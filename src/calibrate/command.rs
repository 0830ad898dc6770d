//! `planner calibrate FILE... -o CAL.json`: read every input, fit, and where
//! asked cross-validate, plot and save, in one call (`calibrate`). The command
//! line handler only turns flags into a `CalibrateRequest` and prints.

use super::cv::{cross_validate_with, CvReport};
use super::expected::{basis_of_inputs, FormBasis};
use super::file::{topology_hash_of_root, Calibration};
use super::fit::{fit_with_basis, FitOptions};
use super::input::{read_file, Measurements, ReadOptions};
use crate::error::{Error, Result};
use crate::topo::Cluster;
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// The machine the measurements were taken on, as the user names it
/// (`--topo` / `--fixture`), for inputs that carry no topology of their own
/// (nccl-tests output, NCCL Inspector).
#[derive(Debug, Clone)]
pub struct TopologyFacts {
    pub(crate) topology_hash: String,
    pub(crate) gpu_count: usize,
    /// Where it came from, for messages.
    pub(crate) source: String,
    /// The machine itself: the expected model's form is built on it (`basis`) under the inputs' NCCL version.
    pub cluster: Option<Arc<Cluster>>,
}

impl PartialEq for TopologyFacts {
    /// The facts; the cluster they were read from is the same machine when they are.
    fn eq(&self, other: &TopologyFacts) -> bool {
        self.topology_hash == other.topology_hash
            && self.gpu_count == other.gpu_count
            && self.source == other.source
    }
}

impl TopologyFacts {
    pub(crate) fn of_cluster(cluster: &Cluster) -> TopologyFacts {
        TopologyFacts {
            topology_hash: topology_hash_of_root(&cluster.node.xml),
            gpu_count: cluster.node.gpu_count() * cluster.n_nodes.max(1),
            source: cluster.node.source.clone(),
            cluster: Some(Arc::new(cluster.clone())),
        }
    }

    /// The machine on the expected model's form with NCCL `nccl_version`'s channels (the newest table without
    /// one); None where the expected model cannot build it (then the empirical form).
    pub fn basis(&self, nccl_version: Option<&str>) -> Option<FormBasis> {
        FormBasis::of_cluster(self.cluster.as_deref()?, nccl_version).ok()
    }
}

/// NCCL's stock estimate for the rows that record none (nccl-tests output, NCCL Inspector), where `--topo` /
/// `--fixture` names the machine: (collective, pair, bytes, the input's NCCL version) -> µs, None where the model
/// masks the pair.
#[derive(Clone, Default)]
pub struct StockEstimate(pub Option<StockFn>);

/// The function behind `StockEstimate`.
pub type StockFn =
    std::rc::Rc<dyn Fn(crate::model::Coll, crate::model::Pair, u64, Option<&str>) -> Option<f64>>;

impl std::fmt::Debug for StockEstimate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "StockEstimate(model)"
        } else {
            "StockEstimate(none)"
        })
    }
}

impl PartialEq for StockEstimate {
    fn eq(&self, other: &StockEstimate) -> bool {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) => std::rc::Rc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

/// Everything `planner calibrate` was asked to do.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CalibrateRequest {
    pub(crate) files: Vec<String>,
    pub(crate) read: ReadOptions,
    pub(crate) fit: FitOptions,
    /// Write the calibration here.
    pub(crate) out: Option<String>,
    /// Also cross-validate (k-fold by size; train on one input, test on another).
    pub(crate) cv: bool,
    /// Write the small-multiples plot here (SVG).
    pub(crate) plot: Option<String>,
    pub(crate) topology: Option<TopologyFacts>,
    /// NCCL's stock estimate for rows without one (with `topology`).
    pub stock: StockEstimate,
}

/// What it produced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibrateOutcome {
    pub(crate) calibration: Calibration,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) cross_validation_report: Option<CvReport>,
    /// Wall time of the fit (with the k-fold summary the file stores), ms.
    pub(crate) fit_ms: f64,
}

impl CalibrateOutcome {
    pub(crate) fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| Error::runtime(format!("cannot serialise the calibration: {e}")))
    }

    /// The calibration's table, then the cross-validation report if any.
    pub(crate) fn render_text(&self) -> String {
        let mut out = self.calibration.render_text();
        if let Some(cv) = &self.cross_validation_report {
            out.push('\n');
            out.push_str(&cv.render_text());
        }
        out
    }
}

fn describe(m: &Measurements) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for r in &m.rows {
        let key = r.backend.to_string();
        match counts.iter_mut().find(|c| c.0 == key) {
            Some(c) => c.1 += 1,
            None => counts.push((key, 1)),
        }
    }
    let counts: Vec<String> = counts.iter().map(|(b, n)| format!("{n} {b}")).collect();
    format!(
        "{}: {}, {} rows ({})",
        m.source,
        m.format.name(),
        m.rows.len(),
        counts.join(", ")
    )
}

/// Bind a calibration to the topology the user named: it must agree with the
/// one the inputs carry (unless `force`), and fills it in where they carry none.
fn bind_topology(cal: &mut Calibration, facts: &TopologyFacts, force: bool) -> Result<()> {
    let m = &mut cal.machine;
    match &m.topology_hash {
        Some(h) if *h != facts.topology_hash => {
            let msg = format!(
                "the inputs were measured on topology {h}, {} is {}",
                facts.source, facts.topology_hash
            );
            if !force {
                return Err(Error::bad_input(format!(
                    "{msg} (--force to keep the inputs' topology)"
                )));
            }
            cal.notes.push(msg);
        }
        Some(_) => {}
        None => {
            m.topology_hash = Some(facts.topology_hash.clone());
            cal.notes.push(format!(
                "topology {} taken from {}",
                facts.topology_hash, facts.source
            ));
        }
    }
    let m = &mut cal.machine;
    match m.gpu_count {
        Some(n) if n != facts.gpu_count => {
            let msg = format!(
                "the inputs ran on {n} GPUs, {} has {}",
                facts.source, facts.gpu_count
            );
            if !force {
                return Err(Error::bad_input(format!(
                    "{msg} (--force to keep the inputs' GPU count)"
                )));
            }
            cal.notes.push(msg);
        }
        Some(_) => {}
        None => m.gpu_count = Some(facts.gpu_count),
    }
    Ok(())
}

/// Read, fit, bind to `--topo`, cross-validate, plot, save: what
/// `planner calibrate` does. `progress` gets one line per step (stderr).
pub fn calibrate(
    request: &CalibrateRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<CalibrateOutcome> {
    if request.files.is_empty() {
        return Err(Error::bad_input("calibrate: give at least one input file"));
    }
    // A path that cannot be written is refused before the fit, not after it.
    for path in request.out.iter().chain(&request.plot) {
        crate::fsio::check_output_path(path)?;
    }
    let mut inputs = Vec::with_capacity(request.files.len());
    for path in &request.files {
        let mut m = read_file(path, &request.read)?;
        if let Some(stock) = &request.stock.0 {
            let version = m.machine.nccl_version.clone();
            for row in m.rows.iter_mut().filter(|r| r.stock_us.is_none()) {
                if let Some(pair) = row.fit_pair() {
                    row.stock_us = stock(row.coll, pair, row.bytes, version.as_deref());
                }
            }
        }
        progress(&describe(&m));
        inputs.push(m);
    }
    // The form: the expected model's on the inputs' own topology, else on the one named (`--topo`), else the
    // empirical one.
    let start = Instant::now();
    let refs: Vec<&Measurements> = inputs.iter().collect();
    let version = inputs
        .iter()
        .find_map(|m| m.machine.nccl_version.as_deref());
    let basis = basis_of_inputs(&refs).or_else(|| request.topology.as_ref()?.basis(version));
    progress(&match &basis {
        Some(b) => format!(
            "form: the expected model's ({}, NCCL {} channels)",
            b.machine_class, b.nccl_family
        ),
        None => "form: empirical (no input carries its topology; --topo names it)".to_string(),
    });
    let mut calibration = fit_with_basis(&inputs, &request.fit, basis.as_ref())?;
    let fit_ms = start.elapsed().as_secs_f64() * 1e3;
    progress(&format!(
        "fitted {} pair(s) of the {} backend in {fit_ms:.0} ms{}",
        calibration.pairs.len(),
        request.fit.backend,
        if request.fit.cv_folds > 0 {
            format!(" (with a {}-fold check by size)", request.fit.cv_folds)
        } else {
            String::new()
        }
    ));
    if let Some(facts) = &request.topology {
        bind_topology(&mut calibration, facts, request.fit.force)?;
    }
    for note in &calibration.notes {
        progress(&format!("note: {note}"));
    }
    let cross_validation_report = if request.cv {
        let start = Instant::now();
        let report = cross_validate_with(&inputs, &request.fit, basis.as_ref())?;
        progress(&format!(
            "cross-validated in {:.0} ms: {} section(s)",
            start.elapsed().as_secs_f64() * 1e3,
            report.sections.len()
        ));
        Some(report)
    } else {
        None
    };
    if let Some(path) = &request.plot {
        let svg = super::plot::render_svg(&calibration, &inputs)?;
        crate::fsio::write_output(path, svg.as_bytes())?;
        progress(&format!("wrote {path}"));
    }
    if let Some(path) = &request.out {
        calibration.save(path)?;
        calibration.source = path.clone();
        progress(&format!("wrote {path}"));
    }
    Ok(CalibrateOutcome {
        calibration,
        cross_validation_report,
        fit_ms,
    })
}
