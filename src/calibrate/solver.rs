//! A small robust least-squares solver for `model::PairParams`.
//!
//! Residuals are relative, on log time (`ln predicted - ln measured`), so a
//! 5 % miss at 8 B weighs as much as one at 4 GiB. The loss is soft-L1
//! (`2 s^2 (sqrt(1 + (r/s)^2) - 1)`, s = 2 %): quadratic for misses within
//! the measurement noise, linear beyond, so a few odd sizes (a cache effect,
//! a noisy repeat) cannot drag the whole curve. It is minimised by
//! Levenberg-Marquardt on iteratively reweighted residuals (weight
//! `1 / sqrt(1 + (r/s)^2)`, the soft-L1 IRLS weight), with box bounds, from a
//! handful of starts on a coarse grid of ramp sizes and overlaps; the best
//! end point wins. The second ramp and the L2 step are then tried from the
//! base fit (a few starts each) and kept only when they pay for their
//! parameters: lowest `n ln(loss / n) + k ln n` (BIC on the loss) wins. Up
//! to 10 parameters and a few dozen sizes: microseconds per iteration, no
//! dependency.

use super::model::PairParams;

/// Scale of the soft-L1 loss: relative misses below it count quadratically.
pub(crate) const LOSS_SCALE: f64 = 0.02;

/// Which terms beyond NCCL's latency and bandwidth are fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Terms {
    pub(crate) ramp: bool,
    pub(crate) overlap: bool,
    /// A second, slower ramp (tried, kept if it pays).
    pub(crate) ramp2: bool,
    /// The L2 step (tried, kept if it pays).
    pub(crate) cache: bool,
}

impl Terms {
    /// NCCL's form plus the ramp and overlap as given, nothing else.
    pub(crate) fn base(ramp: bool, overlap: bool) -> Terms {
        Terms {
            ramp,
            overlap,
            ramp2: false,
            cache: false,
        }
    }

    pub(crate) fn count(self) -> usize {
        2 + 2 * usize::from(self.ramp)
            + usize::from(self.overlap)
            + 2 * usize::from(self.ramp2)
            + 3 * usize::from(self.cache)
    }
}

pub(crate) struct Solution {
    pub(crate) params: PairParams,
    /// The terms kept.
    pub(crate) terms: Terms,
}

const N: usize = 10;

// θ = [ln latency, ln bandwidth, ln ramp_bytes, ramp_exponent, overlap,
//      ln ramp2_bytes, ramp2_exponent, ln cache_bytes, cache_speedup,
//      cache_width_octaves]
const LOWER: [f64; N] = [
    -6.907_755_278_982_137, // ln 1e-3
    -9.210_340_371_976_182, // ln 1e-4
    0.0,                    // ln 1
    0.2,
    1.0,
    0.0, // ln 1
    0.1,
    16.523_560_759_066_484, // ln 1.5e7: two buffers of a working set in [L2/2, 2 L2] ...
    0.5,                    // below 1: the kernel slower below the step than above
    0.1,
];
const UPPER: [f64; N] = [
    16.118_095_650_958_32,  // ln 1e7
    11.512_925_464_970_229, // ln 1e5
    29.933_606_208_922_594, // ln 1e13
    2.0,
    8.0,
    29.933_606_208_922_594, // ln 1e13
    1.0,                    // above 1 the transfer would grow as the message shrinks
    17.909_855_186_755_04,  // ... ln 6e7, of the H200's 60 MB L2: a cache, not a knee
    2.0,                    // the L2 at most doubles the bandwidth
    1.0,                    // a step: at most one octave wide
];

fn params_of(theta: &[f64; N], terms: Terms) -> PairParams {
    PairParams {
        latency_us: theta[0].exp(),
        bandwidth_gbs: theta[1].exp(),
        ramp_bytes: if terms.ramp { theta[2].exp() } else { 0.0 },
        ramp_exponent: if terms.ramp { theta[3] } else { 1.0 },
        overlap: if terms.overlap { theta[4] } else { 1.0 },
        ramp2_bytes: if terms.ramp2 { theta[5].exp() } else { 0.0 },
        ramp2_exponent: if terms.ramp2 { theta[6] } else { 1.0 },
        cache_bytes: if terms.cache { theta[7].exp() } else { 0.0 },
        cache_speedup: if terms.cache { theta[8] } else { 1.0 },
        cache_width_octaves: if terms.cache { theta[9] } else { 1.0 },
    }
}

