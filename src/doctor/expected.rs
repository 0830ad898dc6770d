//! The NCCL sweep's expectation from planner's expected model (`crate::expect`): all-reduce at NCCL's own pick,
//! with the band of the machine's class (the cross-validated error of that class).

use super::judge::NcclExpectation;
use crate::error::Result;
use crate::expect::{self, ExpectOptions, Expected};
use crate::model::input::NvlsFlag;
use crate::model::Coll;
use crate::pipeline::Source;

pub(crate) struct ExpectedAllReduce {
    expected: Expected,
}

impl ExpectedAllReduce {
    /// The expected model of the live machine (the probe, as `planner expect` without flags sees it), for
    /// `nodes` nodes. None when the probe gives no topology.
    pub(crate) fn of_live_machine(
        nodes: usize,
        nccl_version: Option<&str>,
    ) -> Result<Option<ExpectedAllReduce>> {
        let source = Source {
            nodes: nodes.max(1),
            nccl_env: crate::nccl_env::NcclEnv::from_process()?,
            ..Default::default()
        };
        let Some(cluster) = source.load_machine()? else {
            return Ok(None);
        };
        let table = crate::pipeline::choose_table(None, nccl_version, None)?;
        let (_, expected) = expect::build(
            &cluster,
            None,
            table,
            source.nccl_env.clone(),
            NvlsFlag::Auto,
            &ExpectOptions::default(),
        )?;
        Ok(Some(ExpectedAllReduce { expected }))
    }
}

impl NcclExpectation for ExpectedAllReduce {
    fn label(&self) -> String {
        format!(
            "planner's expected model ({}), at NCCL's pick",
            self.expected.class().name
        )
    }

    fn all_reduce_busbw_gbs(&self, bytes: u64, ranks: usize) -> Option<(f64, f64, f64)> {
        if ranks != self.expected.n_ranks() {
            return None;
        }
        let e = self.expected.nccl_pick(Coll::AllReduce, bytes)?;
        Some((
            e.expected_busbw_gbs,
            e.expected_low_busbw_gbs,
            e.expected_high_busbw_gbs,
        ))
    }
}
