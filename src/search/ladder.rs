//! NCCL's per-channel speed ladders (`search.cc`, v2.28.9): the bandwidths, in
//! GB/s, that the search tries for one channel, fastest first. Which ladder
//! applies depends on the lowest compute capability in the node and on
//! whether the job spans several nodes (`system->inter`).
//!
//! Values are `f32` because NCCL keeps them as `float` and compares them with
//! other floats during the search; the exact rounding matters at the edges.

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
/// cc >= 100, one node.
pub const SM100_INTRA: &[f32] = &[
    90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0,
];
/// cc >= 100, several nodes.
pub(crate) const SM100_INTER: &[f32] = &[
    96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
    0.24, 0.12,
];

/// The ladder NCCL uses for the lowest compute capability `cc_min` (x10) and
/// `inter` (more than one node).
pub(crate) fn ladder(cc_min: u32, inter: bool) -> &'static [f32] {
    match (cc_min >= 100, cc_min >= 90, inter) {
        (true, _, false) => SM100_INTRA,
        (true, _, true) => SM100_INTER,
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
        assert_eq!(ladder(120, true)[2], 45.1);
    }

    #[test]
    fn ladders_are_strictly_decreasing() {
        for l in [
            INTRA,
            INTER,
            SM90_INTRA,
            SM90_INTER,
            SM100_INTRA,
            SM100_INTER,
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