fn active(terms: Terms) -> Vec<usize> {
    let mut idx = vec![0, 1];
    if terms.ramp {
        idx.extend([2, 3]);
    }
    if terms.overlap {
        idx.push(4);
    }
    if terms.ramp2 {
        idx.extend([5, 6]);
    }
    if terms.cache {
        idx.extend([7, 8, 9]);
    }
    idx
}

fn residuals(theta: &[f64; N], terms: Terms, points: &[(f64, f64)], out: &mut Vec<f64>) {
    let p = params_of(theta, terms);
    out.clear();
    out.extend(points.iter().map(|&(b, t)| p.time_us(b).ln() - t.ln()));
}

fn soft_l1(r: &[f64]) -> f64 {
    let s2 = LOSS_SCALE * LOSS_SCALE;
    r.iter()
        .map(|x| 2.0 * s2 * ((1.0 + x * x / s2).sqrt() - 1.0))
        .sum()
}

fn loss(theta: &[f64; N], terms: Terms, points: &[(f64, f64)], scratch: &mut Vec<f64>) -> f64 {
    residuals(theta, terms, points, scratch);
    let l = soft_l1(scratch);
    if l.is_finite() {
        l
    } else {
        f64::INFINITY
    }
}

fn clamp(theta: &mut [f64; N]) {
    for i in 0..N {
        theta[i] = theta[i].clamp(LOWER[i], UPPER[i]);
    }
}

/// Solve `a x = b` (n <= 5) by Gaussian elimination with partial pivoting.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-300 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        let (top, rest) = a.split_at_mut(col + 1);
        let pivot_row = &top[col];
        for (i, row) in rest.iter_mut().enumerate() {
            let f = row[col] / pivot_row[col];
            for (x, p) in row.iter_mut().zip(pivot_row).skip(col) {
                *x -= f * p;
            }
            b[col + 1 + i] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let s: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - s) / a[row][row];
    }
    x.iter().all(|v| v.is_finite()).then_some(x)
}

/// Levenberg-Marquardt with IRLS weights from one start, at most
/// `iterations` steps; stops early when a step gains less than 1e-10 of the
/// loss.
fn descend(
    start: [f64; N],
    terms: Terms,
    points: &[(f64, f64)],
    iterations: usize,
) -> ([f64; N], f64) {
    descend_over(
        start,
        terms,
        points,
        iterations,
        &active(terms),
        Loss::SoftL1,
    )
}

/// What `descend_over` minimises.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loss {
    SoftL1,
    /// Plain least squares: one size far off the curve weighs as its square.
    Squares,
}

/// `descend` over the parameters `idx` only; the others keep their start.
fn descend_over(
    start: [f64; N],
    terms: Terms,
    points: &[(f64, f64)],
    iterations: usize,
    idx: &[usize],
    kind: Loss,
) -> ([f64; N], f64) {
    let loss = |theta: &[f64; N], terms: Terms, points: &[(f64, f64)], r: &mut Vec<f64>| match kind
    {
        Loss::SoftL1 => loss(theta, terms, points, r),
        Loss::Squares => {
            residuals(theta, terms, points, r);
            let l: f64 = r.iter().map(|x| x * x).sum();
            if l.is_finite() {
                l
            } else {
                f64::INFINITY
            }
        }
    };
    let m = idx.len();
    let n = points.len();
    let mut theta = start;
    clamp(&mut theta);
    let mut r = Vec::with_capacity(n);
    let mut scratch = Vec::with_capacity(n);
    let mut current = loss(&theta, terms, points, &mut r);
    let mut lambda = 1e-2;
    let mut jac = vec![vec![0.0; m]; n];
    for _ in 0..iterations {
        residuals(&theta, terms, points, &mut r);
        let s2 = LOSS_SCALE * LOSS_SCALE;
        let w: Vec<f64> = r
            .iter()
            .map(|x| match kind {
                Loss::SoftL1 => 1.0 / (1.0 + x * x / s2).sqrt(),
                Loss::Squares => 1.0,
            })
            .collect();
        // Forward-difference Jacobian of the residuals over the active parameters.
        for (col, &j) in idx.iter().enumerate() {
            let (shifted, step) = difference_point(&theta, j, UPPER[j]);
            residuals(&shifted, terms, points, &mut scratch);
            for i in 0..n {
                jac[i][col] = (scratch[i] - r[i]) / step;
            }
        }
        let mut a = vec![vec![0.0; m]; m];
        let mut g = vec![0.0; m];
        for i in 0..n {
            for p in 0..m {
                g[p] += jac[i][p] * w[i] * r[i];
                for q in 0..m {
                    a[p][q] += jac[i][p] * w[i] * jac[i][q];
                }
            }
        }
        let improved = damped_step(
            &mut theta,
            &mut current,
            &mut lambda,
            (&a, &g),
            idx,
            &clamp,
            |t| loss(t, terms, points, &mut scratch),
        );
        if !improved {
            break;
        }
    }
    (theta, current)
}

