//! The tuner plugin (`tuner/`, `nccl_tuner_planner`) keeps its own lean copy of NCCL's names so the cdylib stays
//! small; these tests hold it equal to the main crate's vocabulary: the same members in the same order, the same
//! NCCL index for each, the same `ncclFuncStr`/`ncclAlgoStr`/`ncclProtoStr` spelling and the same JSON spelling,
//! and the ABI's table sizes equal to the model's cost-table dimensions.

use nccl_tuner_planner::abi;
use nccl_tuner_planner::plan as tuner;
use planner::model::{cells, Algo, AnyAlgo, Coll, OwnAlgo, Proto};

/// A value's JSON spelling (serde), as plans and results files write it.
fn json<T: serde::Serialize>(value: T) -> String {
    serde_json::to_string(&value).expect("an enum serializes")
}

#[test]
fn collectives_have_the_same_names_and_indices() {
    assert_eq!(tuner::Coll::ALL.len(), Coll::ALL.len());
    for (i, (ours, theirs)) in Coll::ALL.into_iter().zip(tuner::Coll::ALL).enumerate() {
        assert_eq!(ours as usize, i, "{ours:?}");
        assert_eq!(theirs as usize, i, "{theirs:?}");
        assert_eq!(theirs.nccl_name(), ours.nccl_name());
        assert_eq!(json(theirs), json(ours));
        assert_eq!(tuner::Coll::from_nccl_index(i as i32), Some(theirs));
    }
    // ncclFunc_t: the tuned functions are 0..=4, SendRecv (5) is not one of them.
    assert_eq!(abi::NCCL_FUNC_BROADCAST as usize, Coll::Broadcast as usize);
    assert_eq!(abi::NCCL_FUNC_REDUCE as usize, Coll::Reduce as usize);
    assert_eq!(abi::NCCL_FUNC_ALL_GATHER as usize, Coll::AllGather as usize);
    assert_eq!(
        abi::NCCL_FUNC_REDUCE_SCATTER as usize,
        Coll::ReduceScatter as usize
    );
    assert_eq!(abi::NCCL_FUNC_ALL_REDUCE as usize, Coll::AllReduce as usize);
    assert_eq!(tuner::Coll::from_nccl_index(abi::NCCL_FUNC_SEND_RECV), None);
    assert_eq!(cells::NUM_FUNCTIONS, Coll::ALL.len());
}

#[test]
fn algorithms_have_the_same_names_and_indices() {
    assert_eq!(tuner::Algo::ALL.len(), Algo::ALL.len());
    for (i, (ours, theirs)) in Algo::ALL.into_iter().zip(tuner::Algo::ALL).enumerate() {
        assert_eq!(ours as usize, i, "{ours:?}");
        assert_eq!(theirs as usize, i, "{theirs:?}");
        assert_eq!(theirs.nccl_name(), ours.nccl_name());
        assert_eq!(json(theirs), json(ours));
    }
    assert_eq!(abi::NUM_ALGORITHMS, Algo::ALL.len());
    assert_eq!(cells::NUM_ALGORITHMS, abi::NUM_ALGORITHMS);
}

#[test]
fn protocols_have_the_same_names_and_indices() {
    assert_eq!(tuner::Proto::ALL.len(), Proto::ALL.len());
    for (i, (ours, theirs)) in Proto::ALL.into_iter().zip(tuner::Proto::ALL).enumerate() {
        assert_eq!(ours as usize, i, "{ours:?}");
        assert_eq!(theirs as usize, i, "{theirs:?}");
        assert_eq!(theirs.nccl_name(), ours.nccl_name());
        assert_eq!(json(theirs), json(ours));
    }
    assert_eq!(abi::NUM_PROTOCOLS, Proto::ALL.len());
    assert_eq!(cells::NUM_PROTOCOLS, abi::NUM_PROTOCOLS);
    assert_eq!(cells::NUM_HW_LINKS, abi::NUM_HW_LINKS);
}

#[test]
fn planner_s_own_algorithms_are_outside_both_copies_of_nccl_s_menu() {
    // OneShot/TwoShot are planner's (OwnAlgo): no NCCL index, no name either copy knows, and the tune plan's
    // algorithm JSON refuses them.
    for own in OwnAlgo::ALL {
        assert!(Algo::parse(own.name()).is_err(), "{own:?}");
        assert!(tuner::Algo::ALL.iter().all(|t| t.nccl_name() != own.name()));
        assert!(serde_json::from_str::<tuner::Algo>(&json(own)).is_err());
        assert_eq!(AnyAlgo::from(own).nccl(), None);
    }
    // NCCL's algorithms as an AnyAlgo keep NCCL's name and the tuner's JSON spelling.
    for (ours, theirs) in Algo::ALL.into_iter().zip(tuner::Algo::ALL) {
        assert_eq!(AnyAlgo::from(ours).name(), theirs.nccl_name());
        assert_eq!(json(AnyAlgo::from(ours)), json(theirs));
    }
}
