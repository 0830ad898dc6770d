//! How the collective kernel is launched (NCCL's sm_90 launch attributes).
//! These tests leave PLANNER_CGA_CLUSTER / PLANNER_MEM_SYNC_DOMAIN unset.

use planner::exec::runtime::LaunchShape;

#[test]
fn hopper_launch_uses_clusters_of_four_and_the_remote_domain() {
    // 24 channels (NCCL's count on 2x H200): 24 % 4 == 0, so clusters of 4.
    let shape = LaunchShape::for_launch((9, 0), 24, false).unwrap();
    assert_eq!(shape.cluster, 4);
    assert_eq!(shape.mem_sync_domain, Some(1));
}

#[test]
fn clusters_fall_back_to_none_as_nccl_does() {
    // 6 CTAs do not divide into clusters of 4 (enqueue.cc: clusterSize = 1).
    assert_eq!(
        LaunchShape::for_launch((9, 0), 6, false).unwrap().cluster,
        1
    );
    // Virtual ranks need every CTA co-resident: no clusters.
    assert_eq!(
        LaunchShape::for_launch((9, 0), 32, true).unwrap().cluster,
        1
    );
    // Before sm_90 there are neither clusters nor domains.
    let ampere = LaunchShape::for_launch((8, 0), 24, false).unwrap();
    assert_eq!(ampere.cluster, 1);
    assert_eq!(ampere.mem_sync_domain, None);
}