/// Levenberg-Marquardt on the soft-L1 loss (IRLS weights, as `descend`) of any residual function over the
/// parameters `idx` of a fixed-size vector, within `lower..=upper`, at most `iterations` steps. Each step costs
/// `idx.len() + 1` evaluations of `residuals` and an `idx.len()`-square solve: with the residuals linear in the
/// points, O(points x iterations) in all. Returns the end point and its loss.
pub(crate) fn minimise<const P: usize>(
    start: [f64; P],
    lower: &[f64; P],
    upper: &[f64; P],
    idx: &[usize],
    residuals: &dyn Fn(&[f64; P], &mut Vec<f64>),
    iterations: usize,
) -> ([f64; P], f64) {
    let clamp = |t: &mut [f64; P]| {
        for i in 0..P {
            t[i] = t[i].clamp(lower[i], upper[i]);
        }
    };
    let loss_of = |t: &[f64; P], r: &mut Vec<f64>| {
        residuals(t, r);
        let l = soft_l1(r);
        if l.is_finite() {
            l
        } else {
            f64::INFINITY
        }
    };
    let m = idx.len();
    let mut theta = start;
    clamp(&mut theta);
    let mut r = Vec::new();
    let mut scratch = Vec::new();
    let mut current = loss_of(&theta, &mut r);
    if !current.is_finite() {
        return (theta, current);
    }
    let mut lambda = 1e-2;
    let mut jac: Vec<Vec<f64>> = Vec::new();
    let s2 = LOSS_SCALE * LOSS_SCALE;
    for _ in 0..iterations {
        residuals(&theta, &mut r);
        let n = r.len();
        let w: Vec<f64> = r.iter().map(|x| 1.0 / (1.0 + x * x / s2).sqrt()).collect();
        jac.resize(m, Vec::new());
        for (col, &j) in idx.iter().enumerate() {
            let (shifted, step) = difference_point(&theta, j, upper[j]);
            residuals(&shifted, &mut scratch);
            let column = &mut jac[col];
            column.clear();
            column.extend((0..n).map(|i| {
                let d = (scratch.get(i).copied().unwrap_or(f64::NAN) - r[i]) / step;
                if d.is_finite() {
                    d
                } else {
                    0.0
                }
            }));
        }
        let mut a = vec![vec![0.0; m]; m];
        let mut g = vec![0.0; m];
        for p in 0..m {
            for i in 0..n {
                g[p] += jac[p][i] * w[i] * r[i];
            }
            for q in p..m {
                let v: f64 = (0..n).map(|i| jac[p][i] * w[i] * jac[q][i]).sum();
                a[p][q] = v;
                a[q][p] = v;
            }
        }
        let improved = damped_step(
            &mut theta,
            &mut current,
            &mut lambda,
            (&a, &g),
            idx,
            &clamp,
            |t| loss_of(t, &mut scratch),
        );
        if !improved {
            break;
        }
    }
    (theta, current)
}

/// The point of a forward difference in parameter `j` and its signed step: up by `h`, or down where up would pass
/// the parameter's `upper` bound.
fn difference_point<const P: usize>(theta: &[f64; P], j: usize, upper: f64) -> ([f64; P], f64) {
    let h = 1e-6 * theta[j].abs().max(1.0);
    let mut shifted = *theta;
    shifted[j] += h;
    if shifted[j] > upper {
        shifted[j] = theta[j] - h;
        (shifted, -h)
    } else {
        (shifted, h)
    }
}

