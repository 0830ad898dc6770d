//! Tree correction (`ncclTopoGetAlgoTime`): Tree AllReduce bandwidth times
//! `treeCorrectionFactor[proto][log2(nBytes/64)]` for buckets 0..22 only.
//! Capture model: Tree AllReduce Simple algBw 232.2, latency 16.4 µs;
//! Tree LL algBw 61.1, latency 8.0 µs.

use crate::common::close;
use planner::model::examples::h200x2_capture;
use planner::model::{Algo, Coll, Model, Proto};
use planner::nccl_env::NcclEnv;

fn model(family: &str) -> Model {
    crate::common::model_of(h200x2_capture(), NcclEnv::default(), family)
}

fn tree_time(m: &Model, proto: Proto, bytes: u64) -> f64 {
    m.algo_time(Coll::AllReduce, Algo::Tree, proto, bytes, 1)
        .unwrap()
        .0 as f64
}

#[test]
fn tree_simple_buckets() {
    let m = model("2.28");
    let bw = m.tuned.bandwidth[Coll::AllReduce as usize][0][2] as f64; // 232.2
    assert!((bw - 232.2).abs() < 1e-3);
    // 32 B: 32>>6 = 0, log2i(0) = -1: no correction. 16.4 + 32/(1000*232.2)
    assert!(close(
        tree_time(&m, Proto::Simple, 32),
        16.4 + 32.0 / (1000.0 * bw),
        1e-3
    ));
    // 64 B: bucket 0, Simple factor 0.9: 16.4 + 64/(1000*232.2*0.9)
    assert!(close(
        tree_time(&m, Proto::Simple, 64),
        16.4 + 64.0 / (1000.0 * bw * 0.9),
        1e-3
    ));
    // 1 MiB: 2^20>>6 = 2^14, bucket 14, factor 0.5: 16.4 + 1048576/116100 = 25.43
    assert!(close(
        tree_time(&m, Proto::Simple, 1 << 20),
        16.4 + 1048576.0 / (1000.0 * bw * 0.5),
        1e-3
    ));
    // 1.5 MiB is still bucket 14 (floor of log2).
    assert!(close(
        tree_time(&m, Proto::Simple, 3 << 19),
        16.4 + (3u64 << 19) as f64 / (1000.0 * bw * 0.5),
        1e-3
    ));
    // 256 MiB: bucket 22, factor 0.9.
    let n = 256u64 << 20;
    assert!(close(
        tree_time(&m, Proto::Simple, n),
        16.4 + n as f64 / (1000.0 * bw * 0.9),
        1e-3
    ));
    // 512 MiB: bucket 23 is past the Tree range (< 23): no correction, in 2.28 and 2.30.
    let n = 512u64 << 20;
    for fam in ["2.28", "2.30"] {
        let m = model(fam);
        assert!(close(
            tree_time(&m, Proto::Simple, n),
            16.4 + n as f64 / (1000.0 * bw),
            1e-3
        ));
    }
}

#[test]
fn tree_ll_bucket_13_is_the_deepest_cut() {
    let m = model("2.28");
    let bw = m.tuned.bandwidth[Coll::AllReduce as usize][0][0] as f64; // 61.1
                                                                       // 512 KiB: 2^19>>6 = 2^13, LL factor 0.4: 8.0 + 524288/(1000*61.1*0.4) = 29.45
    let t = tree_time(&m, Proto::Ll, 1 << 19);
    assert!(close(t, 8.0 + 524288.0 / (1000.0 * bw * 0.4), 1e-3), "{t}");
    // Ring is never corrected: Ring/LL at 512 KiB = 7.8 + 524288/141000.
    let r = m
        .algo_time(Coll::AllReduce, Algo::Ring, Proto::Ll, 1 << 19, 1)
        .unwrap()
        .0 as f64;
    assert!(close(r, 7.8 + 524288.0 / 141000.0, 1e-3), "{r}");
}
