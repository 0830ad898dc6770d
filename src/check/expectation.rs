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
    pub(crate) pair: String,
    pub(crate) expected_time_us: f64,
    #[serde(rename = "expected_busbw_gbs")]
    pub(crate) busbw_gbs: f64,
    #[serde(rename = "expected_low_busbw_gbs")]
    pub(crate) low_busbw_gbs: f64,
    #[serde(rename = "expected_high_busbw_gbs")]
    pub(crate) high_busbw_gbs: f64,
    /// What limits it (a link, latency), where the model says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) limited_by: Option<String>,
}

/// The expectation of one machine.
pub trait BandSource {
    /// Which model, for the report (`planner's expected model, class ...`).
    fn name(&self) -> String;
    /// The expectation for `bytes` (nccl-tests' size) of `coll`, run with `pair` (None: NCCL's free choice).
    /// None where the model has no figure (a pair that cannot run here).
    fn expected(&self, coll: Coll, bytes: u64, pair: Option<Pair>) -> Result<Option<ExpectedBand>>;
}

/// The expectation `check` uses on `cluster`: planner's expected model (`crate::expect`) on the plan NCCL's search
/// finds, with NCCL's defaults and the tuning table of the NCCL version the files name (else the newest).
/// `pins` are the run's NCCL_ALGO / NCCL_PROTO (from its log or command line): NCCL's pick under them.
pub(crate) fn for_machine(
    cluster: &Cluster,
    nccl_version: Option<&str>,
    pins: &[(String, String)],
    options: &crate::expect::ExpectOptions,
) -> Result<Box<dyn BandSource>> {
    Ok(Box::new(ExpectedModel::new(
        cluster,
        nccl_version,
        pins,
        options,
    )?))
}

/// `crate::expect`'s model: NCCL's pick (or the pinned pair) at the expected time, with the class's band.
struct ExpectedModel {
    expected: crate::expect::Expected,
}

impl ExpectedModel {
    fn new(
        cluster: &Cluster,
        nccl_version: Option<&str>,
        pins: &[(String, String)],
        options: &crate::expect::ExpectOptions,
    ) -> Result<ExpectedModel> {
        let env = crate::nccl_env::NcclEnv::from_pairs(pins.iter().cloned());
        let table = crate::pipeline::choose_table(
            None,
            None,
            Some(nccl_version.unwrap_or(crate::model::table::newest_family())),
        )?;
        let (_model, expected) = crate::expect::build(
            cluster,
            None,
            table,
            env,
            crate::model::input::NvlsFlag::Auto,
            options,
        )?;
        Ok(ExpectedModel { expected })
    }
}

impl BandSource for ExpectedModel {
    fn name(&self) -> String {
        let threads = match self.expected.gpus_per_thread() {
            1 => String::new(),
            n => format!(", {n} GPUs per thread as nccl-tests -g {n}"),
        };
        format!(
            "planner's expected model (machine class {}, {} launch{threads})",
            self.expected.class().name,
            self.expected.launch().name()
        )
    }
    fn expected(&self, coll: Coll, bytes: u64, pair: Option<Pair>) -> Result<Option<ExpectedBand>> {
        let e = match pair {
            // planner's own pairs have no expectation (NCCL never runs them).
            Some(p) => p
                .nccl()
                .and_then(|(algo, proto)| self.expected.expect(coll, algo, proto, bytes)),
            None => self.expected.nccl_pick(coll, bytes),
        };
        Ok(
            e.filter(|e| e.expected_busbw_gbs.is_finite() && e.expected_busbw_gbs > 0.0)
                .map(|e| ExpectedBand {
                    pair: Pair::new(e.algo, e.proto).to_string(),
                    expected_time_us: e.expected_time_us,
                    busbw_gbs: e.expected_busbw_gbs,
                    low_busbw_gbs: e.expected_low_busbw_gbs,
                    high_busbw_gbs: e.expected_high_busbw_gbs,
                    limited_by: Some(e.limit.describe()),
                }),
        )
    }
}
