//! Calibration on the expected model's form (`crate::expect`): each (collective, pair, size) is timed as the
//! expected model simulates it on the measured machine's plan (the per-call channels NCCL's model launches, the
//! protocol's steps and chunks, the links each channel crosses), with a few of its physical constants fitted to
//! that machine's own measurements, per pair:
//!
//! ```text
//! time_us = launch_us + fill + steps x max(step_us, step bytes / rate)
//! rate    = min(busiest link x link_efficiency / its flows, channel_gbs) per channel
//! ```
//!
//! * `launch_us`: the call's launch and completion (the per-hop fill of the first chunk stays the expected
//!   model's, so the two are one number to the data);
//! * `step_us`: the protocol's per-step synchronisation;
//! * `channel_gbs`: what one channel moves per second (its threads' loads and stores; a reducing collective's
//!   reduce-copy included, so the expected model's `reduce_efficiency` is folded in);
//! * `link_efficiency`: the fraction of the expected link rate (the link's physical rate x the protocol's wire
//!   efficiency) this machine reaches.
//!
//! Each is pulled weakly towards the expected model's own value (`PRIOR_SCALE`), so a constant the data does not
//! identify (the link rate of a pair its threads bound, the step cost of a pair whose steps are never the limit)
//! stays physical instead of drifting, and a size range left out is predicted by the physics, not by a curve that
//! only interpolates. Two empirical terms of the old form are kept on top where they still pay (the BIC on the
//! training sizes): the second, slow ramp and the L2 step (`model::PairParams`), both as a stretch of the
//! bandwidth term (`expect::evaluate_with`).
//!
//! The calibration file stores what the form needs to be evaluated without the topology (`FormBasis`): the plan
//! (links and flows), the resolved constants and, per (collective, pair), NCCL's channel count by size.

use super::model::PairParams;
use super::solver::{self, LOSS_SCALE};
use crate::error::{Error, Result};
use crate::expect::plan::{ChannelFlows, LinkClass, Plan, Slot};
use crate::expect::{self, ExpectOptions, Prepared, Resolved};
use crate::model::input::NvlsFlag;
use crate::model::select::Call;
use crate::model::{table, Algo, Coll, Pair, Proto};
use crate::nccl_env::NcclEnv;
use crate::topo::{Cluster, CpuVendor};
use serde::{Deserialize, Serialize};

/// The fitted physical constants of one pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Physical {
    pub launch_us: f64,
    pub step_us: f64,
    pub channel_gbs: f64,
    pub link_efficiency: f64,
}

impl Physical {
    fn valid(&self) -> bool {
        [
            self.launch_us,
            self.step_us,
            self.channel_gbs,
            self.link_efficiency,
        ]
        .iter()
        .all(|v| v.is_finite() && *v > 0.0)
    }
}

/// NCCL's channel count for one (collective, pair) by size: `[from_bytes, channels]`, ascending.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChannelTable {
    pub collective: Coll,
    pub pair: Pair,
    pub channels_from_bytes: Vec<[u64; 2]>,
}

impl ChannelTable {
    fn at(&self, bytes: u64) -> usize {
        let i = self
            .channels_from_bytes
            .partition_point(|e| e[0] <= bytes)
            .saturating_sub(1);
        self.channels_from_bytes
            .get(i)
            .map(|e| e[1] as usize)
            .unwrap_or(1)
            .max(1)
    }
}

/// What evaluating the expected form needs, topology-free: kept in a calibration file of the expected form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "StoredBasis", into = "StoredBasis")]
pub struct FormBasis {
    pub plan: Plan,
    pub resolved: Resolved,
    /// The GPU class whose constants are the priors (`expect::gpu_class`).
    pub gpu_class: String,
    /// The machine class of the expected model, e.g. "sm90 nvswitch".
    pub machine_class: String,
    pub nccl_family: String,
    pub channels: Vec<ChannelTable>,
}

/// The expected model's algorithms `calibrate` fits on its form.
fn modelled(algo: Algo) -> bool {
    matches!(algo, Algo::Ring | Algo::Tree | Algo::Nvls | Algo::NvlsTree)
}

const COLLS: [Coll; 5] = [
    Coll::AllReduce,
    Coll::AllGather,
    Coll::ReduceScatter,
    Coll::Broadcast,
    Coll::Reduce,
];

