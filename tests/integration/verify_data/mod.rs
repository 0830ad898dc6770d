//! A small recorded verify run shared by the tests, every number chosen so
//! that the scoring can be worked out by hand (see `recorded_run`).

#![allow(dead_code)]

use planner::dtype::Dtype;
use planner::measure::Backend;
use planner::measure::{
    GpuInfo, IterPlan, NcclChoice, Row, RowStatus, SymmetricLaunch, TunerDecision,
};
use planner::model::Pair;
use planner::model::{Algo, Coll, Proto};
use planner::result_file::{
    Fingerprint, RunOptions, TunerRecord, VerifyRun, RESULT_FORMAT, RESULT_VERSION,
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
            tuner: None,
        },
        rows,
        complete: true,
        stopped: None,
    }
}

/// A recorded `verify --backend nccl,nccl-symm --tuner plan.json` run, by hand.
///
/// Medians (µs); `auto` and `tuned` say what NCCL ran, `symm` the kernel and the
/// recorded prediction [kernel, µs]:
///
/// | size   | Ring/LL | Ring/Simple | auto             | tuned                       | symm                                   |
/// |--------|---------|-------------|------------------|-----------------------------|----------------------------------------|
/// | 64 KiB | 8.1     | 12          | 8.0 Ring/LL      | 8.4 Ring/LL, kept (no rule) | 9.0 AGxLL_R [AGxLL_R 7.2]               |
/// | 1 MiB  | 16.2    | 22          | 20.0 Ring/LL     | 16.0 Ring/LL, rule 0        | 12.0 RSxLD_AGxST [RSxLD_AGxST 13.2]     |
/// | 2 MiB  | 20.5    | 28.5        | 28.8 Ring/Simple | 20.0 Ring/LL, rule 0        | 18.0 RSxLD_AGxST [RSxLD_AGxST 19.8]     |
/// | 4 MiB  | 36      | 32.5        | 32.0 Ring/Simple | 32.0 Ring/Simple, kept      | 30.0 RSxLD_AGxST [AGxLL_R 25.0]         |
/// | 64 MiB | 400     | 199         | 200 Ring/Simple  | 212 Ring/Simple, kept       | 260 classic Ring/Simple [RSxLD_AGxST 240] |
///
/// tuned / auto: 1.05, 0.8, 0.69444, 1.0, 1.06; symm / auto: 1.125, 0.6, 0.625, 0.9375, 1.3.
/// symm error: -20%, +10%, +10%, -16.67%, -7.69%.
pub fn tuned_symm_run() -> VerifyRun {
    use Backend::{Nccl, NcclSymm};
    let sizes = [64 * KIB, MIB, 2 * MIB, 4 * MIB, 64 * MIB];
    let ring_ll_us = [8.1, 16.2, 20.5, 36.0, 400.0];
    let ring_ll_pred = [7.9, 17.0, 21.0, 37.0, 390.0];
    let ring_simple_us = [12.0, 22.0, 28.5, 32.5, 199.0];
    let ring_simple_pred = [13.0, 23.0, 29.0, 33.0, 195.0];
    let auto_us = [8.0, 20.0, 28.8, 32.0, 200.0];
    let auto_pair = [
        ring_ll(),
        ring_ll(),
        ring_simple(),
        ring_simple(),
        ring_simple(),
    ];
    let tuned_us = [8.4, 16.0, 20.0, 32.0, 212.0];
    let tuned_pair = [
        ring_ll(),
        ring_ll(),
        ring_ll(),
        ring_simple(),
        ring_simple(),
    ];
    let steered = [false, true, true, false, false];
    let symm_us = [9.0, 12.0, 18.0, 30.0, 260.0];
    let symm_kernel = [
        Some("AllReduce_AGxLL_R"),
        Some("AllReduce_RSxLD_AGxST"),
        Some("AllReduce_RSxLD_AGxST"),
        Some("AllReduce_RSxLD_AGxST"),
        None,
    ];
    let symm_pred = [7.2, 13.2, 19.8, 25.0, 240.0];
    let symm_pred_kernel = [
        "AllReduce_AGxLL_R",
        "AllReduce_RSxLD_AGxST",
        "AllReduce_RSxLD_AGxST",
        "AllReduce_AGxLL_R",
        "AllReduce_RSxLD_AGxST",
    ];
    let mut rows = Vec::new();
    for (i, &bytes) in sizes.iter().enumerate() {
        rows.push(row(
            Nccl,
            Some(ring_ll()),
            bytes,
            &[ring_ll_us[i]],
            Some(ring_ll_pred[i]),
        ));
        rows.push(row(
            Nccl,
            Some(ring_simple()),
            bytes,
            &[ring_simple_us[i]],
            Some(ring_simple_pred[i]),
        ));
        let mut auto = row(Nccl, None, bytes, &[auto_us[i]], None);
        auto.nccl_choice = choice(auto_pair[i]);
        rows.push(auto);
        let mut tuned = row(Nccl, None, bytes, &[tuned_us[i]], None);
        tuned.tuned = true;
        tuned.nccl_choice = choice(tuned_pair[i]);
        tuned.tuner_decision = Some(if steered[i] {
            TunerDecision::Steered {
                pair: ring_ll(),
                channels: None,
                rule: 0,
            }
        } else {
            TunerDecision::Kept {
                why: "no rule".into(),
            }
        });
        rows.push(tuned);
        let mut symm = row(NcclSymm, None, bytes, &[symm_us[i]], Some(symm_pred[i]));
        symm.predicted_kernel = Some(symm_pred_kernel[i].into());
        match symm_kernel[i] {
            Some(kernel) => {
                symm.symmetric = Some(SymmetricLaunch {
                    kernel: kernel.into(),
                    channels: if i == 0 { 1 } else { 16 },
                    threads: 512,
                })
            }
            None => symm.nccl_choice = choice(ring_simple()),
        }
        rows.push(symm);
    }
    let mut run = recorded_run();
    run.rows = rows;
    run.options.sizes = sizes.to_vec();
    run.options.pairs = "Ring/LL,Ring/Simple".into();
    run.options.backends = vec![Nccl, NcclSymm];
    run.options.graph = true;
    run.options.tuner = Some(TunerRecord {
        plan_path: "/data/plan.json".into(),
        plan_hash: "f00dfeedcafe0042".into(),
        plugin_path: "/opt/planner/libnccl_tuner_planner.so".into(),
        plugin_log: vec![
            "Successfully loaded external tuner plugin /opt/planner/libnccl_tuner_planner.so".into(),
            "planner-tuner: plan /data/plan.json applies: 1 of 1 rules for nRanks 2 nNodes 1 (from verify verify.json, made with NCCL 2.28.3, running NCCL 2.28.3)".into(),
        ],
    });
    run
}
