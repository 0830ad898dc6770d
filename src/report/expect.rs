//! `planner expect` output: nccl-tests' layout with the expected values (labelled expected, never measured), the
//! band from the class's cross-validated error, and what limits each; JSON and CSV rows with units in the keys.

use crate::expect::{fit::FitReport, Expected};
use crate::model::Coll;
use serde::Serialize;
use std::fmt::Write;

/// One row: what nccl-tests should print for one collective and size (NCCL's own pick, planner's expected time).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExpectRow {
    pub(crate) collective: String,
    pub(crate) size_bytes: u64,
    pub(crate) count: u64,
    #[serde(rename = "type")]
    pub(crate) dtype: &'static str,
    pub(crate) redop: &'static str,
    pub(crate) algorithm: String,
    pub(crate) protocol: String,
    pub(crate) channels: usize,
    pub(crate) expected_time_us: f64,
    pub(crate) expected_algbw_gbs: f64,
    pub(crate) expected_busbw_gbs: f64,
    pub(crate) expected_low_busbw_gbs: f64,
    pub(crate) expected_high_busbw_gbs: f64,
    pub(crate) expected_fastest_algorithm: String,
    pub(crate) expected_fastest_protocol: String,
    pub(crate) expected_fastest_time_us: f64,
    pub(crate) limit: String,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ExpectTable {
    pub(crate) model: &'static str,
    pub(crate) topology: String,
    pub(crate) n_ranks: usize,
    pub(crate) machine_class: String,
    pub(crate) launch: &'static str,
    /// GPUs one host thread drives (nccl-tests `-g`); under eager launch each further one adds its kernel launch.
    pub(crate) gpus_per_thread: usize,
    pub(crate) band_source: &'static str,
    pub(crate) rows: Vec<ExpectRow>,
}

const BAND_SOURCE: &str =
    "leave-one-machine-out |error| of the machine's class per size range (tuning-tables/expect/bands.json)";

impl ExpectTable {
    pub(crate) fn new(
        expected: &Expected,
        topology: &str,
        colls: &[Coll],
        sizes: &[u64],
    ) -> ExpectTable {
        let mut rows = Vec::new();
        for &coll in colls {
            for &size in sizes {
                let Some(e) = expected.nccl_pick(coll, size) else {
                    continue;
                };
                let fastest = expected.fastest(coll, size).unwrap_or_else(|| e.clone());
                // nccl-tests' count: elements of float per rank's buffer (the whole buffer / ranks for all-gather).
                let count = match coll {
                    Coll::AllGather | Coll::ReduceScatter => {
                        e.bytes / 4 / expected.n_ranks().max(1) as u64
                    }
                    _ => e.bytes / 4,
                };
                rows.push(ExpectRow {
                    collective: crate::exec::plan::coll_name(coll).to_string(),
                    size_bytes: e.bytes,
                    count,
                    dtype: "float",
                    redop: match coll {
                        Coll::AllGather | Coll::Broadcast => "none",
                        _ => "sum",
                    },
                    algorithm: e.algo.nccl_name().to_string(),
                    protocol: e.proto.nccl_name().to_string(),
                    channels: e.channels,
                    expected_time_us: e.expected_time_us,
                    expected_algbw_gbs: e.expected_algbw_gbs,
                    expected_busbw_gbs: e.expected_busbw_gbs,
                    expected_low_busbw_gbs: e.expected_low_busbw_gbs,
                    expected_high_busbw_gbs: e.expected_high_busbw_gbs,
                    expected_fastest_algorithm: fastest.algo.nccl_name().to_string(),
                    expected_fastest_protocol: fastest.proto.nccl_name().to_string(),
                    expected_fastest_time_us: fastest.expected_time_us,
                    limit: e.limit.describe(),
                });
            }
        }
        ExpectTable {
            model: "planner's expected model (a simulation of NCCL's pick on this machine's links; not NCCL's estimate, not a measurement)",
            topology: topology.to_string(),
            n_ranks: expected.n_ranks(),
            machine_class: expected.class().name.clone(),
            launch: expected.launch().name(),
            gpus_per_thread: expected.gpus_per_thread(),
            band_source: BAND_SOURCE,
            rows,
        }
    }
}

