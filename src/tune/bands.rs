//! Per-size picks -> size bands: adjacent sizes with the same pair merge into one band, and the edge between two
//! sizes is their midpoint in log2 (the geometric mean). The first band starts at 0 and the last ends at
//! `u64::MAX`, so a plan covers every size of the collective.

use crate::model::Pair;

/// The pick at one measured (or evaluated) size.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct SizePick {
    pub(crate) bytes: u64,
    pub(crate) pair: Pair,
    /// The measured time of `pair` at `bytes`, µs.
    pub(crate) measured_us: Option<f64>,
    /// A model's time of `pair` at `bytes` (the stock model's, or the calibrated one's), µs.
    pub(crate) predicted_us: Option<f64>,
}

/// One band: every size in `min_bytes..=max_bytes` runs `pair`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Band {
    pub(crate) min_bytes: u64,
    pub(crate) max_bytes: u64,
    pub(crate) pair: Pair,
    /// The largest picked size inside the band, where `measured_us` / `predicted_us` were taken.
    pub(crate) at_bytes: u64,
    pub(crate) measured_us: Option<f64>,
    pub(crate) predicted_us: Option<f64>,
}

/// The last byte count below the log2 midpoint between sizes `lower < upper`: floor(sqrt(lower x upper)), which
/// is >= `lower` and < `upper`, so both sizes stay in their own band. (For 1 MiB and 2 MiB: 1482910.)
pub(crate) fn log2_midpoint(lower: u64, upper: u64) -> u64 {
    debug_assert!(lower < upper);
    let product = u128::from(lower) * u128::from(upper);
    // floor(sqrt(a*b)) <= sqrt(b*b) = b, and < b because a < b; so it fits in u64.
    u64::try_from(product.isqrt()).unwrap_or(upper.saturating_sub(1))
}

/// Bands from picks. `picks` may come in any order; a size that occurs twice keeps its first pick.
/// Empty input gives no band.
pub(crate) fn merge(picks: &[SizePick]) -> Vec<Band> {
    let mut sorted: Vec<SizePick> = picks.to_vec();
    sorted.sort_by_key(|p| p.bytes);
    sorted.dedup_by_key(|p| p.bytes);
    let mut bands: Vec<Band> = Vec::new();
    for (i, pick) in sorted.iter().enumerate() {
        let min_bytes = match i {
            0 => 0,
            _ => log2_midpoint(sorted[i - 1].bytes, pick.bytes) + 1,
        };
        let max_bytes = match sorted.get(i + 1) {
            Some(next) => log2_midpoint(pick.bytes, next.bytes),
            None => u64::MAX,
        };
        match bands.last_mut() {
            Some(band) if band.pair == pick.pair => {
                band.max_bytes = max_bytes;
                band.at_bytes = pick.bytes;
                band.measured_us = pick.measured_us;
                band.predicted_us = pick.predicted_us;
            }
            _ => bands.push(Band {
                min_bytes,
                max_bytes,
                pair: pick.pair,
                at_bytes: pick.bytes,
                measured_us: pick.measured_us,
                predicted_us: pick.predicted_us,
            }),
        }
    }
    bands
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Algo, Proto};

    fn pick(bytes: u64, algo: Algo, proto: Proto, us: f64) -> SizePick {
        SizePick {
            bytes,
            pair: Pair::new(algo, proto),
            measured_us: Some(us),
            predicted_us: None,
        }
    }

    #[test]
    fn midpoints_are_geometric_means_rounded_down() {
        // sqrt(8 x 32) = 16 exactly; sqrt(1 MiB x 2 MiB) = 1482910.4
        assert_eq!(log2_midpoint(8, 32), 16);
        assert_eq!(log2_midpoint(1 << 20, 2 << 20), 1_482_910);
        // neighbours: sqrt(1 x 2) = 1.41 -> 1, which stays in the lower band
        assert_eq!(log2_midpoint(1, 2), 1);
        assert_eq!(log2_midpoint(0, 8), 0);
        // no overflow at the top: sqrt((2^64-2)(2^64-1)) rounds down to 2^64-2
        assert_eq!(log2_midpoint(u64::MAX - 1, u64::MAX), u64::MAX - 1);
        // 4 GiB and 8 GiB: sqrt(2^65) = 2^32.5 = 6074000999.95
        assert_eq!(log2_midpoint(4 << 30, 8 << 30), 6_074_000_999);
    }

    #[test]
    fn same_picks_merge_and_edges_sit_between_sizes() {
        let picks = [
            pick(2 << 20, Algo::Ring, Proto::Ll, 22.1),
            pick(8, Algo::Ring, Proto::Ll, 11.8),
            pick(1 << 20, Algo::Ring, Proto::Ll, 14.1),
            pick(4 << 20, Algo::Ring, Proto::Ll128, 30.8),
            pick(8 << 20, Algo::Ring, Proto::Simple, 48.2),
            pick(16 << 20, Algo::Ring, Proto::Simple, 79.0),
        ];
        let bands = merge(&picks);
        assert_eq!(bands.len(), 3, "{bands:?}");
        // Ring/LL: 0 ..= sqrt(2 MiB x 4 MiB) = 2965820.9 -> 2965820
        assert_eq!((bands[0].min_bytes, bands[0].max_bytes), (0, 2_965_820));
        assert_eq!(bands[0].pair, Pair::new(Algo::Ring, Proto::Ll));
        // the band's time is the one at its largest size (2 MiB)
        assert_eq!(bands[0].at_bytes, 2 << 20);
        assert_eq!(bands[0].measured_us, Some(22.1));
        // Ring/LL128: 2965821 ..= sqrt(4 MiB x 8 MiB) = 5931641.8 -> 5931641
        assert_eq!(
            (bands[1].min_bytes, bands[1].max_bytes),
            (2_965_821, 5_931_641)
        );
        assert_eq!(bands[2].min_bytes, 5_931_642);
        assert_eq!(bands[2].max_bytes, u64::MAX);
        assert_eq!(bands[2].measured_us, Some(79.0));
    }

    #[test]
    fn bands_tile_every_size_without_gaps_or_overlaps() {
        let picks: Vec<SizePick> = (0..40u32)
            .map(|k| {
                let proto = [Proto::Ll, Proto::Ll128, Proto::Simple][(k as usize / 3) % 3];
                pick(3u64.pow(k / 2) + u64::from(k), Algo::Tree, proto, 1.0)
            })
            .collect();
        let bands = merge(&picks);
        assert_eq!(bands[0].min_bytes, 0);
        assert_eq!(bands.last().map(|b| b.max_bytes), Some(u64::MAX));
        for w in bands.windows(2) {
            assert_eq!(w[0].max_bytes + 1, w[1].min_bytes);
            assert_ne!(
                w[0].pair, w[1].pair,
                "adjacent bands with the same pair were not merged"
            );
        }
        for p in &picks {
            let band = bands
                .iter()
                .find(|b| (b.min_bytes..=b.max_bytes).contains(&p.bytes))
                .expect("every size is covered");
            assert_eq!(band.pair, p.pair, "size {}", p.bytes);
        }
    }

    #[test]
    fn one_size_covers_everything_and_none_gives_nothing() {
        let bands = merge(&[pick(4096, Algo::Tree, Proto::Ll, 10.0)]);
        assert_eq!(bands.len(), 1);
        assert_eq!((bands[0].min_bytes, bands[0].max_bytes), (0, u64::MAX));
        assert!(merge(&[]).is_empty());
    }
}
