//! NCCL's argmin (`topoGetAlgoInfo`): scan algorithms then protocols in
//! index order, skip -1, keep the strictly smallest time, so ties go to the
//! lower algorithm index, then the lower protocol index.

use planner::model::cells::{NUM_ALGORITHMS, NUM_PROTOCOLS};
use planner::model::examples::h200x2_capture;
use planner::model::{table, Algo, Coll, Model, Proto};
use planner::nccl_env::NcclEnv;

#[test]
fn ties_go_to_the_first_in_scan_order() {
    let mut t = [[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS];
    // Tree/LL and Ring/LL tie at 5.0: Tree (index 0) wins.
    t[Algo::Tree as usize][Proto::Ll as usize] = 5.0;
    t[Algo::Ring as usize][Proto::Ll as usize] = 5.0;
    assert_eq!(Model::argmin(&t), Some((Algo::Tree, Proto::Ll, 5.0)));
    // Within one algorithm LL128 (1) beats Simple (2) on a tie.
    let mut t = [[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS];
    t[Algo::Ring as usize][Proto::Simple as usize] = 7.0;
    t[Algo::Ring as usize][Proto::Ll128 as usize] = 7.0;
    assert_eq!(Model::argmin(&t), Some((Algo::Ring, Proto::Ll128, 7.0)));
    // A later, strictly smaller time still wins; -1 entries are ignored.
    t[Algo::Pat as usize][Proto::Simple as usize] = 6.999;
    assert_eq!(Model::argmin(&t), Some((Algo::Pat, Proto::Simple, 6.999)));
    // Time 0 (one rank) is a valid time.
    let mut t = [[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS];
    t[Algo::Ring as usize][Proto::Simple as usize] = 0.0;
    assert_eq!(Model::argmin(&t), Some((Algo::Ring, Proto::Simple, 0.0)));
    assert_eq!(
        Model::argmin(&[[-1.0f32; NUM_PROTOCOLS]; NUM_ALGORITHMS]),
        None
    );
}

#[test]
fn a_real_tie_in_the_model_goes_to_the_lower_index() {
    // On the capture, force Ring/LL and Ring/LL128 to the same numbers by
    // restricting to Ring and giving LL128 LL's constants through a custom table:
    // base 6.6/6.6, NVLink hw 0.6/0.6, so both have latency 6.6 + 2*0.6 = 7.8.
    let mut tab = table::builtin("2.28").unwrap();
    tab.base_latencies[Algo::Ring as usize][Proto::Ll128 as usize] = 6.6;
    tab.hw_latencies[0][Algo::Ring as usize][Proto::Ll128 as usize] = 0.6;
    // LL128 ring bw = min(360*0.92, 12*cap) ; make it 141 like LL: cap = 141/12 = 11.75.
    tab.factors.ring_ll128_bw = 0.5;
    tab.per_channel_max_ring_ll128_bws[2] = [11.75, 11.75, 11.75];
    let env = NcclEnv {
        algo: Some("ring".to_string()),
        ..Default::default()
    };
    let m = Model::new(h200x2_capture(), env, tab).unwrap();
    let c = Coll::AllReduce as usize;
    assert_eq!(m.tuned.latency[c][1][0], m.tuned.latency[c][1][1]);
    assert_eq!(m.tuned.bandwidth[c][1][0], m.tuned.bandwidth[c][1][1]);
    let choice = m.choose(Coll::AllReduce, 4096, 1).unwrap();
    assert_eq!((choice.algo, choice.proto), (Algo::Ring, Proto::Ll));
}
