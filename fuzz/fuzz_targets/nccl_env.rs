//! `NCCL_*` environment values the model reads (`NCCL_NTHREADS`, `NCCL_LL128_NTHREADS`, `NCCL_THREAD_THRESHOLDS`,
//! `NCCL_NET_OVERHEAD`, `NCCL_ALGO`, `NCCL_PROTO`, `NCCL_PAT_ENABLE`, `NCCL_NVLS_ENABLE`, ...), and the
//! launcher's rank variables. Input: `NAME=VALUE` lines (a name the model does not know is skipped). The model of
//! the 2x H200 capture built under them (one node and two) answers every collective at a few sizes without
//! panicking or overflowing (fuzz builds check overflow); a refusal is bad input (exit 2); channels stay
//! within NCCL's 64 and threads within 640.
#![no_main]

use libfuzzer_sys::fuzz_target;
use planner::limits::{MAX_CHANNELS, MAX_THREADS};
use planner::model::{Algo, Proto};
use planner::nccl_env::NcclEnv;

#[path = "../common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let pairs: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(n, v)| (n.trim().to_string(), v.to_string()))
        .take(16)
        .collect();
    let lookup = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    common::bad_input(planner::verify::rendezvous::LauncherEnv::from_lookup(
        lookup,
    ));
    let env = NcclEnv::from_pairs(pairs.clone());
    for multi in [false, true] {
        match common::model(multi, env.clone(), None) {
            Err(e) => assert_eq!(e.exit_code(), 2, "{e}"),
            Ok(model) => {
                common::exercise(&model, &[0, 1, 4096, 1 << 20, 1 << 30, 1 << 40]);
                for algo in Algo::ALL {
                    for proto in Proto::ALL {
                        let (channels, threads) = model.channels_threads(algo, proto, 1 << 20);
                        assert!(
                            channels <= MAX_CHANNELS,
                            "{algo:?}/{proto:?}: {channels} channels"
                        );
                        assert!(
                            threads <= MAX_THREADS,
                            "{algo:?}/{proto:?}: {threads} threads"
                        );
                    }
                }
            }
        }
    }
});
