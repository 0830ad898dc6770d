//! A worked example of NCCL's cost model (`src/graph/tuning.cc`): one node, 8 Hopper GPUs, ring and tree with 12
//! channels at 30 GB/s over NVLink, balanced tree, AllReduce of 1 MiB.
//! Every number below is a hand calculation written out beside it.

use planner::model::examples::hopper8_worked_example;
use planner::model::select::Call;
use planner::model::{Algo, Coll, Model, Proto};
use planner::nccl_env::NcclEnv;

fn model() -> Model {
    crate::common::model_of(hopper8_worked_example(), NcclEnv::default(), "2.30")
}

/// Absolute tolerance: the hand calculations round to the printed digits.
fn within(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

#[test]
fn worked_example_bandwidths_latencies_and_times() {
    let m = model();
    let ar = Coll::AllReduce as usize;
    // (algo, proto, algBw GB/s, latency µs, time µs at 1 MiB)
    let rows = [
        // Ring/Simple: busBw 12*30 = 360; algBw 360*8/14 = 205.71; lat 8.4+14*3.4 = 56.0;
        // time 56.0 + 1048576/(1000*205.71) = 61.10
        (Algo::Ring, Proto::Simple, 205.71, 56.0, 61.10),
        // Ring/LL: min(141, 360*0.5) = 141; algBw 141*8/14 = 80.57; lat 6.6+14*0.6 = 15.0;
        // time 15.0 + 1048576/80571 = 28.01 (the winner)
        (Algo::Ring, Proto::Ll, 80.57, 15.0, 28.01),
        // Ring/LL128: min(360*0.92, 12*36.7) = 331.2; algBw 189.26; lat 14+14*1.9 = 40.6;
        // time 40.6 + 5.54 = 46.14
        (Algo::Ring, Proto::Ll128, 189.26, 40.6, 46.14),
        // Tree/Simple: min(331.2, 12*38.7 = 464.4) = 331.2; algBw x0.5 = 165.6;
        // lat 8.4 + 2*7*4.0 = 64.4; 1 MiB>>6 = 2^14 -> Simple correction 0.5:
        // time 64.4 + 1048576/(1000*82.8) = 77.06
        (Algo::Tree, Proto::Simple, 165.6, 64.4, 77.06),
        // Tree/LL: 331.2/3.8 = 87.16 (< 141); algBw 43.58; lat 6.8 + 2*7*0.6 = 15.2;
        // LL correction 0.5: time 15.2 + 1048576/21790 = 63.32
        (Algo::Tree, Proto::Ll, 43.58, 15.2, 63.32),
        // Tree/LL128: min(331.2*7/9 = 257.6, 440.4); algBw 128.8; lat 14 + 2*7*1.25 = 31.5;
        // LL128 correction 0.6: time 31.5 + 1048576/77280 = 45.07
        (Algo::Tree, Proto::Ll128, 128.8, 31.5, 45.07),
    ];
    let call = Call::new(Coll::AllReduce, 1 << 20, 8, 1).unwrap();
    let eval = m.evaluate(&call).unwrap();
    for (a, p, algbw, lat, time) in rows {
        let bw = m.tuned.bandwidth[ar][a as usize][p as usize] as f64;
        let l = m.tuned.latency[ar][a as usize][p as usize] as f64;
        assert!(
            within(bw, algbw, 0.006),
            "{a:?}/{p:?} algBw {bw} vs {algbw}"
        );
        assert!(within(l, lat, 1e-4), "{a:?}/{p:?} latency {l} vs {lat}");
        let cand = &eval.candidates[a as usize * 3 + p as usize];
        assert!(cand.usable(), "{a:?}/{p:?} should be usable");
        assert!(
            within(cand.time_us as f64, time, 0.006),
            "{a:?}/{p:?} time {} vs {time}",
            cand.time_us
        );
    }
    let w = eval.winner();
    assert_eq!((w.algo, w.proto), (Algo::Ring, Proto::Ll));
}

#[test]
fn worked_example_channels_and_threads() {
    // Ring/LL at 1 MiB with 24 runtime channels: threshold 8*8 = 64 per thread,
    // 24*512*64 = 786432 <= 1048576, so all 24 channels and 512 threads (16 warps).
    let m = model();
    let choice = m.choose(Coll::AllReduce, 1 << 20, 1).unwrap();
    assert_eq!((choice.channels, choice.threads), (24, 512));
    // At 256 KiB: 262144 < nc*512*64 until nc = 8 (8*32768 = 262144), so 8 channels;
    // then 262144 < 8*512*64 is false, threads stay 512.
    assert_eq!(m.channels_threads(Algo::Ring, Proto::Ll, 262144), (8, 512));
    // At 64 KiB: channels fall to 2 (2*32768 = 65536), threads 512.
    assert_eq!(m.channels_threads(Algo::Ring, Proto::Ll, 65536), (2, 512));
    // At 4 KiB: 1 channel, then threads halve while 4096 < 1*nt*64 and nt%128 == 0:
    // 512 -> 256 -> 128 -> 64 (64 % 128 != 0 stops); NCCL's floor of 3 warps makes it 96.
    assert_eq!(m.channels_threads(Algo::Ring, Proto::Ll, 4096), (1, 96));
    // Ring/Simple adds a sync warp: 16 MiB keeps 24 channels and 512+32 threads.
    assert_eq!(
        m.channels_threads(Algo::Ring, Proto::Simple, 16 << 20),
        (24, 544)
    );
    // Tree always runs 640 threads; PAT too (its max threads are 0 in the table).
    assert_eq!(
        m.channels_threads(Algo::Tree, Proto::Simple, 1 << 20).1,
        640
    );
}
