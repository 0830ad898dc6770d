//! calibrate's statistics, in one leaf module: relative error, the spread of repeats, and the error summary
//! (`ErrorStats`). The median and the nearest-rank percentile are `crate::measure`'s (one definition for every
//! stage); this module is where calibrate uses them.

use crate::measure::{median, percentile};
use serde::{Deserialize, Serialize};

/// Median, p95 (nearest rank) and worst of |relative error|, in percent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorStats {
    pub n: usize,
    pub median_abs_error_pct: f64,
    pub p95_abs_error_pct: f64,
    pub worst_abs_error_pct: f64,
}

impl ErrorStats {
    /// From |relative errors| as fractions; None when empty.
    pub(crate) fn of(abs_rel: &[f64]) -> Option<ErrorStats> {
        let values: Vec<f64> = abs_rel.iter().copied().filter(|v| v.is_finite()).collect();
        Some(ErrorStats {
            n: values.len(),
            median_abs_error_pct: median(&values)? * 100.0,
            p95_abs_error_pct: percentile(&values, 95.0)? * 100.0,
            worst_abs_error_pct: values.iter().copied().fold(0.0, f64::max) * 100.0,
        })
    }
}

/// |predicted / measured - 1|: the relative error as a fraction.
pub(crate) fn abs_rel_error(predicted: f64, measured: f64) -> f64 {
    (predicted / measured - 1.0).abs()
}

/// (slowest - fastest) / `center` of `times`, as a fraction; None for fewer than 2 times.
pub(crate) fn spread(times: &[f64], center: f64) -> Option<f64> {
    if times.len() < 2 {
        return None;
    }
    let hi = times.iter().copied().fold(f64::MIN, f64::max);
    let lo = times.iter().copied().fold(f64::MAX, f64::min);
    Some((hi - lo) / center)
}

/// (slowest - fastest) / median of `times`, as a fraction; None for fewer than 2 times.
pub(crate) fn spread_about_median(times: &[f64]) -> Option<f64> {
    if times.len() < 2 {
        return None;
    }
    spread(times, median(times)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_and_errors_by_hand() {
        // 9, 10, 12: (12 - 9) / 10 = 0.3
        assert_eq!(spread_about_median(&[10.0, 12.0, 9.0]), Some(0.3));
        assert_eq!(spread(&[10.0, 12.0], 8.0), Some(0.25));
        assert_eq!(spread(&[10.0], 10.0), None);
        assert_eq!(
            (abs_rel_error(15.0, 10.0), abs_rel_error(5.0, 10.0)),
            (0.5, 0.5)
        );
        let s = ErrorStats::of(&[0.1, 0.3, 0.2, f64::NAN]).unwrap();
        assert_eq!((s.n, s.median_abs_error_pct), (3, 20.0));
        assert!((s.worst_abs_error_pct - 30.0).abs() < 1e-12);
    }
}
