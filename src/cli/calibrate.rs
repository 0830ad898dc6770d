//! `planner calibrate`: flags -> `CalibrateRequest` -> `calibrate::calibrate`,
//! then print the calibration (and the cross-validation report).

use super::source::SourceArgs;
use crate::calibrate::{self, CalibrateRequest, FitOptions, ReadOptions};
use crate::error::{Error, Result};
use crate::measure::Backend;
use crate::model::Coll;
use crate::model::Pair;

#[derive(Debug, clap::Args)]
pub(crate) struct CalibrateArgs {
    /// The topology the calibration is bound to (default: the one the inputs record)
    #[command(flatten)]
    pub(crate) source: SourceArgs,
    /// Measurements: planner verify result files, nccl-tests output (text or -J JSON), NCCL Inspector JSONL
    #[arg(value_name = "FILE", required = true)]
    pub(crate) files: Vec<String>,
    /// Write the calibration here (self-describing JSON; `explain`/`verify --load` read it with --calibration)
    #[arg(short = 'o', long = "out", value_name = "CAL.json")]
    pub(crate) out: Option<String>,
    /// The pair every row of the nccl-tests files ran (pinned with NCCL_ALGO/NCCL_PROTO, without a log in the file)
    #[arg(long, value_name = "ALGO/PROTO")]
    pub(crate) pair: Option<String>,
    /// The collective of nccl-tests text without its "# Collective test starting" line
    #[arg(long, value_name = "NAME")]
    pub(crate) coll: Option<String>,
    /// Whose times to fit: nccl (NCCL's rows, the reference for NCCL's model) or native (planner's kernels)
    #[arg(long, default_value = "nccl", value_name = "nccl|native")]
    pub(crate) backend: String,
    /// Print the cross-validation: k-fold by size, and with 2+ inputs train on one / test on another
    #[arg(long)]
    pub(crate) cv: bool,
    /// Size bands of the k-fold cross-validation (the file keeps its summary; 0: none in the file)
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub(crate) folds: usize,
    /// Draw measured, stock and calibrated time per pair, one panel per pair (SVG)
    #[arg(long, value_name = "FILE.svg")]
    pub(crate) plot: Option<String>,
    /// Fit inputs of different machines together, or bind to a --topo/--fixture that differs from theirs
    #[arg(long)]
    pub(crate) force: bool,
    /// Machine-readable output on stdout: {"calibration": ..., "cross_validation_report": ...} (docs/json.md)
    #[arg(long)]
    pub(crate) json: bool,
}

fn request_from(args: &CalibrateArgs, source: &SourceArgs) -> Result<CalibrateRequest> {
    let backend = match args.backend.to_ascii_lowercase().as_str() {
        "nccl" => Backend::Nccl,
        "native" => Backend::Native,
        other => {
            return Err(Error::bad_input(format!(
                "invalid --backend '{other}': calibrate fits one backend, nccl or native"
            )))
        }
    };
    let pair = match &args.pair {
        Some(p) => Some(Pair::parse(p).map_err(|e| Error::bad_input(format!("--pair: {e}")))?),
        None => None,
    };
    let coll = match &args.coll {
        Some(c) => Some(Coll::parse(c)?),
        None => None,
    };
    // A topology named on the command line binds the calibration to it (the
    // inputs may carry none); without one, never the probe or the default fixture.
    super::source::preflight::output(args.out.as_deref())?;
    super::source::preflight::output(args.plot.as_deref())?;
    for file in &args.files {
        super::source::preflight::input(Some(file))?;
    }
    let (topology, stock) = if source.source().is_explicit() {
        let cluster = source.source().load()?;
        let facts = calibrate::TopologyFacts::of_cluster(&cluster);
        (Some(facts), stock_estimate(cluster))
    } else {
        (None, calibrate::command::StockEstimate::default())
    };
    Ok(CalibrateRequest {
        files: args.files.clone(),
        read: ReadOptions { pair, coll },
        fit: FitOptions {
            backend,
            cv_folds: args.folds,
            force: args.force,
        },
        out: args.out.clone(),
        cv: args.cv,
        plot: args.plot.clone(),
        topology,
        stock,
    })
}

/// NCCL's stock estimate on the named topology, for inputs that record none (nccl-tests, Inspector): the model of
/// the input's NCCL version (else the newest), built once per version.
fn stock_estimate(cluster: crate::topo::Cluster) -> calibrate::command::StockEstimate {
    use crate::predict::{ModelPredictor, Predictor};
    use std::collections::HashMap;
    let models: std::cell::RefCell<HashMap<Option<String>, Option<ModelPredictor>>> =
        Default::default();
    let estimate = move |coll: Coll, pair: Pair, bytes: u64, version: Option<&str>| {
        let mut models = models.borrow_mut();
        let model = models
            .entry(version.map(str::to_string))
            .or_insert_with(|| ModelPredictor::new(&cluster, None, version).ok());
        model.as_ref()?.predict_us(coll, pair, bytes)
    };
    calibrate::command::StockEstimate(Some(std::rc::Rc::new(estimate)))
}

pub(crate) fn run(args: CalibrateArgs) -> Result<()> {
    let request = request_from(&args, &args.source)?;
    let outcome = calibrate::calibrate(&request, &mut |line| eprintln!("planner: {line}"))?;
    if args.json {
        println!(
            "{}",
            crate::report::json::render_text(&outcome.to_json()?, "")?
        );
    } else {
        print!("{}", crate::report::text(&outcome.render_text()));
    }
    Ok(())
}