impl FormBasis {
    /// The basis of `cluster` under NCCL `nccl_version` (its tuning table; the newest without one) and NCCL's
    /// default environment.
    pub fn of_cluster(cluster: &Cluster, nccl_version: Option<&str>) -> Result<FormBasis> {
        let table = match nccl_version.and_then(|v| table::builtin_for_version(v).ok()) {
            Some((t, _notice)) => t,
            None => table::builtin(table::newest_family())?,
        };
        let family = format!("{}.{}", table.version.0, table.version.1);
        let (model, e) = expect::build(
            cluster,
            None,
            table,
            NcclEnv::default(),
            NvlsFlag::Auto,
            &ExpectOptions::default(),
        )?;
        let n = e.n_ranks();
        let channels_of = |coll: Coll, bytes: u64| -> Vec<(Pair, usize)> {
            let Ok(call) = Call::new(coll, bytes, n, 1) else {
                return Vec::new();
            };
            let Ok(eval) = model.evaluate(&call) else {
                return Vec::new();
            };
            eval.candidates
                .iter()
                .filter(|c| modelled(c.algo))
                .map(|c| (Pair::new(c.algo, c.proto), c.channels))
                .collect()
        };
        let mut tables: Vec<ChannelTable> = Vec::new();
        for coll in COLLS {
            // Powers of two from 4 B to 1 TiB; a change between two of them is placed by bisection.
            let sizes: Vec<u64> = (2..=40).map(|k| 1u64 << k).collect();
            let samples: Vec<Vec<(Pair, usize)>> =
                sizes.iter().map(|&s| channels_of(coll, s)).collect();
            let mut pairs: Vec<Pair> = samples.iter().flatten().map(|p| p.0).collect();
            pairs.sort();
            pairs.dedup();
            for pair in pairs {
                let get = |v: &[(Pair, usize)]| v.iter().find(|p| p.0 == pair).map(|p| p.1);
                let mut steps: Vec<[u64; 2]> = Vec::new();
                let mut prev: Option<(u64, usize)> = None;
                for (s, v) in sizes.iter().zip(&samples) {
                    let Some(c) = get(v) else { continue };
                    match prev {
                        None => steps.push([0, c as u64]),
                        Some((lo, pc)) if pc != c => {
                            let (mut lo, mut hi) = (lo, *s);
                            while hi - lo > 1 {
                                let mid = lo + (hi - lo) / 2;
                                match get(&channels_of(coll, mid)) {
                                    Some(m) if m == c => hi = mid,
                                    _ => lo = mid,
                                }
                            }
                            steps.push([hi, c as u64]);
                        }
                        Some(_) => {}
                    }
                    prev = Some((*s, c));
                }
                if !steps.is_empty() {
                    tables.push(ChannelTable {
                        collective: coll,
                        pair,
                        channels_from_bytes: steps,
                    });
                }
            }
        }
        Ok(FormBasis {
            plan: e.plan.clone(),
            resolved: e.resolved,
            gpu_class: e.class.gpu_class.clone(),
            machine_class: e.class.name.clone(),
            nccl_family: family,
            channels: tables,
        })
    }

    /// The basis of a topology XML (a verify result file's own dump) on `gpus` ranks.
    pub fn of_xml(
        xml_text: &str,
        source: &str,
        gpus: usize,
        nccl_version: Option<&str>,
    ) -> Result<FormBasis> {
        let root = crate::xml::parse(xml_text, source)?;
        let node = crate::topo::build::from_xml(&root, source)?;
        let per_node = node.gpu_count().max(1);
        let cluster = Cluster {
            node,
            n_nodes: (gpus / per_node).max(1),
            net_latency_us: 0.0,
        };
        FormBasis::of_cluster(&cluster, nccl_version)
    }

    fn table(&self, coll: Coll, pair: Pair) -> Option<&ChannelTable> {
        self.channels
            .iter()
            .find(|t| t.collective == coll && t.pair == pair)
    }

    /// The parameter-free structure of one call (None: the pair is not on the form here).
    pub fn prepared(&self, coll: Coll, pair: Pair, bytes: u64) -> Option<Shaped> {
        let (algo, proto) = pair.nccl()?;
        if !modelled(algo) {
            return None;
        }
        let channels = self.table(coll, pair)?.at(bytes);
        let model_bytes = Call::new(coll, bytes, self.plan.n_ranks, 1)
            .map(|c| c.model_bytes)
            .unwrap_or(bytes.max(1));
        let pp = expect::prepare(
            &self.plan,
            &self.resolved.chunking,
            coll,
            algo,
            proto,
            model_bytes,
            channels,
        )?;
        let chunk_steps = chunk_steps(&pp, coll, algo);
        Some(Shaped { pp, chunk_steps })
    }

