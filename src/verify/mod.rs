//! `planner verify`: the request (pairs, sizes, backends), one whole run (`session`), local and distributed runs
//! (`run`, `rendezvous` under a launcher), our kernels as a backend (`native`), the fake backend (`fake`), keeping
//! a stopped run's file valid (`keep`), the tuner plugin's runs (`tuner`) and the scoring (`score`).
//!
//! The vocabulary of a measurement (rows, iteration plan, statistics) is `crate::measure`, the data types
//! `crate::dtype`, the pair `crate::model::Pair`, the result file `crate::result_file`.

pub(crate) mod fake;
pub mod keep;
pub(crate) mod native;
pub mod rendezvous;
pub mod run;
pub mod score;
pub(crate) mod session;
pub(crate) mod tuner;

use crate::model::Pair;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// `--pairs all|winner|Ring/LL,...`
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PairSelection {
    All,
    Winner,
    List(Vec<Pair>),
}

impl PairSelection {
    pub fn parse(text: &str) -> Result<PairSelection> {
        match text.trim().to_ascii_lowercase().as_str() {
            "all" => return Ok(PairSelection::All),
            "winner" => return Ok(PairSelection::Winner),
            _ => {}
        }
        let mut pairs = Vec::new();
        for part in text.split(',').filter(|s| !s.trim().is_empty()) {
            let pair = Pair::parse(part)?;
            if !pairs.contains(&pair) {
                pairs.push(pair);
            }
        }
        if pairs.is_empty() {
            return Err(Error::bad_input(format!(
                "invalid --pairs '{text}': give all, winner, or a list such as Ring/LL,Tree/Simple"
            )));
        }
        Ok(PairSelection::List(pairs))
    }
}

/// The three size regimes of the summary: latency-bound, middle, bandwidth-bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Regime {
    /// below 64 KiB
    Small,
    /// 64 KiB to 16 MiB, both included
    Medium,
    /// above 16 MiB
    Large,
}

impl Regime {
    pub(crate) const ALL: [Regime; 3] = [Regime::Small, Regime::Medium, Regime::Large];
    pub(crate) fn of(bytes: u64) -> Regime {
        if bytes < 64 << 10 {
            Regime::Small
        } else if bytes <= 16 << 20 {
            Regime::Medium
        } else {
            Regime::Large
        }
    }
    pub(crate) fn label(self) -> &'static str {
        match self {
            Regime::Small => "< 64 KiB",
            Regime::Medium => "64 KiB - 16 MiB",
            Regime::Large => "> 16 MiB",
        }
    }
}

