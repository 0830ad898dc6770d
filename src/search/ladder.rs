//! NCCL's per-channel speed ladders (`search.cc`): the bandwidths, in GB/s, that the search tries for one channel,
//! fastest first. Which ladder applies depends on the lowest compute capability in the node, on whether the job
//! spans several nodes (`system->inter`) and, for sm100+, on the family (rules `sm100_ladders`,
//! `sm100_ladder_rungs`, `sm100_ladder_rungs_2_29`, `sm100_ladder_rungs_2_30`).
//!
//! Values are `f32` because NCCL keeps them as `float` and compares them with
//! other floats during the search; the exact rounding matters at the edges.
//!
//! A link slower than a ladder's last rung is still searched at that rung (`start_index`), which no path carries:
//! NCCL then falls back to the "simple order" graph at 0.1 GB/s (v2.28.9-1 src/graph/search.cc:1185-1196, "Could not
//! find a path for pattern %d, falling back to simple order"), as planner does. The sm100 ladders stop at 18 GB/s
//! (19 in 2.25-2.26), so on sm100+ GPUs whose GPU-to-GPU path is slower (4 x RTX 5060 Ti at PCIe Gen3 x4: 3 GB/s)
//! every family from 2.25 on takes that fallback; the sm90 and older ladders go down to 3 GB/s and would not.

use super::rules::{has, Family, SearchRule};

/// cc < 90, one node.
pub(crate) const INTRA: &[f32] = &[
    40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
];
/// cc < 90, several nodes.
pub(crate) const INTER: &[f32] = &[
    48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];
/// 90 <= cc < 100, one node.
pub(crate) const SM90_INTRA: &[f32] = &[
    60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0,
];
/// 90 <= cc < 100, several nodes.
pub(crate) const SM90_INTER: &[f32] = &[
    48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24,
    0.12,
];
/// cc >= 100, one node (2.29+: v2.29.7-1 src/graph/search.cc:987, the 45 rung from v2.29.2-1).
pub const SM100_INTRA: &[f32] = &[
    90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
];
/// cc >= 100, one node, 2.27-2.28 (v2.28.9-1 src/graph/search.cc:986; the 18 rung from v2.27.3-1).
pub const SM100_INTRA_2_27: &[f32] = &[
    90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
];
/// cc >= 100, one node, 2.25-2.26 (v2.25.1-1 src/graph/search.cc:940).
pub const SM100_INTRA_2_25: &[f32] = &[90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0];
/// cc >= 100, several nodes (2.30+: v2.30.3-1 src/graph/search.cc:1064, the 86 rung).
pub(crate) const SM100_INTER: &[f32] = &[
    96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0,
    2.4, 1.2, 0.24, 0.12,
];
/// cc >= 100, several nodes, 2.29 (v2.29.7-1 src/graph/search.cc:988: the 80 rung; 2.29.2-.3 have none).
pub const SM100_INTER_2_29: &[f32] = &[
    96.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4,
    1.2, 0.24, 0.12,
];
/// cc >= 100, several nodes, 2.27-2.28 (v2.27.7-1, v2.28.9-1 src/graph/search.cc:987; 2.27.3 had 47.9, 45.0 first).
pub const SM100_INTER_2_27: &[f32] = &[
    96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];

/// The ladder NCCL uses for the lowest compute capability `cc_min` (x10) and
/// `inter` (more than one node), in the newest family (the search asks `ladder_of` with the run's family).
#[cfg(test)]
fn ladder(cc_min: u32, inter: bool) -> &'static [f32] {
    ladder_of(cc_min, inter, super::rules::NEWEST)
}