/// One Levenberg-Marquardt step from `theta` on the normal equations (`a`, `g`) of the active parameters `idx`:
/// the damping `lambda` rises until a (clamped) step lowers the loss, and falls after one that does. True when the
/// loss fell by more than a relative 1e-10, so another step may pay.
fn damped_step<const P: usize>(
    theta: &mut [f64; P],
    current: &mut f64,
    lambda: &mut f64,
    (a, g): (&[Vec<f64>], &[f64]),
    idx: &[usize],
    clamp: &dyn Fn(&mut [f64; P]),
    mut loss: impl FnMut(&[f64; P]) -> f64,
) -> bool {
    let m = idx.len();
    while *lambda < 1e12 {
        let mut damped = a.to_vec();
        for p in 0..m {
            damped[p][p] += *lambda * (a[p][p] + 1e-12);
        }
        let Some(delta) = solve(damped, g.iter().map(|x| -x).collect()) else {
            *lambda *= 10.0;
            continue;
        };
        let mut next = *theta;
        for (col, &j) in idx.iter().enumerate() {
            next[j] += delta[col];
        }
        clamp(&mut next);
        let l = loss(&next);
        if l < *current {
            let gain = *current - l;
            *theta = next;
            *current = l;
            *lambda = (*lambda / 3.0).max(1e-12);
            return gain > 1e-10 * current.max(1e-300);
        }
        *lambda *= 4.0;
    }
    false
}

/// BIC of a soft-L1 loss over `n` points with `k` parameters.
fn bic(loss: f64, n: usize, k: usize) -> f64 {
    let n = n as f64;
    n * (loss.max(1e-300) / n).ln() + k as f64 * n.ln()
}

/// Message size where a 60 MB L2 (H200) stops holding the two buffers of
/// an all-reduce (send and receive): the first guess of the L2 step.
const L2_STEP_GUESS_BYTES: f64 = 3e7;

/// Worst |relative error| of `theta` over `points`.
fn worst_residual(theta: &[f64; N], terms: Terms, points: &[(f64, f64)]) -> f64 {
    let mut r = Vec::with_capacity(points.len());
    residuals(theta, terms, points, &mut r);
    r.iter().fold(0.0, |w, x| w.max(x.abs()))
}

/// Whether an L2 step `theta` earns its place against the current `best`
/// although the BIC on the robust loss (which counts the one or two sizes
/// the step moves only linearly) would not take it: the step is large
/// (by 5 % or more, either way), has at least two measured sizes on each side, and cuts
/// the worst training residual by a fifth.
fn step_pays(
    theta: &[f64; N],
    cache_terms: Terms,
    best: &([f64; N], Terms, f64),
    points: &[(f64, f64)],
) -> bool {
    let at = theta[7].exp();
    let below = points.iter().filter(|p| p.0 < at).count();
    let above = points.len() - below;
    theta[8].ln().abs() >= 1.05f64.ln()
        && below >= 2
        && above >= 2
        && worst_residual(theta, cache_terms, points)
            <= worst_residual(&best.0, best.1, points) * 0.8
}

/// The best fit so far: its parameters, its terms and its BIC.
type Best = ([f64; N], Terms, f64);

/// Fit `points` (bytes, median µs), all positive, with `terms`. None when
/// there are fewer sizes than parameters.
pub(crate) fn fit_points(points: &[(f64, f64)], terms: Terms) -> Option<Solution> {
    let base_terms = Terms::base(terms.ramp, terms.overlap);
    if points.len() < base_terms.count() || points.iter().any(|&(b, t)| !(b > 0.0 && t > 0.0)) {
        return None;
    }
    let (base, base_loss) = base_fit(points, base_terms)?;
    if !base_loss.is_finite() {
        return None;
    }
    let n = points.len();
    let mut best = (base, base_terms, bic(base_loss, n, base_terms.count()));
    // The optional terms alone, each from a few starts around the base fit
    // (one of them neutral: speedup 1, a ramp2 of 1 byte), then together
    // from the two single fits merged; kept only where the BIC says the data
    // needs them.
    let mut singles: Vec<[f64; N]> = Vec::new();
    let with = |r2: f64, e2: f64, w: f64, speedup: f64| start_with(&base, r2, e2, w, speedup);
    if terms.ramp2
        && n >= (Terms {
            ramp2: true,
            ..base_terms
        })
        .count()
    {
        let starts = [
            with(1.0, 1.0, 3e7, 1.0),
            with(1e8, 0.3, 3e7, 1.0),
            with(1e9, 0.3, 3e7, 1.0),
        ];
        singles.extend(try_terms(
            Terms {
                ramp2: true,
                ..base_terms
            },
            &starts,
            &mut best,
            points,
        ));
    }
    if terms.cache
        && n >= (Terms {
            cache: true,
            ..base_terms
        })
        .count()
    {
        singles.extend(fit_cache(&base, base_terms, &mut best, points));
    }
    let both = Terms {
        ramp2: true,
        cache: true,
        ..base_terms
    };
    if let [ramp2_fit, cache_fit] = singles[..] {
        // Both together only where one alone already paid for itself.
        if n >= both.count() && best.1 != base_terms {
            let mut merged = ramp2_fit;
            merged[7..].copy_from_slice(&cache_fit[7..]);
            try_terms(both, &[merged], &mut best, points);
        }
    }
    Some(Solution {
        params: params_of(&best.0, best.1),
        terms: best.1,
    })
}

