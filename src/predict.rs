//! The seam between the models and the measurements: a `Predictor` says what a pair should take at a size
//! (`ModelPredictor`: NCCL's model as verify runs it; `NoModel`). `verify` scores runs against one,
//! `calibrate` rescales one, `tune` asks one; none of them needs the others for it.

use crate::dtype::Dtype;
use crate::measure::{logged_bytes, Backend, Row};
use crate::model::symmetric::{
    symmetric_candidates, PeerPath, SymDtype, SymmetricInput, SymmetricTable,
};
use crate::model::{Coll, Pair, Proto};
use serde::Serialize;

/// Where predictions come from: the current model, or what a result file recorded.
pub trait Predictor {
    /// "stock model (nccl-2.28 tables)", "recorded in the file", ...
    fn label(&self) -> String;
    /// Predicted time in µs; None when the model masks the pair.
    fn predict_us(&self, collective: Coll, pair: Pair, bytes: u64) -> Option<f64>;
    /// The model's choice at this size.
    fn pick(&self, collective: Coll, bytes: u64) -> Option<Pair>;
    /// NCCL's path on symmetric windows (the `symm` row of backend
    /// nccl-symm): the kernel NCCL's own symmetric model picks at this size
    /// (`classic ALGO/PROTO` where NCCL would take its classic path) and its
    /// time. None where the model cannot say.
    fn predict_symmetric(
        &self,
        _collective: Coll,
        _dtype: Dtype,
        _bytes: u64,
    ) -> Option<SymmetricPrediction> {
        None
    }
    /// Where `predict_symmetric` comes from, when it says anything.
    fn symmetric_label(&self) -> Option<String> {
        None
    }
}

/// The model's word on the `symm` row at one size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SymmetricPrediction {
    /// NCCL's kernel name (`AllReduce_AGxLL_R`), or `classic Ring/LL`.
    pub kernel: String,
    pub time_us: f64,
}

/// The prediction of one row: a pinned pair's time, or for the `symm` row
/// the symmetric model's kernel and time; NCCL's free choice (`auto`,
/// `tuned`) gets none.
pub(crate) fn predict_row(
    predictor: &dyn Predictor,
    collective: Coll,
    dtype: Dtype,
    row: &Row,
) -> (Option<f64>, Option<String>) {
    match row.pair {
        Some(pair) => (predictor.predict_us(collective, pair, row.bytes), None),
        None if row.backend == Backend::NcclSymm => {
            match predictor.predict_symmetric(collective, dtype, row.bytes) {
                Some(p) => (Some(p.time_us), Some(p.kernel)),
                None => (None, None),
            }
        }
        None => (None, None),
    }
}

/// No model available: rows keep no prediction.
pub(crate) struct NoModel;

impl Predictor for NoModel {
    fn label(&self) -> String {
        "no model".into()
    }
    fn predict_us(&self, _: Coll, _: Pair, _: u64) -> Option<f64> {
        None
    }
    fn pick(&self, _: Coll, _: u64) -> Option<Pair> {
        None
    }
}

// ---------------------------------------------------------------------------
// The current model as a predictor.

/// NCCL's model as verify runs it: the pick comes from the model with NCCL's
/// defaults; the time of a pinned pair from the model with that pair pinned
/// (`NCCL_ALGO`/`NCCL_PROTO`, as the child that measured it), so a protocol
/// NCCL enables only on request (LL128 on some machines) still gets its time.
/// NVLS is off, as on every run.
pub struct ModelPredictor {
    base: crate::model::Model,
    pinned: std::cell::RefCell<std::collections::HashMap<Pair, Option<crate::model::Model>>>,
    label: String,
    /// NCCL's symmetric-kernel model for the `symm` rows (None: no table
    /// for this NCCL, or the GPUs' architecture is unknown).
    symmetric: Option<SymmetricContext>,
}

/// What NCCL's symmetric-kernel model needs besides the call.
struct SymmetricContext {
    table: SymmetricTable,
    compute_capability: u32,
    peers: PeerPath,
    n_nodes: usize,
}

