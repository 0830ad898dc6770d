//! NCCL_ALGO / NCCL_PROTO list syntax exactly as NCCL's `parseList`
//! (src/graph/tuning.cc): `[list][;func:list]*`, `^` negates, names are
//! case-insensitive, only the first entry may omit the function prefix, a
//! prefixed entry resets that function's row first.

use planner::model::cells::NUM_ALGORITHMS;
use planner::model::knobs::EnableMatrix;
use planner::model::{Algo, Coll, Proto};
use planner::nccl_env::NcclEnv;

fn algos(text: &str) -> EnableMatrix {
    EnableMatrix::from_env(&NcclEnv {
        algo: Some(text.to_string()),
        ..Default::default()
    })
    .unwrap()
}

fn protos(text: &str) -> EnableMatrix {
    EnableMatrix::from_env(&NcclEnv {
        proto: Some(text.to_string()),
        ..Default::default()
    })
    .unwrap()
}

fn algo_err(text: &str) -> String {
    let err = EnableMatrix::from_env(&NcclEnv {
        algo: Some(text.to_string()),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err.exit_code(), 2, "{text}");
    err.to_string()
}

fn row(m: &EnableMatrix, c: Coll) -> [i32; NUM_ALGORITHMS] {
    m.algo[c as usize]
}

#[test]
fn default_enables_everything_and_ll128_is_auto() {
    let m = EnableMatrix::from_env(&NcclEnv::default()).unwrap();
    for c in Coll::ALL {
        assert_eq!(m.algo[c as usize], [1; NUM_ALGORITHMS]);
        assert_eq!(m.proto[c as usize], [1, 2, 1]);
    }
}

#[test]
fn plain_and_negated_lists() {
    // Ring and Tree only, for every function.
    let m = algos("ring,tree");
    for c in Coll::ALL {
        assert_eq!(row(&m, c), [1, 1, 0, 0, 0, 0, 0]);
    }
    // Everything but NVLS and NVLSTree; case does not matter.
    let m = algos("^NVLS,nvlstree");
    for c in Coll::ALL {
        assert_eq!(row(&m, c), [1, 1, 1, 1, 0, 0, 1]);
    }
    // A lone '^' negates an empty list: everything on.
    let m = algos("^");
    assert_eq!(row(&m, Coll::AllReduce), [1; NUM_ALGORITHMS]);
    // strtok: empty elements and doubled separators are skipped.
    let m = algos("ring,,tree;;allreduce:ring");
    assert_eq!(row(&m, Coll::Broadcast), [1, 1, 0, 0, 0, 0, 0]);
    assert_eq!(row(&m, Coll::AllReduce), [0, 1, 0, 0, 0, 0, 0]);
}

#[test]
fn per_function_prefixes() {
    // NCCL's own example: ring,collnetdirect for all, then tree,collnetdirect
    // for allreduce and ring for broadcast.
    let m = algos("ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring");
    assert_eq!(row(&m, Coll::Reduce), [0, 1, 1, 0, 0, 0, 0]);
    assert_eq!(row(&m, Coll::AllReduce), [1, 0, 1, 0, 0, 0, 0]);
    assert_eq!(row(&m, Coll::Broadcast), [0, 1, 0, 0, 0, 0, 0]);
    // A first entry with a prefix touches only that function.
    let m = algos("AllReduce:^ring");
    assert_eq!(row(&m, Coll::AllReduce), [1, 0, 1, 1, 1, 1, 1]);
    assert_eq!(row(&m, Coll::AllGather), [1; NUM_ALGORITHMS]);
}

#[test]
fn proto_examples_from_nccl() {
    // "LL,Simple;allreduce:^LL": LL and Simple for all, everything but LL for allreduce.
    let m = protos("LL,Simple;allreduce:^LL");
    assert_eq!(m.proto[Coll::Broadcast as usize], [1, 0, 1]);
    assert_eq!(m.proto[Coll::AllReduce as usize], [0, 1, 1]);
    // "^LL128;allreduce:LL128": everything but LL128, but only LL128 for allreduce.
    let m = protos("^LL128;allreduce:LL128");
    assert_eq!(m.proto[Coll::ReduceScatter as usize], [1, 0, 1]);
    assert_eq!(m.proto[Coll::AllReduce as usize], [0, 1, 0]);
    // Any NCCL_PROTO turns LL128's "auto" (2) into a plain 1: no safety gate.
    let m = protos("^LL");
    assert_eq!(m.proto[Coll::AllGather as usize][Proto::Ll128 as usize], 1);
}

#[test]
fn syntax_errors_quote_nccl() {
    assert_eq!(
        algo_err("ring;tree"),
        "NCCL_ALGO: All entries except the first must have a prefix: \"ring;tree\""
    );
    assert_eq!(
        algo_err("rong"),
        "NCCL_ALGO: Unrecognized element token \"rong\" when parsing \"rong\""
    );
    assert_eq!(
        algo_err("allredux:ring"),
        "NCCL_ALGO: Unrecognized prefix token \"allredux\" when parsing \"allredux:ring\""
    );
    // Whitespace is not trimmed.
    assert!(algo_err("ring, tree").contains("\" tree\""));
    // A leading ';' means the first entry is not at the start: it needs a prefix.
    assert!(algo_err(";ring").contains("must have a prefix"));
    // "allreduce:" has no list, so "allreduce" is read as an element.
    assert!(algo_err("allreduce:").contains("Unrecognized element token \"allreduce\""));
    let err = EnableMatrix::from_env(&NcclEnv {
        proto: Some("LL256".to_string()),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "NCCL_PROTO: Unrecognized element token \"LL256\" when parsing \"LL256\""
    );
}

#[test]
fn algorithm_names_follow_ncclalgostr() {
    for a in Algo::ALL {
        let m = algos(a.nccl_name());
        let mut want = [0; NUM_ALGORITHMS];
        want[a as usize] = 1;
        assert_eq!(row(&m, Coll::AllReduce), want, "{}", a.nccl_name());
    }
    // The per-call spelling (NVLS_TREE) is not an NCCL_ALGO name.
    assert!(algo_err("NVLS_TREE").contains("Unrecognized element token"));
}