/// The base fit (latency, bandwidth, and the ramp and overlap where asked): a short descent from every start,
/// then the two best to convergence. (parameters, loss); None without a start.
fn base_fit(points: &[(f64, f64)], base_terms: Terms) -> Option<([f64; N], f64)> {
    let latency0 = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let bandwidth0 = points
        .iter()
        .map(|&(b, t)| b / (1000.0 * t))
        .fold(0.0, f64::max)
        .max(1e-3);
    let ramps: &[f64] = if base_terms.ramp {
        &[1e5, 1e6, 1e7, 1e8]
    } else {
        &[1.0]
    };
    let overlaps: &[f64] = if base_terms.overlap {
        &[1.05, 2.0]
    } else {
        &[1.0]
    };
    // Neutral values of the optional terms, so a start of the base fit can
    // seed the extended ones.
    let neutral = [
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        1.0,
        L2_STEP_GUESS_BYTES.ln(),
        1.0,
        0.5,
    ];
    // A short descent from every start, then the two best to convergence.
    let mut ends: Vec<([f64; N], f64)> = Vec::new();
    for &ramp in ramps {
        for &overlap in overlaps {
            let mut start = neutral;
            start[..5].copy_from_slice(&[latency0.ln(), bandwidth0.ln(), ramp.ln(), 0.7, overlap]);
            ends.push(descend(start, base_terms, points, 20));
        }
    }
    ends.sort_by(|a, b| a.1.total_cmp(&b.1));
    ends.iter()
        .take(2)
        .map(|(theta, _)| descend(*theta, base_terms, points, 200))
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// A start of an extended fit: the base fit with the optional terms' values (ramp2 bytes, its exponent, the
/// cache step's position and speedup).
fn start_with(base: &[f64; N], r2: f64, e2: f64, w: f64, speedup: f64) -> [f64; N] {
    let mut start = *base;
    start[5..].copy_from_slice(&[r2.ln(), e2, w.ln(), speedup, 0.3]);
    start
}

/// Fit with `cand` from `starts` (a short descent from each, the best to convergence); into `best` where its BIC
/// is lower. The fit; None without a start.
fn try_terms(
    cand: Terms,
    starts: &[[f64; N]],
    best: &mut Best,
    points: &[(f64, f64)],
) -> Option<[f64; N]> {
    let n = points.len();
    let mut ends: Vec<([f64; N], f64)> = starts
        .iter()
        .map(|start| descend(*start, cand, points, 15))
        .collect();
    ends.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (theta, loss) = descend(ends.first()?.0, cand, points, 80);
    let score = bic(loss, n, cand.count());
    if loss.is_finite() && score < best.2 {
        *best = (theta, cand, score);
    }
    Some(theta)
}

/// The cache step alone on the base fit: free from a few starts, then placed and held between measured sizes;
/// into `best` where it pays. The cache fit to merge with ramp2's, if any.
fn fit_cache(
    base: &[f64; N],
    base_terms: Terms,
    best: &mut Best,
    points: &[(f64, f64)],
) -> Option<[f64; N]> {
    let n = points.len();
    let with = |r2: f64, e2: f64, w: f64, speedup: f64| start_with(base, r2, e2, w, speedup);
    let cache_terms = Terms {
        cache: true,
        ..base_terms
    };
    let starts = [
        with(1.0, 1.0, 3e7, 1.0),
        with(1.0, 1.0, 2.4e7, 1.6),
        with(1.0, 1.0, 4e7, 1.3),
    ];
    let free = try_terms(cache_terms, &starts, best, points);
    // A sharp step is a narrow valley for the free fit (it ends near
    // x1.1): place it first between two measured sizes, the L2's range,
    // with the position held, then free.
    let held: Vec<usize> = active(cache_terms)
        .into_iter()
        .filter(|&j| j != 7)
        .collect();
    // Each start fitted twice: on the robust loss, and on plain squares,
    // which lets the one size the step moves pull as hard as it misses.
    let mut stepped: Vec<([f64; N], f64)> = Vec::new();
    for (at, speedup) in [(2.4e7, 1.6), (3e7, 1.6), (2.4e7, 0.7)] {
        for kind in [Loss::SoftL1, Loss::Squares] {
            let start = with(1.0, 1.0, at, speedup);
            let (theta, _) = descend_over(start, cache_terms, points, 120, &held, kind);
            stepped.push((theta, loss(&theta, cache_terms, points, &mut Vec::new())));
        }
    }
    stepped.retain(|s| s.1.is_finite());
    // Kept by the BIC (the position is not fitted: one parameter fewer),
    // or, failing that, by `step_pays`: the one that cuts the worst
    // residual most.
    let by_bic = stepped
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .copied()
        .filter(|s| bic(s.1, n, cache_terms.count() - 1) < best.2);
    let by_worst = stepped
        .iter()
        .filter(|s| step_pays(&s.0, cache_terms, best, points))
        .min_by(|a, b| {
            worst_residual(&a.0, cache_terms, points).total_cmp(&worst_residual(
                &b.0,
                cache_terms,
                points,
            ))
        })
        .copied();
    let mut cache_fit = free;
    if let Some((theta, loss)) = by_bic.or(by_worst) {
        *best = (
            theta,
            cache_terms,
            bic(loss, n, cache_terms.count() - 1).min(best.2),
        );
        cache_fit = Some(theta);
    } else if cache_fit.is_none() {
        cache_fit = stepped.first().map(|s| s.0);
    }
    cache_fit
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> Vec<f64> {
        (3..=32).map(|e| 2f64.powi(e)).collect()
    }

    #[test]
    fn recovers_nccls_form_exactly() {
        let truth = PairParams::stock_form(12.5, 180.0);
        let points: Vec<(f64, f64)> = sizes().iter().map(|&b| (b, truth.time_us(b))).collect();
        let s = fit_points(&points, Terms::base(false, false)).unwrap();
        assert!((s.params.latency_us - 12.5).abs() < 1e-4, "{:?}", s.params);
        assert!(
            (s.params.bandwidth_gbs - 180.0).abs() < 1e-3,
            "{:?}",
            s.params
        );
    }

    #[test]
    fn recovers_all_terms_and_shrugs_off_an_outlier() {
        let truth = PairParams {
            latency_us: 11.0,
            bandwidth_gbs: 350.0,
            ramp_bytes: 6e6,
            ramp_exponent: 0.8,
            overlap: 2.5,
            ..PairParams::stock_form(0.0, 0.0)
        };
        let mut points: Vec<(f64, f64)> = sizes().iter().map(|&b| (b, truth.time_us(b))).collect();
        points[20].1 *= 1.5; // one size 50 % off
        let s = fit_points(&points, Terms::base(true, true)).unwrap();
        for (i, &(b, _)) in points.iter().enumerate() {
            let rel = s.params.time_us(b) / truth.time_us(b) - 1.0;
            assert!(rel.abs() < 0.01, "size {i}: {rel} {:?}", s.params);
        }
    }

    #[test]
    fn too_few_sizes_fit_nothing() {
        let points = [(8.0, 10.0), (16.0, 10.0), (32.0, 10.5)];
        assert!(fit_points(&points, Terms::base(true, true)).is_none());
        assert!(fit_points(&points, Terms::base(false, false)).is_some());
        assert!(fit_points(&[(8.0, 0.0), (16.0, 1.0)], Terms::base(false, false)).is_none());
    }
}