/// The symmetric-kernel table for an NCCL version: its own family, else the
/// newest older one; None for an NCCL older than every table (2.27 has
/// symmetric kernels of another menu). No version: the newest table.
fn symmetric_family(nccl_version: Option<&str>) -> Option<&'static str> {
    let mut families = crate::model::symmetric::EMBEDDED.iter().map(|(f, _)| *f);
    let key = |f: &str| -> (u32, u32) {
        let mut it = f.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (it.next().unwrap_or(0), it.next().unwrap_or(0))
    };
    let Some(version) = nccl_version else {
        return families.next_back();
    };
    let wanted = key(&crate::model::table::family_of(version).ok()?);
    families.rfind(|f| key(f) <= wanted)
}

/// How every pair of GPUs reaches each other, for the symmetric model: all
/// NVLink (NCCL's `PATH_NVL`), else peer-to-peer up to `PATH_PXB` (NCCL's
/// default P2P level without NVLink), else none.
fn peer_path(topo: &crate::topo::Topology) -> PeerPath {
    use crate::topo::PathType;
    let gpus: Vec<_> = topo.gpus().map(|(i, _)| i).collect();
    let mut worst = PathType::Loc;
    for &a in &gpus {
        for &b in gpus.iter().filter(|b| **b != a) {
            let ptype = topo.path(a, b).map_or(PathType::Dis, |p| p.ptype);
            worst = worst.max(ptype);
        }
    }
    if worst <= PathType::Nvl {
        PeerPath::NvLink
    } else if worst <= PathType::Pxb {
        PeerPath::P2p
    } else {
        PeerPath::NoP2p
    }
}

fn sym_dtype(dtype: Dtype) -> SymDtype {
    match dtype {
        Dtype::F32 => SymDtype::F32,
        Dtype::Bf16 => SymDtype::Bf16,
        Dtype::F16 => SymDtype::F16,
    }
}

impl ModelPredictor {
    /// `graph_xml`: NCCL's graph dump, used when the planner's own search
    /// cannot run on this topology. `nccl_version` picks the tuning table.
    pub fn new(
        cluster: &crate::topo::Cluster,
        graph_xml: Option<&str>,
        nccl_version: Option<&str>,
    ) -> crate::error::Result<ModelPredictor> {
        use crate::model::{input::NvlsFlag, table, Model, ModelInput};
        use crate::nccl_env::NcclEnv;
        let family = match nccl_version.and_then(|v| table::family_of(v).ok()) {
            Some(f) => {
                let mut it = f.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
                let (major, minor) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
                table::nearest_family(major, minor).0
            }
            None => table::newest_family(),
        };
        let table = table::builtin(family)?;
        let mut env = NcclEnv::from_process()?;
        env.algo = None;
        env.proto = None;
        env.nvls_enable = Some(0);
        let nvls = ModelInput::nvls_request(cluster, &env, NvlsFlag::Off);
        // The NCCL children run under this environment: its search and channel knobs apply.
        let bounds = env.channel_bounds();
        let opts = crate::search::SearchOptions {
            nvls: false,
            collnet: false,
            cross_nic: env.cross_nic_param(),
            max_channels: bounds.max,
            min_channels: bounds.min,
            family: table.version,
        };
        let (result, graphs_from) = match crate::search::search(cluster, &opts) {
            Ok(r) => (r, "the planner's search"),
            Err(search_error) => match graph_xml {
                Some(xml) => {
                    let source = "NCCL's graph dump";
                    let root = crate::xml::parse(xml, source)?;
                    let sys = crate::search::search_system(cluster)?;
                    let presets = crate::search::graph_xml::parse_graphs(&root, &sys, source)?;
                    let r = crate::search::search_with_presets(cluster, &opts, &presets)?;
                    (r, "NCCL's graph dump")
                }
                None => return Err(search_error),
            },
        };
        let input = ModelInput::from_search(cluster, &result, &env, nvls, &table)?;
        let base = Model::new(input, env, table)?;
        let compute_capability = cluster.node.sm_range().0;
        let symmetric = symmetric_family(nccl_version)
            .and_then(|f| SymmetricTable::builtin(f).ok())
            .filter(|_| compute_capability > 0)
            .map(|table| SymmetricContext {
                table,
                compute_capability,
                peers: peer_path(&cluster.node),
                n_nodes: cluster.n_nodes.max(1),
            });
        Ok(ModelPredictor {
            base,
            pinned: Default::default(),
            label: format!(
                "stock model (nccl-{family} table, topology {}, graphs from {graphs_from})",
                cluster.node.source
            ),
            symmetric,
        })
    }