    /// The expected model's own constants for `pp`'s pair: the priors of a fit.
    pub fn prior(&self, shaped: &Shaped) -> Physical {
        let pp = &shaped.pp;
        let p = pp.proto as usize;
        let r = &self.resolved;
        Physical {
            launch_us: r.launch_us,
            step_us: r.step_us[p],
            channel_gbs: r.channel_gbs[p] * if pp.reduces { r.reduce_efficiency } else { 1.0 },
            link_efficiency: 1.0,
        }
    }

    fn resolved_with(&self, proto: Proto, phys: &Physical) -> Resolved {
        let p = proto as usize;
        let mut r = self.resolved;
        r.launch_us = phys.launch_us;
        r.step_us[p] = phys.step_us;
        r.channel_gbs[p] = phys.channel_gbs;
        r.reduce_efficiency = 1.0;
        r.wire_efficiency[p] *= phys.link_efficiency;
        r
    }

    /// The time of a prepared call under `phys`, with the residual terms of `residual` (µs).
    pub fn time_prepared(
        &self,
        shaped: &Shaped,
        phys: &Physical,
        residual: &PairParams,
        bytes: f64,
    ) -> Option<f64> {
        let pp = &shaped.pp;
        let r = self.resolved_with(pp.proto, phys);
        let factor = residual.transfer_factor(bytes.max(1.0));
        expect::evaluate_with(&self.plan, &r, pp, factor, shaped.chunk_steps)
            .map(|t| t.0)
            .filter(|t| t.is_finite() && *t > 0.0)
    }

    /// The calibrated time of one call (µs): the form under `phys` and `residual`, times the measured ratio
    /// (`ratio_at`).
    pub fn time_us(
        &self,
        coll: Coll,
        pair: Pair,
        phys: &Physical,
        residual: &PairParams,
        ratio: &[[f64; 2]],
        bytes: u64,
    ) -> Option<f64> {
        let pp = self.prepared(coll, pair, bytes)?;
        Some(self.time_prepared(&pp, phys, residual, bytes as f64)? * ratio_at(ratio, bytes as f64))
    }

    /// Check a loaded basis: every constant finite, the plan's references in range.
    pub(crate) fn check(&self, source: &str) -> Result<()> {
        let r = &self.resolved;
        let mut values = vec![
            r.launch_us,
            r.nvls_efficiency,
            r.nvls_tree_efficiency,
            r.nvls_hop_us,
            r.reduce_efficiency,
            r.pcie_efficiency,
            r.staging_gbs,
            r.c2c_efficiency,
            r.net_efficiency,
            r.net_hop_us,
            r.net_step_us,
            r.chunking.nvls_bytes,
            r.chunking.nvls_tree_max_bytes,
        ];
        values.extend(r.hop_us);
        values.extend(r.step_us);
        values.extend(r.channel_gbs);
        values.extend(r.chunking.step_bytes);
        values.extend(r.wire_efficiency);
        values.extend(r.inter_socket_gbs);
        values.extend(r.nvlink.iter().flat_map(|(a, b)| [*a, *b]));
        values.extend(self.plan.slots.iter().map(|s| s.nominal_gbs));
        let n = self.plan.slots.len();
        let flows_ok = |f: &[ChannelFlows]| {
            f.iter().all(|c| {
                c.intra
                    .iter()
                    .chain(&c.net)
                    .all(|&(s, u)| s < n && u.is_finite() && u >= 0.0)
            })
        };
        let ok = values.iter().all(|v| v.is_finite() && *v >= 0.0)
            && r.chunking.step_bytes.iter().all(|v| *v >= 1.0)
            && self.plan.n_ranks >= 1
            && self.plan.n_ranks <= crate::limits::MAX_RANKS
            && flows_ok(&self.plan.ring)
            && flows_ok(&self.plan.tree)
            && flows_ok(&self.plan.nvls)
            && self
                .plan
                .nvls_out
                .iter()
                .chain(&self.plan.nvls_in)
                .all(|&s| s < n)
            && self.channels.iter().all(|t| {
                t.channels_from_bytes.windows(2).all(|w| w[0][0] < w[1][0])
                    && t.channels_from_bytes
                        .iter()
                        .all(|e| (1..=crate::limits::MAX_CHANNELS as u64).contains(&e[1]))
            });
        if ok {
            Ok(())
        } else {
            Err(Error::bad_input(format!(
                "{source}: expected_form: constants or plan out of range"
            )))
        }
    }
}

