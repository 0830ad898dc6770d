//! A small recorded verify run shared by the tests, every number chosen so
//! that the scoring can be worked out by hand (see `recorded_run`).

#![allow(dead_code)]

use planner::model::{Algo, Coll, Proto};
use planner::verify::{
    Backend, Dtype, Fingerprint, GpuInfo, IterPlan, NcclChoice, Pair, Row, RowStatus, RunOptions,
    VerifyRun, RESULT_FORMAT, RESULT_VERSION,
};

pub const KIB: u64 = 1024;
pub const MIB: u64 = 1 << 20;

pub fn ring_ll() -> Pair {
    Pair::new(Algo::Ring, Proto::Ll)
}
pub fn ring_simple() -> Pair {
    Pair::new(Algo::Ring, Proto::Simple)
}
pub fn tree_ll() -> Pair {
    Pair::new(Algo::Tree, Proto::Ll)
}

fn row(
    backend: Backend,
    pair: Option<Pair>,
    bytes: u64,
    times: &[f64],
    predicted: Option<f64>,
) -> Row {
    let mut r = Row::empty(backend, pair, bytes, RowStatus::Ok);
    r.iters = 20;
    r.repeats = times.len() as u32;
    r.times_us = times.to_vec();
    r.wrong = Some(0);
    r.predicted_us = predicted;
    r.derive_stats();
    r
}

fn choice(pair: Pair) -> Option<NcclChoice> {
    Some(NcclChoice {
        pair,
        channel_lo: 0,
        channel_hi: 23,
    })
}

/// The recorded run:
///
/// NCCL, medians of the repeats (predictions recorded in brackets):
///   1 KiB : Ring/LL 11 [9.9]   Ring/Simple 21 [25.2]  Tree/LL 13 [11.7]   NCCL chose Ring/LL
///   1 MiB : Ring/LL 40 [36]    Ring/Simple 30 [39]    Tree/LL 50 [55]     NCCL chose Ring/LL
///   64 MiB: Ring/LL 400 [480]  Ring/Simple 200 [190]  Tree/LL unavailable NCCL chose Ring/Simple
/// native (same predictions): 1 KiB Ring/LL 22; 1 MiB Ring/LL 40, Ring/Simple 27;
///   64 MiB Ring/LL 360, Ring/Simple 220.
pub fn recorded_run() -> VerifyRun {
    use Backend::{Native, Nccl};
    let mut rows = vec![
        row(Nccl, Some(ring_ll()), KIB, &[10.0, 12.0, 11.0], Some(9.9)),
        row(
            Nccl,
            Some(ring_simple()),
            KIB,
            &[20.0, 22.0, 21.0],
            Some(25.2),
        ),
        row(Nccl, Some(tree_ll()), KIB, &[12.0, 13.0, 14.0], Some(11.7)),
        row(Nccl, Some(ring_ll()), MIB, &[40.0, 40.0, 40.0], Some(36.0)),
        row(
            Nccl,
            Some(ring_simple()),
            MIB,
            &[30.0, 31.0, 29.0],
            Some(39.0),
        ),
        row(Nccl, Some(tree_ll()), MIB, &[50.0], Some(55.0)),
        row(Nccl, Some(ring_ll()), 64 * MIB, &[400.0], Some(480.0)),
        row(Nccl, Some(ring_simple()), 64 * MIB, &[200.0], Some(190.0)),
        row(Nccl, None, KIB, &[11.5], None),
        row(Nccl, None, MIB, &[40.5], None),
        row(Nccl, None, 64 * MIB, &[201.0], None),
        row(Native, Some(ring_ll()), KIB, &[22.0], Some(9.9)),
        row(Native, Some(ring_ll()), MIB, &[40.0], Some(36.0)),
        row(Native, Some(ring_simple()), MIB, &[27.0], Some(39.0)),
        row(Native, Some(ring_ll()), 64 * MIB, &[360.0], Some(480.0)),
        row(Native, Some(ring_simple()), 64 * MIB, &[220.0], Some(190.0)),
    ];
    let mut unavailable = Row::empty(Nccl, Some(tree_ll()), 64 * MIB, RowStatus::Unavailable);
    unavailable.note = Some("NCCL refuses it: ncclInvalidUsage".into());
    rows.push(unavailable);
    rows[8].nccl_choice = choice(ring_ll());
    rows[9].nccl_choice = choice(ring_ll());
    rows[10].nccl_choice = choice(ring_simple());
    VerifyRun {
        format: RESULT_FORMAT.into(),
        version: RESULT_VERSION,
        planner_version: "test".into(),
        created_unix: 1_700_000_000,
        machine: Fingerprint {
            hosts: vec!["gpu-host".into()],
            gpus: (0..2)
                .map(|rank| GpuInfo {
                    rank,
                    host: "gpu-host".into(),
                    name: "NVIDIA H200".into(),
                    bus_id: format!("0000:{:02x}:00.0", 0x60 + 0x10 * rank),
                    compute_capability: "9.0".into(),
                    memory_bytes: 150_754_820_096,
                })
                .collect(),
            driver_version: Some("580.159.04".into()),
            cuda_version: Some("13.0".into()),
            nccl_version: Some("2.28.3".into()),
            world_size: 2,
            processes: 1,
            topology_source: "test".into(),
            topology_hash: "0123456789abcdef".into(),
            topology_xml: None,
            nodes: 1,
            net_latency_us: 0.0,
            nccl_topology_xml: None,
            nccl_graph_xml: None,
            links: None,
        },
        options: RunOptions {
            collective: Coll::AllReduce,
            dtype: Dtype::F32,
            sizes: vec![KIB, MIB, 64 * MIB],
            pairs: "Ring/LL,Ring/Simple,Tree/LL".into(),
            backends: vec![Native, Nccl],
            plan: IterPlan::default(),
            graph: false,
            timeout_s: 60,
            launch: "one process".into(),
            model: Some("hand-made predictions".into()),
        },
        rows,
    }
}
