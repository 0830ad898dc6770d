//! What several targets share (each target includes this file with `#[path]`): a model built once from a
//! committed fixture, and the check every parser's error must pass.
#![allow(dead_code)]

use planner::model::input::NvlsFlag;
use planner::model::Model;
use planner::nccl_env::NcclEnv;
use planner::search::Graphs;
use planner::topo::Cluster;
use std::sync::OnceLock;

/// An error from a parser of user input must be bad input (exit 2), never a runtime error or a panic.
pub fn bad_input(result: Result<impl Sized, planner::Error>) {
    if let Err(e) = result {
        assert_eq!(e.exit_code(), 2, "not bad input: {e}");
    }
}

/// The 2x H200 capture's cluster (one node, or two), its searched graphs and channel count.
pub struct Setup {
    pub cluster: Cluster,
    pub graphs: Graphs,
    pub channels: usize,
}

fn setup_for(nodes: usize) -> Setup {
    let topo = planner::pipeline::load_fixture("h200x2-nvswitch-vm").expect("committed fixture");
    let mut cluster = Cluster::single(topo);
    cluster.n_nodes = nodes;
    let (graphs, channels) =
        planner::pipeline::graphs_for(&cluster, &NcclEnv::default(), false, None)
            .expect("the fixture searches");
    Setup {
        cluster,
        graphs,
        channels,
    }
}

/// One node (`multi` false) or two.
pub fn setup(multi: bool) -> &'static Setup {
    static ONE: OnceLock<Setup> = OnceLock::new();
    static TWO: OnceLock<Setup> = OnceLock::new();
    if multi {
        TWO.get_or_init(|| setup_for(2))
    } else {
        ONE.get_or_init(|| setup_for(1))
    }
}

/// NCCL's model for the fixture under `env` and `table` (the newest built-in one when None).
pub fn model(
    multi: bool,
    env: NcclEnv,
    table: Option<planner::model::TuningTable>,
) -> Result<Model, planner::Error> {
    let s = setup(multi);
    let table = match table {
        Some(t) => t,
        None => planner::model::table::builtin(planner::model::table::newest_family())?,
    };
    planner::pipeline::model_from_graphs(
        &s.cluster,
        &s.graphs,
        s.channels,
        table,
        env,
        NvlsFlag::Auto,
    )
}

/// Ask `model` what NCCL would do for every collective at a few sizes: choice, costs, channels and threads.
pub fn exercise(model: &Model, sizes: &[u64]) {
    use planner::model::{Algo, Coll, Proto};
    for coll in Coll::ALL {
        for &bytes in sizes {
            let _ = model.choose(coll, bytes, 1);
            let _ = model.cost_table(coll, bytes, 1);
            for algo in Algo::ALL {
                for proto in Proto::ALL {
                    let _ = model.channels_threads(algo, proto, bytes);
                }
            }
        }
    }
}