/// The steps of `pp` that each move a new chunk: all of a ring's (every step of a ring all-reduce moves a chunk
/// one hop on), a pipeline's minus its fill (a tree, a ring broadcast or reduce: `steps = chunks + hops - 1`). The
/// expected model spreads the volume over every step (`expect::evaluate`), so a call of one chunk per channel
/// crossing a tree's two levels is charged one chunk's transfer where it takes two; on the 2x H200 that is NCCL's
/// Tree/Simple at 2-16 MiB (incremental 175-180 GB/s at 2-8 MiB, 330-360 above 16 MiB).
fn chunk_steps(pp: &Prepared, coll: Coll, algo: Algo) -> f64 {
    let pipelined = match algo {
        Algo::Tree => true,
        Algo::Ring => matches!(coll, Coll::Broadcast | Coll::Reduce),
        _ => false,
    };
    if !pipelined {
        return pp.steps;
    }
    (pp.steps - (pp.intra_hops + pp.net_hops - 1.0).max(0.0)).max(1.0)
}

/// One call's structure on the form: the expected model's `Prepared`, and the steps of it that move a new chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Shaped {
    pub pp: Prepared,
    pub chunk_steps: f64,
}

/// The measured / form ratio at `bytes` from `knots` ([bytes, ratio], ascending bytes): linear in ln(ratio)
/// over log2(bytes) between two knots, the nearest knot's beyond the ends, 1 without knots. Between measured
/// sizes and beyond them the form's shape carries the prediction; at a measured size the measurement does.
/// O(log knots).
pub fn ratio_at(knots: &[[f64; 2]], bytes: f64) -> f64 {
    let (Some(first), Some(last)) = (knots.first(), knots.last()) else {
        return 1.0;
    };
    if bytes <= first[0] {
        return first[1];
    }
    if bytes >= last[0] {
        return last[1];
    }
    let i = knots.partition_point(|k| k[0] <= bytes);
    let (a, b) = (knots[i - 1], knots[i]);
    let x = (bytes.log2() - a[0].log2()) / (b[0].log2() - a[0].log2()).max(1e-300);
    (a[1].ln() + x * (b[1].ln() - a[1].ln())).exp()
}

// ---------------------------------------------------------------------------
// Fitting one pair

/// Prior pull: a constant a factor e off its prior costs as much as one size missed by `PRIOR_SCALE` x
/// `LOSS_SCALE` (soft-L1 scale): weak against the data, decisive where the data says nothing.
const PRIOR_SCALE: f64 = 0.5;

/// θ: [ln launch, ln step, ln channel, ln link efficiency, ln ramp2_bytes, ramp2_exponent, ln cache_bytes,
/// cache_speedup, cache_width_octaves].
const NP: usize = 9;
const LOWER: [f64; NP] = [
    -4.605_170_185_988_091, // ln 0.01 µs
    -6.907_755_278_982_137, // ln 0.001 µs
    -4.605_170_185_988_091, // ln 0.01 GB/s
    -4.605_170_185_988_091, // ln 0.01
    0.0,
    0.1,
    16.523_560_759_066_484, // ln 1.5e7: as model.rs's L2 step
    0.5,
    0.1,
];
const UPPER: [f64; NP] = [
    9.210_340_371_976_182, // ln 1e4 µs
    6.907_755_278_982_137, // ln 1e3 µs
    9.210_340_371_976_182, // ln 1e4 GB/s
    std::f64::consts::LN_2,
    29.933_606_208_922_594,
    1.0,
    17.909_855_186_755_04,
    2.0,
    1.0,
];

/// Which residual terms are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Residual {
    ramp2: bool,
    cache: bool,
}

impl Residual {
    fn active(self) -> Vec<usize> {
        let mut idx = vec![0, 1, 2, 3];
        if self.ramp2 {
            idx.extend([4, 5]);
        }
        if self.cache {
            idx.extend([6, 7, 8]);
        }
        idx
    }
}

fn physical_of(theta: &[f64; NP]) -> Physical {
    Physical {
        launch_us: theta[0].exp(),
        step_us: theta[1].exp(),
        channel_gbs: theta[2].exp(),
        link_efficiency: theta[3].exp(),
    }
}

