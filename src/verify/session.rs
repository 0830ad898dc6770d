//! One whole `planner verify` measurement: the model before the run (from the named topology or the live probe),
//! the backends (one process, or one rank per process under a launcher), the predictions recorded in every row,
//! and the result file.

use super::fnv1a64;
use super::keep::Keeping;
use super::native::NativeExec;
use super::rendezvous::LauncherEnv;
use super::run::{self, Progress, TopologyRecord, VerifyRequest};
use super::score;
use crate::error::{Error, Result};
use crate::pipeline::Source;
use crate::predict::{ModelPredictor, NoModel, Predictor};
use crate::result_file::VerifyRun;
use crate::topo::Cluster;

/// Measure `request`, record the model's predictions, and save the result file at `out` (default: a timestamped
/// name in the current directory). None on a rank other than 0 of a launcher run (rank 0 reports).
///
/// The file is written as the run goes (after every finished size, `keep::Keeping`), so an interrupted or failed
/// run leaves a readable file marked incomplete. Installs the SIGINT/SIGTERM handler: the first signal stops the
/// run after the current size (the run comes back with `stopped`), the second exits at once.
pub(crate) fn measure(
    request: &VerifyRequest,
    source: &Source,
    out: Option<&str>,
    progress: &dyn Progress,
) -> Result<Option<(VerifyRun, String)>> {
    let before = topology_before(source);
    let library = crate::nccl::library_version().ok();
    let planning: Box<dyn Predictor> = match &before {
        Some(cluster) => match ModelPredictor::new(cluster, None, library.as_deref()) {
            Ok(p) => Box::new(p),
            Err(e) => {
                eprintln!("planner: the model cannot run before the run ({e})");
                Box::new(NoModel)
            }
        },
        None => Box::new(NoModel),
    };
    let topology = match &before {
        Some(cluster) => record_of(cluster),
        None => TopologyRecord {
            source: "NCCL's topology dump (rank 0)".into(),
            nodes: source.nodes,
            net_latency_us: source.net_latency_us,
            ..Default::default()
        },
    };
    let exe = std::env::current_exe().map_err(|e| {
        Error::runtime(format!(
            "cannot find the planner binary to start NCCL children: {e}"
        ))
    })?;
    let path = match out {
        Some(p) => p.to_string(),
        None => run::default_result_path().to_string_lossy().into_owned(),
    };
    // Refused before anything runs: a FIFO, device or directory at `--out`, or a missing directory.
    crate::fsio::check_output_path(&path)?;
    let keeping = Keeping::new(progress, &path);
    crate::measure::install_stop_handler();
    let measured = match LauncherEnv::from_env()? {
        Some(env) => {
            run::run_distributed(&exe, &env, request, &topology, planning.as_ref(), &keeping)
        }
        None => {
            let native = NativeExec {
                channels: crate::exec::session::FALLBACK_CHANNELS,
            };
            run::run_local(
                &exe,
                request,
                &topology,
                planning.as_ref(),
                Some(&native),
                &keeping,
            )
            .map(Some)
        }
    };
    let mut run = match measured {
        Ok(Some(run)) => run,
        Ok(None) => return Ok(None), // not rank 0: rank 0 prints
        Err(e) => {
            if keeping.started() {
                keeping.fail(&e);
                progress.note(&format!(
                    "result file {path} keeps the sizes measured before the error (marked incomplete)"
                ));
            }
            return Err(e);
        }
    };
    // Predictions: the planner's topology if it had one, else NCCL's own dump;
    // the planner's search if it runs, else NCCL's graph dump.
    if before.is_none() {
        if let Some(dump) = &run.machine.nccl_topology_xml {
            run.machine.topology_hash = format!("{:016x}", fnv1a64(dump.as_bytes()));
        }
    }
    let hosts = run.machine.hosts.len();
    run.machine.nodes = run.machine.nodes.max(hosts).max(1);
    let (predictions, label) = {
        let predictor = score::predictor_for_run(&run);
        let (coll, dtype) = (run.options.collective, run.options.dtype);
        let predictions: Vec<(Option<f64>, Option<String>)> = run
            .rows
            .iter()
            .map(|r| crate::predict::predict_row(predictor.as_ref(), coll, dtype, r))
            .collect();
        (predictions, predictor.label())
    };
    for (row, (time, kernel)) in run.rows.iter_mut().zip(predictions) {
        row.predicted_us = time;
        row.predicted_kernel = kernel;
    }
    run.options.model = Some(label);
    run.save(&path)?;
    Ok(Some((run, path)))
}

/// The machine's topology for the model before measuring: what the user
/// chose (--fixture/--topo), else the live probe; never the built-in default
/// fixture, which would describe another machine.
fn topology_before(source: &Source) -> Option<Cluster> {
    match source.load_machine() {
        Ok(cluster) => cluster,
        Err(e) => {
            eprintln!("planner: no topology for the model before the run ({e})");
            None
        }
    }
}

fn record_of(cluster: &Cluster) -> TopologyRecord {
    TopologyRecord {
        source: cluster.node.source.clone(),
        xml: Some(crate::xml::write(&cluster.node.xml)),
        nodes: cluster.n_nodes,
        net_latency_us: cluster.net_latency_us,
    }
}