/// FNV-1a, 64 bit: a stable fingerprint of a topology's XML text (the tuner plan's hash, one definition).
pub(crate) use nccl_tuner_planner::plan::fnv1a64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{
        coll_label, coll_label_serde, logged_bytes, median, percentile, IterPlan,
    };
    use crate::model::{Algo, Coll, Proto};

    #[test]
    fn median_and_p99_by_hand() {
        // odd count: middle value
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        // even count: mean of 2 and 3
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // 5 values: nearest rank ceil(0.99*5) = 5 -> the largest
        assert_eq!(percentile(&[5.0, 1.0, 4.0, 2.0, 3.0], 99.0), Some(5.0));
        // 200 values 1..=200: ceil(0.99*200) = 198
        let v: Vec<f64> = (1..=200).map(|x| x as f64).collect();
        assert_eq!(percentile(&v, 99.0), Some(198.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn iterations_shrink_at_large_sizes() {
        let plan = IterPlan {
            iters: 20,
            warmup: 5,
            repeats: 5,
            loop_bytes_cap: 4 << 30,
        };
        assert_eq!(plan.iters_at(8), 20);
        assert_eq!(plan.iters_at(128 << 20), 20); // 4 GiB / 128 MiB = 32 > 20
        assert_eq!(plan.iters_at(256 << 20), 16); // 4 GiB / 256 MiB
        assert_eq!(plan.iters_at(4 << 30), 1);
        assert_eq!(plan.iters_at(8 << 30), 1); // never 0
        assert_eq!(plan.warmup_at(4 << 30), 1);
        assert_eq!(plan.warmup_at(8), 5);
    }

    #[test]
    fn pairs_parse_in_either_spelling() {
        for (text, algo, proto) in [
            ("ring/ll128", Algo::Ring, Proto::Ll128),
            ("NVLS_TREE/SIMPLE", Algo::NvlsTree, Proto::Simple),
            ("nvls-tree/simple", Algo::NvlsTree, Proto::Simple),
            (" CollNet_Direct / ll ", Algo::CollNetDirect, Proto::Ll),
        ] {
            assert_eq!(Pair::parse(text).unwrap(), Pair::new(algo, proto), "{text}");
        }
        assert_eq!(
            Pair::new(Algo::Tree, Proto::Simple).to_string(),
            "Tree/Simple"
        );
        for bad in ["Ring", "Ring/LL64", "Bus/LL", ""] {
            let e = Pair::parse(bad).unwrap_err();
            assert_eq!(e.exit_code(), 2);
        }
        assert_eq!(
            Pair::parse("Ring/LL64").unwrap_err().to_string(),
            "invalid pair 'Ring/LL64': expected ALGO/PROTO such as Ring/LL128 (algorithms: Tree, Ring, \
             CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; protocols: LL, LL128, Simple)"
        );
        assert_eq!(
            PairSelection::parse("Ring/LL,Tree/Simple,Ring/LL").unwrap(),
            PairSelection::List(vec![
                Pair::new(Algo::Ring, Proto::Ll),
                Pair::new(Algo::Tree, Proto::Simple)
            ])
        );
        assert_eq!(PairSelection::parse("ALL").unwrap(), PairSelection::All);
        assert!(PairSelection::parse(",").is_err());
    }

    #[test]
    fn regimes_split_at_64k_and_16m() {
        assert_eq!(Regime::of(65535), Regime::Small);
        assert_eq!(Regime::of(65536), Regime::Medium);
        assert_eq!(Regime::of(16 << 20), Regime::Medium);
        assert_eq!(Regime::of((16 << 20) + 1), Regime::Large);
    }

    #[test]
    fn bus_factors_as_nccl_tests() {
        // all-reduce: 2 (n-1)/n = 2*1/2 = 1 and 2*7/8 = 1.75
        assert_eq!(Coll::AllReduce.nccl_tests_bus_factor(2), 1.0);
        assert_eq!(Coll::AllReduce.nccl_tests_bus_factor(8), 1.75);
        // all-gather: (n-1)/n = 7/8
        assert_eq!(Coll::AllGather.nccl_tests_bus_factor(8), 0.875);
        assert_eq!(Coll::Broadcast.nccl_tests_bus_factor(8), 1.0);
        // all-gather logs one rank's share: 1024 / 2
        assert_eq!(logged_bytes(Coll::AllGather, 1024, 2), 512);
        assert_eq!(logged_bytes(Coll::ReduceScatter, 1024, 4), 256);
        assert_eq!(logged_bytes(Coll::AllReduce, 1024, 2), 1024);
    }

    #[test]
    fn result_files_spell_collectives_in_lower_case() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct Options {
            #[serde(with = "coll_label_serde")]
            collective: Coll,
        }
        let labels = Coll::ALL.map(coll_label);
        assert_eq!(
            labels,
            [
                "broadcast",
                "reduce",
                "allgather",
                "reducescatter",
                "allreduce"
            ]
        );
        for coll in Coll::ALL {
            let json = serde_json::to_string(&Options { collective: coll }).unwrap();
            assert_eq!(json, format!("{{\"collective\":\"{}\"}}", coll_label(coll)));
            let back: Options = serde_json::from_str(&json).unwrap();
            assert_eq!(back.collective, coll);
        }
        let err = serde_json::from_str::<Options>(r#"{"collective":"AllReduce"}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown collective `AllReduce`"),
            "{err}"
        );
    }

    #[test]
    fn fnv_known_values() {
        // FNV-1a 64 reference values: "" and "a"
        assert_eq!(fnv1a64(b""), 0xcbf29ce484222325);
        assert_eq!(fnv1a64(b"a"), 0xaf63dc4c8601ec8c);
    }
}
