//! The calibrated time of one (collective, algorithm, protocol).
//!
//! NCCL's form (`tuning.cc`, `ncclTopoGetAlgoTime`): `time = latency + bytes /
//! (1000 x bandwidth)` µs, bandwidth in GB/s. Measured on the 2x H200 it is
//! wrong in two ways a person can see in the curves
//! (`bench/results/verify-h200x2-final-2026-11-30/verify.json`):
//!
//! 1. The knee. Below a pair's saturation size NCCL launches fewer channels
//!    (one per `threadThreshold x nThreads` bytes) so the time stays near the
//!    latency and then turns sharply linear: Ring/LL measures 14.1 µs at 1 MiB
//!    where latency + bytes/bandwidth with the fitted 11 µs and 121 GB/s gives
//!    19.7. Latency and transfer overlap instead of adding.
//! 2. The ramp. Simple and LL128 reach their asymptotic bandwidth slowly:
//!    Ring/Simple's effective bandwidth is 212 GB/s at 16 MiB, 298 at 256 MiB
//!    and 346 at 4 GiB. That is what places the LL -> LL128 -> Simple
//!    crossovers at 2-8 MiB.
//!
//! Two terms, each reducing to NCCL's form at its neutral value, capture them:
//!
//! ```text
//! transfer_us = bytes / (1000 x bandwidth_gbs) x (1 + (ramp_bytes / bytes)^ramp_exponent)
//! time_us     = (latency_us^overlap + transfer_us^overlap)^(1 / overlap)
//! ```
//!
//! * `latency_us`: the time of an empty call.
//! * `bandwidth_gbs`: the asymptotic bandwidth (bytes / 1000 / µs = GB/s).
//! * `ramp_bytes`: the size at which the transfer runs at half that bandwidth
//!   (0: no ramp, NCCL's form). `ramp_exponent` (0.2-2): how sharply it
//!   approaches the asymptote.
//! * `overlap` (>= 1): 1 adds latency and transfer as NCCL does; larger
//!   values let the latency hide under the transfer (a smooth maximum).
//!
//! Two more terms, fitted only where the data has the sizes for them and
//! needs them (`solver::fit_points` keeps a term only when it pays for its
//! parameters, by BIC):
//!
//! 3. A second, slower ramp: `+ (ramp2_bytes / bytes)^ramp2_exponent` in the
//!    ramp factor. NCCL's Ring/Simple approaches its peak in two stages: the
//!    1-8 MiB knee (the first ramp) and a slow creep of the incremental
//!    bandwidth from 275 GB/s at 4-32 MiB to 354 GB/s at 2-4 GiB.
//! 4. The L2 step: the transfer is divided by `1 + (cache_speedup - 1) x
//!    logistic((log2 cache_bytes - log2 bytes) / cache_width_octaves)`.
//!    While the buffers fit in the L2 (60 MB on an H200) the bandwidth is
//!    `cache_speedup` times higher; `cache_bytes` is the message size where
//!    the step is half done, `cache_width_octaves` its width (log2 of bytes).
//!    Our native Tree/LL128 runs 8 -> 16 MiB at 214 GB/s and 16 -> 32 MiB at
//!    131 GB/s.

use serde::{Deserialize, Serialize};

/// Fitted parameters of one pair, with units in the names.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairParams {
    pub latency_us: f64,
    pub bandwidth_gbs: f64,
    /// 0 when the pair has no ramp term.
    pub ramp_bytes: f64,
    pub(crate) ramp_exponent: f64,
    /// 1 = NCCL's additive form.
    pub overlap: f64,
    /// Second, slower ramp; 0 when the pair has none.
    #[serde(default)]
    pub(crate) ramp2_bytes: f64,
    #[serde(default = "one")]
    pub(crate) ramp2_exponent: f64,
    /// Message size at the middle of the L2 step; 0 when the pair has none.
    #[serde(default)]
    pub(crate) cache_bytes: f64,
    /// Bandwidth factor while the buffers fit in the L2 (1: no step).
    #[serde(default = "one")]
    pub(crate) cache_speedup: f64,
    /// Width of the logistic step in octaves of bytes.
    #[serde(default = "one")]
    pub(crate) cache_width_octaves: f64,
}

fn one() -> f64 {
    1.0
}

impl PairParams {
    /// NCCL's form with these two numbers.
    pub fn stock_form(latency_us: f64, bandwidth_gbs: f64) -> PairParams {
        PairParams {
            latency_us,
            bandwidth_gbs,
            ramp_bytes: 0.0,
            ramp_exponent: 1.0,
            overlap: 1.0,
            ramp2_bytes: 0.0,
            ramp2_exponent: 1.0,
            cache_bytes: 0.0,
            cache_speedup: 1.0,
            cache_width_octaves: 1.0,
        }
    }

