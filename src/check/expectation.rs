//! Where `check`'s bands come from: one narrow trait, so the comparison and the causes do not depend on how the
//! expectation is computed.

use crate::error::Result;
use crate::model::{Coll, Pair};
use crate::topo::Cluster;
use serde::Serialize;

/// What the machine should deliver for one collective and size.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpectedBand {
    /// The pair the expectation is for: the pinned one, else the one NCCL would pick.
    pub pair: String,
    pub expected_time_us: f64,
    #[serde(rename = "expected_busbw_gbs")]
    pub busbw_gbs: f64,
    #[serde(rename = "expected_low_busbw_gbs")]
    pub low_busbw_gbs: f64,
    #[serde(rename = "expected_high_busbw_gbs")]
    pub high_busbw_gbs: f64,
    /// What limits it (a link, latency), where the model says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<String>,
}

/// The expectation of one machine.
pub trait BandSource {
    /// Which model, for the report (`planner's expected model, class ...`).
    fn name(&self) -> String;
    /// The expectation for `bytes` (nccl-tests' size) of `coll`, run with `pair` (None: NCCL's free choice).
    /// None where the model has no figure (a pair that cannot run here).
    fn expected(&self, coll: Coll, bytes: u64, pair: Option<Pair>) -> Result<Option<ExpectedBand>>;
}

/// The expectation `check` uses on `cluster`, for the NCCL version the files name.
pub fn for_machine(cluster: &Cluster, nccl_version: Option<&str>) -> Result<Box<dyn BandSource>> {
    Ok(Box::new(NcclModel::new(cluster, nccl_version)?))
}

/// NCCL's own cost model with a fixed band (until the expected model is merged).
struct NcclModel {
    model: crate::model::Model,
    n_ranks: usize,
}

impl NcclModel {
    fn new(cluster: &Cluster, nccl_version: Option<&str>) -> Result<NcclModel> {
        let table = crate::pipeline::choose_table(None, None, nccl_version.or(Some("2.28")))?;
        let model = crate::pipeline::build_model(
            cluster,
            None,
            table,
            crate::nccl_env::NcclEnv::default(),
            crate::model::input::NvlsFlag::Auto,
        )?;
        Ok(NcclModel {
            model,
            n_ranks: cluster.n_ranks(),
        })
    }
}

impl BandSource for NcclModel {
    fn name(&self) -> String {
        "NCCL's cost model".into()
    }
    fn expected(&self, coll: Coll, bytes: u64, pair: Option<Pair>) -> Result<Option<ExpectedBand>> {
        let call = crate::model::select::Call::new(coll, bytes, self.n_ranks, 1)?;
        let eval = self.model.evaluate(&call)?;
        let cand = match pair {
            Some(p) => eval
                .candidates
                .iter()
                .find(|c| c.algo == p.algo && c.proto == p.proto && c.usable()),
            None => Some(eval.winner()),
        };
        Ok(cand.map(|c| {
            let t = c.time_us as f64;
            let busbw = bytes as f64 / (t * 1e3) * coll.nccl_tests_bus_factor(self.n_ranks);
            ExpectedBand {
                pair: Pair::new(c.algo, c.proto).to_string(),
                expected_time_us: t,
                busbw_gbs: busbw,
                low_busbw_gbs: busbw * 0.8,
                high_busbw_gbs: busbw * 1.2,
                limited_by: None,
            }
        }))
    }
}