fn two(v: f64) -> String {
    if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// nccl-tests' layout, every value column marked expected.
pub(crate) fn text(t: &ExpectTable) -> String {
    let mut s = String::new();
    let threads = if t.gpus_per_thread > 1 {
        format!(
            ", {} GPUs per thread as nccl-tests -g {}",
            t.gpus_per_thread, t.gpus_per_thread
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "# planner expect: what nccl-tests should print on {} ({} ranks, class {}, {} launch{threads})",
        t.topology, t.n_ranks, t.machine_class, t.launch
    );
    let _ = writeln!(
        s,
        "# expected = planner's model of NCCL's own pick on these links (not NCCL's estimate); band = {BAND_SOURCE}"
    );
    let mut current = String::new();
    for r in &t.rows {
        if r.collective != current {
            current = r.collective.clone();
            let _ = writeln!(s, "#\n# {}_perf", r.collective);
            let _ = writeln!(
                s,
                "# {:>12} {:>12} {:>6} {:>6}  {:<13} {:>10} {:>9} {:>9}  {:>17}  limit",
                "size",
                "count",
                "type",
                "redop",
                "algo/proto",
                "exp time",
                "exp algbw",
                "exp busbw",
                "busbw band"
            );
            let _ = writeln!(
                s,
                "# {:>12} {:>12} {:>6} {:>6}  {:<13} {:>10} {:>9} {:>9}  {:>17}",
                "(B)", "(elements)", "", "", "(NCCL's pick)", "(us)", "(GB/s)", "(GB/s)", "(GB/s)"
            );
        }
        let pair = format!("{}/{}", r.algorithm, r.protocol);
        let band = format!(
            "{}-{}",
            two(r.expected_low_busbw_gbs),
            two(r.expected_high_busbw_gbs)
        );
        let mut limit = r.limit.clone();
        if r.expected_fastest_algorithm != r.algorithm || r.expected_fastest_protocol != r.protocol
        {
            let _ = write!(
                limit,
                "; expected fastest {}/{} {} us",
                r.expected_fastest_algorithm,
                r.expected_fastest_protocol,
                two(r.expected_fastest_time_us)
            );
        }
        let _ = writeln!(
            s,
            "  {:>12} {:>12} {:>6} {:>6}  {:<13} {:>10} {:>9} {:>9}  {:>17}  {}",
            r.size_bytes,
            r.count,
            r.dtype,
            r.redop,
            pair,
            two(r.expected_time_us),
            two(r.expected_algbw_gbs),
            two(r.expected_busbw_gbs),
            band,
            limit
        );
    }
    s
}

pub(crate) fn csv(t: &ExpectTable) -> String {
    let mut s = String::from(
        "collective,size_bytes,count,type,redop,algorithm,protocol,channels,expected_time_us,expected_algbw_gbs,\
         expected_busbw_gbs,expected_low_busbw_gbs,expected_high_busbw_gbs,expected_fastest_algorithm,\
         expected_fastest_protocol,expected_fastest_time_us,limit\n",
    );
    for r in &t.rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{:.3},{:.3},{:.3},{:.3},{:.3},{},{},{:.3},\"{}\"",
            r.collective,
            r.size_bytes,
            r.count,
            r.dtype,
            r.redop,
            r.algorithm,
            r.protocol,
            r.channels,
            r.expected_time_us,
            r.expected_algbw_gbs,
            r.expected_busbw_gbs,
            r.expected_low_busbw_gbs,
            r.expected_high_busbw_gbs,
            r.expected_fastest_algorithm,
            r.expected_fastest_protocol,
            r.expected_fastest_time_us,
            r.limit.replace('"', "'")
        );
    }
    s
}

/// The fit's error tables: per class and size range, training set and leave-one-machine-out.
pub(crate) fn fit_text(r: &FitReport) -> String {
    r.text()
}