    /// Factor by which ramps and the L2 step stretch the transfer time.
    #[inline]
    pub(crate) fn transfer_factor(&self, bytes: f64) -> f64 {
        let mut ramp = 1.0;
        if self.ramp_bytes > 0.0 {
            ramp += (self.ramp_bytes / bytes).powf(self.ramp_exponent);
        }
        if self.ramp2_bytes > 0.0 {
            ramp += (self.ramp2_bytes / bytes).powf(self.ramp2_exponent);
        }
        if self.cache_bytes > 0.0 {
            let x = (self.cache_bytes / bytes).log2() / self.cache_width_octaves;
            let inside = 1.0 / (1.0 + (-x).exp());
            ramp /= 1.0 + (self.cache_speedup - 1.0) * inside;
        }
        ramp
    }

    /// Predicted time of one call, µs.
    #[inline]
    pub(crate) fn time_us(&self, bytes: f64) -> f64 {
        let bytes = bytes.max(1.0);
        let transfer = bytes / (1000.0 * self.bandwidth_gbs) * self.transfer_factor(bytes);
        smooth_max(self.latency_us, transfer, self.overlap)
    }

    /// Effective bandwidth of the transfer at `bytes` (GB/s), latency excluded.
    #[cfg(test)]
    fn effective_bandwidth_gbs(&self, bytes: f64) -> f64 {
        self.bandwidth_gbs / self.transfer_factor(bytes.max(1.0))
    }
}

/// `(a^k + b^k)^(1/k)` for a, b >= 0, k >= 1, without overflow.
#[inline]
pub(crate) fn smooth_max(a: f64, b: f64, k: f64) -> f64 {
    if k == 1.0 {
        return a + b;
    }
    let (hi, lo) = if a >= b { (a, b) } else { (b, a) };
    if hi <= 0.0 {
        return 0.0;
    }
    hi * (1.0 + (lo / hi).powf(k)).powf(1.0 / k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neutral_terms_give_nccls_form() {
        // 10 µs + 1 MiB / (1000 x 100 GB/s) = 10 + 10.48576 µs
        let p = PairParams::stock_form(10.0, 100.0);
        assert!((p.time_us(1048576.0) - 20.48576).abs() < 1e-9);
    }

    #[test]
    fn ramp_halves_the_bandwidth_at_ramp_bytes() {
        let p = PairParams {
            latency_us: 0.0,
            bandwidth_gbs: 200.0,
            ramp_bytes: 4e6,
            ramp_exponent: 0.7,
            overlap: 1.0,
            ..PairParams::stock_form(0.0, 200.0)
        };
        // at 4 MB: transfer = 4e6 / 2e5 x (1 + 1) = 40 µs
        assert!((p.time_us(4e6) - 40.0).abs() < 1e-9);
        assert!((p.effective_bandwidth_gbs(4e6) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn second_ramp_and_l2_step() {
        let p = PairParams {
            ramp2_bytes: 1e8,
            ramp2_exponent: 0.5,
            ..PairParams::stock_form(0.0, 300.0)
        };
        // at 1e8 B: (1e8/1e8)^0.5 = 1 -> half the bandwidth
        assert!((p.effective_bandwidth_gbs(1e8) - 150.0).abs() < 1e-9);
        // at 4e8 B: 1 + 0.5 -> 200 GB/s
        assert!((p.effective_bandwidth_gbs(4e8) - 200.0).abs() < 1e-9);
        let c = PairParams {
            cache_bytes: 3e7,
            cache_speedup: 1.6,
            cache_width_octaves: 0.25,
            ..PairParams::stock_form(0.0, 100.0)
        };
        // half way at cache_bytes: 1 + 0.6 / 2
        assert!((c.effective_bandwidth_gbs(3e7) - 130.0).abs() < 1e-9);
        // two octaves below: 1 + 0.6 x logistic(8) = 159.98
        assert!((c.effective_bandwidth_gbs(7.5e6) - 159.98).abs() < 0.01);
        // two octaves above: 1 + 0.6 x logistic(-8) = 1.000201, back near 100
        assert!((c.effective_bandwidth_gbs(1.2e8) - 100.0201).abs() < 0.001);
    }

    #[test]
    fn overlap_is_a_smooth_maximum() {
        // k = 2: sqrt(3^2 + 4^2) = 5
        assert!((smooth_max(3.0, 4.0, 2.0) - 5.0).abs() < 1e-12);
        assert!((smooth_max(4.0, 3.0, 2.0) - 5.0).abs() < 1e-12);
        // large k tends to the maximum
        assert!((smooth_max(3.0, 4.0, 60.0) - 4.0).abs() < 1e-6);
        assert_eq!(smooth_max(0.0, 0.0, 3.0), 0.0);
    }
}