    /// NCCL's classic pick and its time, as the `symm` row's prediction
    /// where NCCL would leave the symmetric path.
    fn classic(&self, collective: Coll, bytes: u64) -> Option<SymmetricPrediction> {
        let eval = ModelPredictor::evaluate(&self.base, collective, bytes)?;
        let w = eval.winner();
        Some(SymmetricPrediction {
            kernel: format!("classic {}", Pair::new(w.algo, w.proto)),
            time_us: w.time_us as f64,
        })
    }

    fn evaluate(
        model: &crate::model::Model,
        collective: Coll,
        bytes: u64,
    ) -> Option<crate::model::Evaluation> {
        let call =
            crate::model::select::Call::new(collective, bytes, model.input.n_ranks, 1).ok()?;
        model.evaluate(&call).ok()
    }
}

impl Predictor for ModelPredictor {
    fn label(&self) -> String {
        self.label.clone()
    }
    fn predict_us(&self, collective: Coll, pair: Pair, bytes: u64) -> Option<f64> {
        // NCCL's model has no cell for planner's own algorithms.
        let (algo, proto) = pair.nccl()?;
        let mut cache = self.pinned.borrow_mut();
        let model = cache.entry(pair).or_insert_with(|| {
            let mut env = self.base.env.clone();
            env.algo = Some(algo.nccl_name().to_string());
            env.proto = Some(proto.nccl_name().to_string());
            crate::model::Model::new(self.base.input.clone(), env, self.base.table.clone()).ok()
        });
        let eval = ModelPredictor::evaluate(model.as_ref()?, collective, bytes)?;
        eval.candidates
            .iter()
            .find(|c| c.algo == algo && c.proto == proto && c.usable())
            .map(|c| c.time_us as f64)
    }
    fn pick(&self, collective: Coll, bytes: u64) -> Option<Pair> {
        let eval = ModelPredictor::evaluate(&self.base, collective, bytes)?;
        let w = eval.winner();
        Some(Pair::new(w.algo, w.proto))
    }
    fn predict_symmetric(
        &self,
        collective: Coll,
        dtype: Dtype,
        bytes: u64,
    ) -> Option<SymmetricPrediction> {
        let ctx = self.symmetric.as_ref()?;
        let n_ranks = self.base.input.n_ranks;
        // The symmetric model counts bytes as NCCL logs them (one rank's
        // share for all-gather and reduce-scatter).
        let logged = logged_bytes(collective, bytes, n_ranks);
        if logged == 0 {
            return None;
        }
        let mut input = SymmetricInput::new(collective, logged, n_ranks, ctx.compute_capability);
        input.dtype = sym_dtype(dtype);
        input.peers = ctx.peers;
        input.n_nodes = ctx.n_nodes;
        let choice = symmetric_candidates(&input, &ctx.table).ok()?;
        match choice.runs_symmetric() {
            // 2.30 with one buffer registered runs an LL pick only when the
            // classic model picks LL too; both buffers are registered here,
            // but keep NCCL's rule.
            Some(_)
                if choice.only_if_classic_picks_ll
                    && self.pick(collective, bytes).map(|p| p.proto) != Some(Proto::Ll) =>
            {
                self.classic(collective, bytes)
            }
            Some(kernel) => Some(SymmetricPrediction {
                kernel: kernel.kernel.clone(),
                time_us: kernel.time_us? as f64,
            }),
            None => self.classic(collective, bytes),
        }
    }
    fn symmetric_label(&self) -> Option<String> {
        let ctx = self.symmetric.as_ref()?;
        let peers = match ctx.peers {
            PeerPath::NvLink => "NVLink",
            PeerPath::P2p => "P2P",
            PeerPath::NoP2p => "no P2P",
        };
        Some(format!(
            "NCCL's symmetric-kernel model ({} table, sm {}, {peers} between every GPU pair, NVLS off)",
            ctx.table.family(),
            ctx.compute_capability,
        ))
    }
}