/// The ladder of `family`: sm100+ GPUs use the sm90 ladders before 2.25, then ladders that gained rungs in 2.27,
/// 2.29 and 2.30 (the sm90 and older ladders are the newest family's in every family: their 2.19 and 2.21 rungs
/// are recorded, not modelled).
pub fn ladder_of(cc_min: u32, inter: bool, family: Family) -> &'static [f32] {
    let sm100 = cc_min >= 100 && has(family, SearchRule::Sm100Ladders);
    match (sm100, cc_min >= 90, inter) {
        (true, _, false) => {
            if has(family, SearchRule::Sm100LadderRungs2_29) {
                SM100_INTRA
            } else if has(family, SearchRule::Sm100LadderRungs) {
                SM100_INTRA_2_27
            } else {
                SM100_INTRA_2_25
            }
        }
        (true, _, true) => {
            if has(family, SearchRule::Sm100LadderRungs2_30) {
                SM100_INTER
            } else if has(family, SearchRule::Sm100LadderRungs2_29) {
                SM100_INTER_2_29
            } else if has(family, SearchRule::Sm100LadderRungs) {
                SM100_INTER_2_27
            } else {
                // 2.25-2.26: the sm90 several-node ladder (v2.25.1-1 src/graph/search.cc:941).
                SM90_INTER
            }
        }
        (false, true, false) => SM90_INTRA,
        (false, true, true) => SM90_INTER,
        (false, false, false) => INTRA,
        (false, false, true) => INTER,
    }
}

/// Index of the first rung NCCL starts from: the fastest speed not above
/// `max_bw` whose `min_channels` copies fit in `total_bw` (the last rung if none).
pub(crate) fn start_index(
    ladder: &[f32],
    max_bw: f32,
    total_bw: f32,
    min_channels: usize,
) -> usize {
    let mut i = 0;
    while i < ladder.len() - 1 && (ladder[i] > max_bw || ladder[i] * min_channels as f32 > total_bw)
    {
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_choice_by_generation_and_scope() {
        assert_eq!(ladder(80, false)[0], 40.0);
        assert_eq!(ladder(86, true)[0], 48.0);
        assert_eq!(ladder(90, false)[0], 60.0);
        assert_eq!(ladder(90, true)[1], 45.0);
        assert_eq!(ladder(100, false)[0], 90.0);
        assert_eq!(ladder(120, true)[4], 45.1);
    }

    #[test]
    fn sm100_ladders_by_family() {
        // The 45 GB/s intra-node rung from 2.29, 80 and 86 across nodes from 2.29 and 2.30.
        assert!(!ladder_of(100, false, (2, 28)).contains(&45.0));
        assert!(ladder_of(100, false, (2, 29)).contains(&45.0));
        assert_eq!(ladder_of(103, true, (2, 28))[..2], [96.0, 48.0]);
        assert_eq!(ladder_of(103, true, (2, 29))[..3], [96.0, 80.0, 48.0]);
        assert_eq!(ladder_of(103, true, (2, 30))[..3], [96.0, 86.0, 80.0]);
        // 2.25-2.26: the 19 GB/s floor, the sm90 ladder across nodes; before 2.25 the sm90 ones.
        assert_eq!(ladder_of(120, false, (2, 26)).last(), Some(&19.0));
        assert_eq!(ladder_of(120, true, (2, 26)), SM90_INTER);
        assert_eq!(ladder_of(100, false, (2, 24)), SM90_INTRA);
        assert_eq!(ladder(100, false), SM100_INTRA);
    }

    #[test]
    fn ladders_are_strictly_decreasing() {
        for l in [
            INTRA,
            INTER,
            SM90_INTRA,
            SM90_INTER,
            SM100_INTRA,
            SM100_INTRA_2_27,
            SM100_INTRA_2_25,
            SM100_INTER,
            SM100_INTER_2_29,
            SM100_INTER_2_27,
        ] {
            assert!(l.windows(2).all(|w| w[0] > w[1]), "{l:?}");
        }
    }

    #[test]
    fn start_speed() {
        // H200 pair: maxBw 370.8 (18 NVLinks x 20.6), totalBw 370.8 -> 60 is the first rung.
        assert_eq!(start_index(SM90_INTRA, 370.8, 370.8, 1), 0);
        // One PCIe Gen4 x16 link (24 GB/s): 60, 50, 40, 30 are above it -> 24 (index 4).
        assert_eq!(start_index(SM90_INTRA, 24.0, 24.0, 1), 4);
        // A 10 Gb/s NIC (1.25 GB/s) on H100: first rung <= 1.25 is 1.2 (index 14).
        assert_eq!(start_index(SM90_INTER, 1.25, 370.8, 1), 14);
        // minChannels 2 with totalBw 50 on A100: 40*2 > 50, 30*2 > 50, 20*2 <= 50 -> index 2.
        assert_eq!(start_index(INTRA, 300.0, 50.0, 2), 2);
        // Nothing fits: the last rung.
        assert_eq!(start_index(INTRA, 0.01, 0.01, 1), INTRA.len() - 1);
    }
}