fn residual_of(theta: &[f64; NP], terms: Residual) -> PairParams {
    PairParams {
        ramp2_bytes: if terms.ramp2 { theta[4].exp() } else { 0.0 },
        ramp2_exponent: if terms.ramp2 { theta[5] } else { 1.0 },
        cache_bytes: if terms.cache { theta[6].exp() } else { 0.0 },
        cache_speedup: if terms.cache { theta[7] } else { 1.0 },
        cache_width_octaves: if terms.cache { theta[8] } else { 1.0 },
        ..PairParams::stock_form(0.0, 1.0)
    }
}

/// One pair's training data on the form.
pub(crate) struct FormPoints<'a> {
    pub basis: &'a FormBasis,
    /// (bytes, measured µs, prepared).
    pub points: Vec<(f64, f64, Shaped)>,
    pub prior: Physical,
}

impl FormPoints<'_> {
    fn residuals(&self, theta: &[f64; NP], terms: Residual, out: &mut Vec<f64>) {
        let phys = physical_of(theta);
        let res = residual_of(theta, terms);
        out.clear();
        for (b, t, pp) in &self.points {
            let r = match self.basis.time_prepared(pp, &phys, &res, *b) {
                Some(p) => p.ln() - t.ln(),
                None => f64::INFINITY,
            };
            out.push(r);
        }
        // The priors, as extra residuals.
        let prior = [
            self.prior.launch_us,
            self.prior.step_us,
            self.prior.channel_gbs,
            self.prior.link_efficiency,
        ];
        for (j, p) in prior.iter().enumerate() {
            out.push(PRIOR_SCALE * LOSS_SCALE * (theta[j] - p.max(1e-9).ln()));
        }
    }
}

/// The fitted form of one pair: its constants, the residual terms (neutral where not kept), their names.
pub(crate) struct FormFit {
    pub physical: Physical,
    pub residual: PairParams,
    pub terms: Vec<String>,
}

/// Fit one pair on the form: the four constants from the priors and a few starts around them.
///
/// Cost: O(points x iterations) evaluations of the form, the iterations bounded (`solver::minimise`), so linear in
/// the sizes given; `fit::fit_pairs` bounds the sizes per pair (`fit::MAX_FIT_SIZES`).
pub(crate) fn fit_form(data: &FormPoints) -> Option<FormFit> {
    let n = data.points.len();
    if n < 4 {
        return None;
    }
    let p = data.prior;
    let mut start = [
        p.launch_us.max(0.02).ln(),
        p.step_us.max(0.002).ln(),
        p.channel_gbs.max(0.02).ln(),
        0.0,
        0.0,
        1.0,
        3e7f64.ln(),
        1.0,
        0.5,
    ];
    // The launch from the smallest measured time, which it nearly is.
    if let Some(t) = data.points.iter().map(|q| q.1).reduce(f64::min) {
        start[0] = (0.9 * t).ln();
    }
    let base = Residual {
        ramp2: false,
        cache: false,
    };
    let run = |theta: [f64; NP], terms: Residual, iterations: usize| {
        solver::minimise(
            theta,
            &LOWER,
            &UPPER,
            &terms.active(),
            &|th: &[f64; NP], out: &mut Vec<f64>| data.residuals(th, terms, out),
            iterations,
        )
    };
    let mut ends = Vec::new();
    for (ds, dc) in [(0.0, 0.0), (1.0, 0.0), (-1.0, 0.0), (0.0, 0.7), (0.0, -0.7)] {
        let mut s = start;
        s[1] += ds;
        s[2] += dc;
        ends.push(run(s, base, 25));
    }
    ends.sort_by(|a, b| a.1.total_cmp(&b.1));
    let (theta, loss) = run(ends.first()?.0, base, 200);
    if !loss.is_finite() {
        return None;
    }
    // The empirical terms (the second ramp, the L2 step) as residuals kept by BIC on the training sizes were
    // tried here and dropped: on the 2x H200 k-fold by size they made held-out bands worse (worst from 1 MiB 37.9 %
    // with them, 27.6 % without; bench/results/calibrate-expected-2026-12-03): they follow the training sizes'
    // shape beyond them. What the form misses at a measured size is the measured ratio (`ratio_at`) instead.
    let best = (theta, base);
    let physical = physical_of(&best.0);
    if !physical.valid() {
        return None;
    }
    let mut terms: Vec<String> = ["launch", "step", "channel_rate", "link_efficiency"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    terms.push("measured_ratio".into());
    Some(FormFit {
        physical,
        residual: residual_of(&best.0, best.1),
        terms,
    })
}

// ---------------------------------------------------------------------------
// The plan as stored in a file

#[derive(Serialize, Deserialize)]
struct StoredSlot {
    /// nvlink3..5, pcie, inter-socket-intel/-amd/-zhaoxin/-unknown, c2c, nic, host-memory.
    class: String,
    nominal_gbs: f64,
    lanes: u32,
    name: String,
}

#[derive(Serialize, Deserialize)]
struct StoredFlows {
    intra: Vec<(usize, f64)>,
    net: Vec<(usize, f64)>,
}

#[derive(Serialize, Deserialize)]
struct StoredPlan {
    n_ranks: usize,
    n_nodes: usize,
    local_ranks: usize,
    min_sm: u32,
    slots: Vec<StoredSlot>,
    ring: Vec<StoredFlows>,
    tree: Vec<StoredFlows>,
    nvls_out: Vec<usize>,
    nvls_in: Vec<usize>,
    nvls: Vec<StoredFlows>,
    shm_hops: bool,
    has_nvswitch: bool,
    sockets: usize,
    nic_names: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct StoredBasis {
    machine_class: String,
    gpu_class: String,
    nccl_family: String,
    plan: StoredPlan,
    resolved: Resolved,
    channels: Vec<ChannelTable>,
}

fn class_name(c: LinkClass) -> String {
    match c {
        LinkClass::InterSocket(v) => format!(
            "inter-socket-{}",
            match v {
                CpuVendor::Intel => "intel",
                CpuVendor::Amd => "amd",
                CpuVendor::Zhaoxin => "zhaoxin",
                CpuVendor::Unknown => "unknown",
            }
        ),
        c => c.name(),
    }
}

fn class_of(name: &str) -> LinkClass {
    match name {
        "nvlink3" => LinkClass::NvLink(3),
        "nvlink4" => LinkClass::NvLink(4),
        "nvlink5" => LinkClass::NvLink(5),
        "pcie" => LinkClass::Pcie,
        "inter-socket-intel" => LinkClass::InterSocket(CpuVendor::Intel),
        "inter-socket-amd" => LinkClass::InterSocket(CpuVendor::Amd),
        "inter-socket-zhaoxin" => LinkClass::InterSocket(CpuVendor::Zhaoxin),
        "inter-socket-unknown" => LinkClass::InterSocket(CpuVendor::Unknown),
        "c2c" => LinkClass::C2c,
        "nic" => LinkClass::Nic,
        // host-memory, and any class this build does not know: the slowest, host memory.
        _ => LinkClass::HostMemory,
    }
}

fn flows_out(f: &[ChannelFlows]) -> Vec<StoredFlows> {
    f.iter()
        .map(|c| StoredFlows {
            intra: c.intra.clone(),
            net: c.net.clone(),
        })
        .collect()
}

fn flows_in(f: Vec<StoredFlows>) -> Vec<ChannelFlows> {
    f.into_iter()
        .map(|c| ChannelFlows {
            intra: c.intra,
            net: c.net,
        })
        .collect()
}

impl From<FormBasis> for StoredBasis {
    fn from(b: FormBasis) -> StoredBasis {
        let p = b.plan;
        StoredBasis {
            machine_class: b.machine_class,
            gpu_class: b.gpu_class,
            nccl_family: b.nccl_family,
            plan: StoredPlan {
                n_ranks: p.n_ranks,
                n_nodes: p.n_nodes,
                local_ranks: p.local_ranks,
                min_sm: p.min_sm,
                slots: p
                    .slots
                    .iter()
                    .map(|s| StoredSlot {
                        class: class_name(s.class),
                        nominal_gbs: s.nominal_gbs,
                        lanes: s.lanes,
                        name: s.name.clone(),
                    })
                    .collect(),
                ring: flows_out(&p.ring),
                tree: flows_out(&p.tree),
                nvls_out: p.nvls_out,
                nvls_in: p.nvls_in,
                nvls: flows_out(&p.nvls),
                shm_hops: p.shm_hops,
                has_nvswitch: p.has_nvswitch,
                sockets: p.sockets,
                nic_names: p.nic_names,
            },
            resolved: b.resolved,
            channels: b.channels,
        }
    }
}

impl From<StoredBasis> for FormBasis {
    fn from(s: StoredBasis) -> FormBasis {
        let p = s.plan;
        FormBasis {
            plan: Plan {
                n_ranks: p.n_ranks,
                n_nodes: p.n_nodes,
                local_ranks: p.local_ranks,
                min_sm: p.min_sm,
                slots: p
                    .slots
                    .into_iter()
                    .map(|s| Slot {
                        class: class_of(&s.class),
                        nominal_gbs: s.nominal_gbs,
                        lanes: s.lanes,
                        name: s.name,
                    })
                    .collect(),
                ring: flows_in(p.ring),
                tree: flows_in(p.tree),
                nvls_out: p.nvls_out,
                nvls_in: p.nvls_in,
                nvls: flows_in(p.nvls),
                shm_hops: p.shm_hops,
                has_nvswitch: p.has_nvswitch,
                sockets: p.sockets,
                nic_names: p.nic_names,
            },
            resolved: s.resolved,
            gpu_class: s.gpu_class,
            machine_class: s.machine_class,
            nccl_family: s.nccl_family,
            channels: s.channels,
        }
    }
}

/// The basis of the machine the inputs were measured on, from the first planner verify file that carries its
/// topology (NCCL's own dump when the run took one): the file is read again and must be the one read (its FNV-1a
/// 64). None when no input carries one (nccl-tests output, Inspector): then the empirical form.
pub(crate) fn basis_of_inputs(inputs: &[&super::input::Measurements]) -> Option<FormBasis> {
    for m in inputs {
        if m.format != super::input::InputFormat::PlannerVerify {
            continue;
        }
        let Ok(text) = crate::units::read_input_file(&m.source) else {
            continue;
        };
        if format!(
            "{:016x}",
            nccl_tuner_planner::plan::fnv1a64(text.as_bytes())
        ) != m.fnv1a64
        {
            continue;
        }
        let Ok(run) = crate::result_file::VerifyRun::from_json(&text, &m.source) else {
            continue;
        };
        let machine = &run.machine;
        let Some(xml) = machine
            .nccl_topology_xml
            .as_ref()
            .or(machine.topology_xml.as_ref())
        else {
            continue;
        };
        if let Ok(b) = FormBasis::of_xml(
            xml,
            &m.source,
            machine.world_size,
            machine.nccl_version.as_deref(),
        ) {
            return Some(b);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_is_log_linear_between_knots_and_flat_beyond() {
        let knots = [[1024.0, 1.0], [4096.0, 4.0]];
        // half way in log2 (2048): exp((ln 1 + ln 4) / 2) = 2
        assert!((ratio_at(&knots, 2048.0) - 2.0).abs() < 1e-12);
        assert_eq!(ratio_at(&knots, 8.0), 1.0);
        assert_eq!(ratio_at(&knots, 1e12), 4.0);
        assert_eq!(ratio_at(&[], 1e6), 1.0);
    }

    fn prepared(steps: f64, intra: f64) -> Prepared {
        Prepared {
            proto: Proto::Simple,
            channels: 1,
            volume: 1.0,
            steps,
            net_steps: 0.0,
            intra_hops: intra,
            net_hops: 0.0,
            nvls_hops: 0.0,
            multi_node: false,
            loads: Vec::new(),
            single_rank: false,
            reduces: true,
        }
    }

    #[test]
    fn fill_and_drain_steps_move_whole_chunks() {
        // a tree of 2 GPUs (2 hops) with 1 chunk: steps = 1 + 2 - 1 = 2, of which 1 moves a new chunk
        assert_eq!(
            chunk_steps(&prepared(2.0, 2.0), Coll::AllReduce, Algo::Tree),
            1.0
        );
        // 10 chunks: 11 steps, 10 of them new chunks
        assert_eq!(
            chunk_steps(&prepared(11.0, 2.0), Coll::AllReduce, Algo::Tree),
            10.0
        );
        // a ring all-reduce: every step moves a chunk one hop on
        assert_eq!(
            chunk_steps(&prepared(6.0, 2.0), Coll::AllReduce, Algo::Ring),
            6.0
        );
        // a ring broadcast over 3 hops with 4 chunks: 4 + 3 - 1 = 6 steps, 4 chunks
        assert_eq!(
            chunk_steps(&prepared(6.0, 3.0), Coll::Broadcast, Algo::Ring),
            4.0
        );
    }
}
