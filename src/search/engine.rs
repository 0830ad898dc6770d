//! NCCL's channel search (`src/graph/search.cc`, v2.28.9), ported step for step:
//! the recursive search over GPUs (and NETs when more than one node), the
//! bandwidth accounting that makes channels compete for links, the search
//! budgets, the relaxation order of `ncclTopoCompute`, channel duplication and
//! the fallback. The recursion order matters: it decides which of several equal
//! solutions is found first, so it follows NCCL's exactly.

use super::ladder;
use super::memo::{self, ChannelMemo};
use super::system::{BwState, RevCharge, SPath, SearchSystem, MAX_CHANNELS};
use super::Pattern;
use crate::topo::{CpuArch, CpuVendor, PathType};
use std::rc::Rc;

const SEARCH_GLOBAL_TIMEOUT: i64 = 1 << 19;
const SEARCH_TIMEOUT: i32 = 1 << 14;
const SEARCH_TIMEOUT_TREE: i32 = 1 << 14;
const SEARCH_TIMEOUT_SAMECHANNELS: i32 = 1 << 8;
/// `NCCL_MAX_NVLS_ARITY`.
const MAX_NVLS_ARITY: usize = 32;
/// `NCCL_MAX_DIRECT_ARITY`.
const MAX_DIRECT_ARITY: usize = 7;

/// The parts of the search the memo stores (`memo.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subtree {
    /// `ncclTopoSearchRec` at a channel boundary: it replays the previous channel first, so that is in the key.
    Channel = 0,
    /// Its try of every GPU as the channel's start on one node: the previous channel plays no part.
    Starts = 1,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Forced {
    None,
    Pci,
    Replay,
}

/// One end of a path the search follows (`type, index` in NCCL; `-1` = None).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    None,
    Gpu(usize),
    Net(usize),
    Nvs,
}

/// NCCL's `ncclTopoGraph` while searching.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Graph {
    pub(crate) id: u32,
    pub(crate) pattern: Pattern,
    pub(crate) cross_nic: u32,
    pub(crate) coll_net: bool,
    pub(crate) min_channels: usize,
    pub(crate) max_channels: usize,
    pub(crate) n_channels: usize,
    pub(crate) bw_intra: f32,
    pub(crate) bw_inter: f32,
    pub(crate) latency_inter: f32,
    pub(crate) type_intra: PathType,
    pub(crate) type_inter: PathType,
    pub(crate) same_channels: bool,
    pub(crate) n_hops: i32,
    /// `intra[c * ngpus + i]`: ranks in channel order.
    pub(crate) intra: Vec<i32>,
    /// `inter[2c]`, `inter[2c+1]`: NET ids entered and left.
    pub(crate) inter: Vec<i64>,
}

impl Graph {
    pub(crate) fn new(
        id: u32,
        pattern: Pattern,
        ngpus: usize,
        min_channels: usize,
        max_channels: usize,
    ) -> Self {
        Graph {
            id,
            pattern,
            cross_nic: 0,
            coll_net: false,
            min_channels,
            max_channels,
            n_channels: 0,
            bw_intra: 0.0,
            bw_inter: 0.0,
            latency_inter: 0.0,
            type_intra: PathType::Loc,
            type_inter: PathType::Loc,
            same_channels: false,
            n_hops: 0,
            intra: vec![0; MAX_CHANNELS * ngpus.max(1)],
            inter: vec![0; MAX_CHANNELS * 2],
        }
    }
}

fn next_type(t: PathType) -> PathType {
    PathType::from_index(t as usize + 1).unwrap_or(PathType::Dis)
}

/// `ncclTopoSearchParams`: at which step the channel goes back to the NET or to its first GPU.
fn search_params(sys: &SearchSystem, pattern: Pattern) -> (i32, i32) {
    let n = sys.ngpus as i32;
    if sys.inter {
        let back_to_net = match pattern {
            Pattern::Ring => n - 1,
            Pattern::SplitTree => 1,
            _ => 0,
        };
        (back_to_net, -1)
    } else {
        let back_to_first = if pattern == Pattern::Ring { n - 1 } else { -1 };
        (-1, back_to_first)
    }
}

struct Searcher<'a> {
    sys: &'a SearchSystem,
    st: &'a mut BwState,
    /// `ncclTopoSelectNets` results by (typeInter, gpu + 1): they depend on nothing else.
    nets_cache: Vec<Option<Rc<[usize]>>>,
    /// Candidate lists for the recursion levels, reused to keep allocation out of the search.
    pool: Vec<Vec<usize>>,
    /// Scratch for `next_gpus`' scores.
    scores: Vec<(u64, u64, usize)>,
    /// Single-node searches run with crossNic 0, kept to replay their crossNic 2 twins.
    twins: Vec<TwinRun>,
    twins_enabled: bool,
    /// Channel subtrees already explored in this pass (`memo.rs`); used only while `memo_active`.
    memo: ChannelMemo,
    memo_enabled: bool,
    memo_active: bool,
}

/// One finished single-node search: its settings, the bandwidth state it started
/// from, what it left and the budget it had left.
struct TwinRun {
    key: TwinKey,
    start_links: Vec<f32>,
    start_nets: Vec<f32>,
    end_links: Vec<f32>,
    end_nets: Vec<f32>,
    time: i32,
    hops_delta: i32,
}

#[derive(PartialEq)]
struct TwinKey {
    pattern: Pattern,
    same_channels: bool,
    bw_intra: u32,
    bw_inter: u32,
    type_intra: PathType,
    type_inter: PathType,
    min_channels: usize,
    max_channels: usize,
    coll_net: bool,
}

impl TwinKey {
    fn of(g: &Graph) -> Self {
        TwinKey {
            pattern: g.pattern,
            same_channels: g.same_channels,
            bw_intra: g.bw_intra.to_bits(),
            bw_inter: g.bw_inter.to_bits(),
            type_intra: g.type_intra,
            type_inter: g.type_inter,
            min_channels: g.min_channels,
            max_channels: g.max_channels,
            coll_net: g.coll_net,
        }
    }
}

impl<'a> Searcher<'a> {
    fn new(sys: &'a SearchSystem, st: &'a mut BwState) -> Self {
        Searcher {
            sys,
            st,
            nets_cache: vec![None; PathType::ALL.len() * (sys.ngpus + 1)],
            pool: Vec::new(),
            scores: Vec::with_capacity(sys.ngpus),
            twins: Vec::new(),
            twins_enabled: false,
            memo: ChannelMemo::default(),
            memo_enabled: false,
            memo_active: false,
        }
    }

    #[inline]
    fn path(&self, a: End, b: End) -> Option<&'a SPath> {
        let sys = self.sys;
        match (a, b) {
            (End::Gpu(x), End::Gpu(y)) => Some(sys.gpu_gpu(x, y)),
            (End::Gpu(x), End::Net(n)) => Some(sys.gpu_net(x, n)),
            (End::Net(n), End::Gpu(y)) => Some(sys.net_gpu(n, y)),
            (End::Nvs, End::Gpu(y)) => sys.nvs_gpu.get(y),
            (End::Gpu(x), End::Nvs) => sys.gpu_nvs.get(x),
            _ => None,
        }
    }

    /// `followPath`: charge `bw` on the first `max_steps` links; returns how many fit.
    #[inline(always)]
    fn follow_links(&mut self, path: &SPath, max_steps: usize, bw: f32) -> usize {
        let pci_bw = if path.intel_overhead {
            bw * 6.0 / 5.0
        } else {
            bw
        };
        let sys = self.sys;
        let link_bw = &mut self.st.link_bw;
        let hops = sys.hops(path);
        let hops = &hops[..max_steps.min(hops.len())];
        for (step, edge) in hops.iter().enumerate() {
            let edge = edge.index();
            let Some(cost) = sys.link_cost.get(edge) else {
                return step;
            };
            let fw = if cost.pci { pci_bw } else { bw };
            let Some(fwd) = link_bw.get(edge).copied() else {
                return step;
            };
            let rev = if path.from_gpu {
                cost.rev_from_gpu
            } else {
                cost.rev_from_other
            };
            if let RevCharge::None = rev {
                // The common case: no backward charge.
                if fwd < fw {
                    return step;
                }
                link_bw[edge] = sub_round(fwd, fw);
                continue;
            }
            let (rev_edge, rev_bw) = match rev {
                RevCharge::Eighth(e) => (e as usize, fw / 8.0),
                RevCharge::Full(e) => (e as usize, fw),
                RevCharge::None => (edge, 0.0),
            };
            if fwd < fw || (rev_bw != 0.0 && link_bw[rev_edge] < rev_bw) {
                return step;
            }
            link_bw[edge] = sub_round(fwd, fw);
            if rev_bw != 0.0 {
                link_bw[rev_edge] = sub_round(link_bw[rev_edge], rev_bw);
            }
        }
        hops.len()
    }

    /// `ncclTopoFollowPath`: go from `a` to `b` charging `mult` channels of
    /// bandwidth; false when the path is not allowed or a link lacks capacity.
    #[inline(always)]
    fn follow(&mut self, g: &mut Graph, a: End, b: End, mult: f32) -> bool {
        if a == End::None {
            return true;
        }
        let Some(path) = self.path(a, b) else {
            return false;
        };
        let is_intra = |e: End| matches!(e, End::Gpu(_) | End::Nvs);
        let intra = is_intra(a) && is_intra(b);
        let mut bw = if intra { g.bw_intra } else { g.bw_inter };
        let allowed = if intra { g.type_intra } else { g.type_inter };
        if path.ptype >= PathType::Dis {
            return false;
        }
        if mult == 1.0 && path.ptype > allowed {
            return false;
        }
        if mult == 1.0 && g.pattern.is_tree() {
            let rev_type = self.path(b, a).map_or(PathType::Dis, |p| p.ptype);
            if rev_type > allowed {
                return false;
            }
        }
        bw *= mult;
        let count = path.count();
        let step = self.follow_links(path, count, bw);
        if step < count {
            self.follow_links(path, step, -bw);
            return false;
        }
        // NCCL adds a float to an int: truncation toward zero (exact for whole multiples).
        if mult == 1.0 {
            g.n_hops += count as i32;
        } else if mult == -1.0 {
            g.n_hops -= count as i32;
        } else {
            g.n_hops = (g.n_hops as f32 + mult * count as f32) as i32;
        }
        true
    }

    /// `ncclTopoSelectNets` with NETDEVS_POLICY AUTO on a single-host system:
    /// each GPU's preferred NETs in channel order, then any NET by path type.
    fn select_nets(&mut self, type_inter: PathType, gpu: Option<usize>) -> Rc<[usize]> {
        let key = type_inter as usize * (self.sys.ngpus + 1) + gpu.map_or(0, |g| g + 1);
        if let Some(Some(v)) = self.nets_cache.get(key) {
            return Rc::clone(v);
        }
        let sys = self.sys;
        let mut nets: Vec<usize> = Vec::new();
        let push = |nets: &mut Vec<usize>, n: usize| {
            if !nets.contains(&n) {
                nets.push(n);
            }
        };
        for g in 0..sys.ngpus {
            if gpu.is_some_and(|x| x != g) {
                continue;
            }
            let per_channel = &sys.local_net[g];
            let mut locals: Vec<usize> = Vec::new();
            for &n in per_channel.iter() {
                if !locals.is_empty() && n == locals[0] {
                    break;
                }
                locals.push(n);
            }
            for n in locals {
                push(&mut nets, n);
            }
        }
        for t in 0..=type_inter as usize {
            for g in 0..sys.ngpus {
                if gpu.is_some_and(|x| x != g) {
                    continue;
                }
                for n in 0..sys.nnets().min(MAX_CHANNELS) {
                    if sys.gpu_net(g, n).ptype as usize == t {
                        push(&mut nets, n);
                    }
                }
            }
        }
        let nets: Rc<[usize]> = nets.into();
        if let Some(slot) = self.nets_cache.get_mut(key) {
            *slot = Some(Rc::clone(&nets));
        }
        nets
    }

    fn replay_gpu(&self, g: &Graph, step: i32) -> Option<usize> {
        if g.n_channels == 0 {
            return None;
        }
        let idx = (g.n_channels - 1) * self.sys.ngpus + (step + 1) as usize;
        self.sys.gpu_index_of_rank(*g.intra.get(idx)?)
    }

    /// `ncclTopoCompareGraphs`: is `g` better than the saved `refg`?
    fn better(&self, g: &Graph, refg: &Graph) -> bool {
        self.better_with(g, g.n_channels, g.n_hops, refg)
    }

    /// `better` for `g` with `n_channels` channels and `n_hops` hops.
    fn better_with(&self, g: &Graph, n_channels: usize, n_hops: i32, refg: &Graph) -> bool {
        if n_channels < g.min_channels {
            return false;
        }
        let nch = n_channels as f32;
        let rch = refg.n_channels as f32;
        if g.pattern == Pattern::Nvls {
            return (n_channels > refg.n_channels && n_channels <= self.sys.ngpus)
                || nch * g.bw_inter > rch * refg.bw_inter;
        }
        if nch * g.bw_intra > rch * refg.bw_intra {
            return true;
        }
        if nch * g.bw_intra < rch * refg.bw_intra {
            return false;
        }
        g.pattern == refg.pattern && g.cross_nic == refg.cross_nic && n_hops < refg.n_hops
    }

    /// Could a channel set of a subtree whose best is `best` replace `save`? Outside NVLS (not memoised)
    /// `better` only grows with the channel count and falls with the hop count, so the best set decides.
    fn could_win(&self, g: &Graph, best: memo::Best, save: &Graph) -> bool {
        best.is_some_and(|(n_channels, n_hops)| self.better_with(g, n_channels, n_hops, save))
    }

    /// The walk of `subtree` from the channel `g` is at, skipped when the memo holds it (`memo.rs`).
    fn memoised(&mut self, g: &mut Graph, save: &mut Graph, time: &mut i32, subtree: Subtree) {
        let nch = g.n_channels;
        let ngpus = self.sys.ngpus;
        let previous = match subtree {
            Subtree::Channel if nch > 0 => (nch - 1) * ngpus..nch * ngpus,
            Subtree::Channel => 0..0,
            Subtree::Starts => 0..0,
        };
        if !self.memo_active || *time <= 0 || (subtree == Subtree::Channel && nch == 0) {
            self.walk(g, save, time, subtree);
            return;
        }
        let mut key = self.memo.buffer();
        memo::key_into(
            &mut key,
            subtree as u32,
            nch,
            g.n_hops,
            &g.intra[previous.clone()],
            &self.st.link_bw,
            &self.st.net_bw,
        );
        let first = nch * ngpus;
        if let Some((steps, best, stored_tail)) = self.memo.get(&key) {
            let fits = steps < *time && stored_tail.len() <= g.intra.len() - first;
            if fits && !self.could_win(g, best, save) {
                // NCCL walks this subtree, keeps nothing and restores every link: only the budget and the
                // ranks it leaves in `intra` change.
                g.intra[first..first + stored_tail.len()].copy_from_slice(stored_tail);
                *time -= steps;
                self.memo.note(best);
                self.memo.recycle(key);
                return;
            }
        }
        let time_before = *time;
        self.memo.open();
        self.walk(g, save, time, subtree);
        let best = self.memo.close();
        // Stored only when explored to its end without ending the pass, and with every link, NET and the
        // hop count back as they were (then the key after is the key before).
        if *time > 0 {
            let mut after = self.memo.buffer();
            memo::key_into(
                &mut after,
                subtree as u32,
                nch,
                g.n_hops,
                &g.intra[previous],
                &self.st.link_bw,
                &self.st.net_bw,
            );
            if after == key {
                // The subtree wrote ranks only into the channels it built: its own, and one past each channel set
                // it completed (`best` holds the most).
                let last_built = best.map_or(nch, |(n_channels, _)| n_channels);
                let written = first..((last_built + 1) * ngpus).min(g.intra.len());
                self.memo
                    .store(&key, time_before - *time, best, &g.intra[written]);
            }
            self.memo.recycle(after);
        }
        self.memo.recycle(key);
    }

    fn walk(&mut self, g: &mut Graph, save: &mut Graph, time: &mut i32, subtree: Subtree) {
        match subtree {
            Subtree::Channel => self.search_rec(g, save, time),
            Subtree::Starts => self.try_starts(g, save, time),
        }
    }

    /// `ncclTopoSearchNextGpuSort` with an NVSwitch: only the index neighbours are
    /// tried. NCCL sorts all candidates, then moves each wanted neighbour to the front
    /// in turn, so the neighbours that are candidates come out in reverse of the wanted
    /// order and the sort itself never matters. Returns how many were written.
    #[inline(always)]
    fn nvs_neighbours(&self, g: &Graph, gpu: usize, out: &mut [usize; 2]) -> usize {
        let sys = self.sys;
        let ngpus = sys.ngpus;
        let flag = channel_flag(g.n_channels);
        let prev = if gpu == 0 { ngpus - 1 } else { gpu - 1 };
        let nxt = if gpu + 1 == ngpus { 0 } else { gpu + 1 };
        let (first, second) = match g.pattern {
            Pattern::Ring => (nxt, Some(prev)),
            Pattern::SplitTree | Pattern::BalancedTree => (prev, Some(nxt)),
            _ => (nxt, None),
        };
        let second = second.filter(|&s| s != first);
        let used = &self.st.used;
        let candidate = |h: usize| {
            h != gpu
                && used.get(h).is_some_and(|&u| u & flag == 0)
                && sys.gpu_gpu(gpu, h).count() > 0
        };
        let mut n = 0;
        if let Some(s) = second {
            if candidate(s) {
                out[0] = s;
                n = 1;
            }
        }
        if candidate(first) {
            out[n] = first;
            n += 1;
        }
        n
    }

    /// `ncclTopoSearchNextGpuSort` without NVSwitch: the GPUs to try next, best first, into `next`.
    #[inline]
    fn next_gpus(&mut self, g: &Graph, gpu: usize, sort_net: i32, next: &mut Vec<usize>) {
        let sys = self.sys;
        let flag = channel_flag(g.n_channels);
        let ngpus = sys.ngpus;
        let candidate =
            |h: usize| h != gpu && sys.gpu_gpu(gpu, h).count() > 0 && self.st.used[h] & flag == 0;
        let net = if sort_net != 0 {
            sys.net_index_of_id(g.inter[g.n_channels * 2])
        } else {
            None
        };
        // NCCL's score (interBw, interPciBw, interNhops, intraBw, intraNhops, startIndex)
        // as two precomputed keys that sort in the same order (see `SearchSystem::score_keys`).
        let mut scores = std::mem::take(&mut self.scores);
        scores.clear();
        for i in 1..ngpus {
            let h = if gpu + i >= ngpus {
                gpu + i - ngpus
            } else {
                gpu + i
            };
            if !candidate(h) {
                continue;
            }
            let inter = net.map_or(0, |n| sys.inter_key[n * ngpus + h]);
            scores.push((inter, sys.intra_key[gpu * ngpus + h], h));
        }
        scores.sort_unstable();
        let same = |k: u64| k >> 24;
        let all_same_intra = scores.iter().all(|s| same(s.1) == same(scores[0].1));
        if sort_net == -1 && all_same_intra {
            next.extend(scores.iter().rev().map(|s| s.2));
        } else {
            next.extend(scores.iter().map(|s| s.2));
        }
        self.scores = scores;
    }

    fn check_net(&self, g: &Graph, start: usize, n: usize, step: i32) -> bool {
        let net = &self.sys.nets[n];
        let start = &self.sys.nets[start];
        let nch = g.n_channels;
        if g.pattern == Pattern::Tree && net.id != start.id {
            return false;
        }
        if g.pattern == Pattern::Ring && g.cross_nic == 2 {
            if nch & 1 == 1 && net.id != g.inter[(nch - 1) * 2] {
                return false;
            }
        } else if g.cross_nic == 0 && (net.asic != start.asic || net.port != start.port) {
            return false;
        }
        if g.pattern == Pattern::BalancedTree && step != 0 && net.id != g.inter[nch * 2 + 1] {
            return false;
        }
        true
    }

    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn try_gpu(
        &mut self,
        g: &mut Graph,
        save: &mut Graph,
        step: i32,
        back_to_net: i32,
        back_to_first: i32,
        forced: Forced,
        time: &mut i32,
        from: End,
        to: usize,
    ) {
        if to >= self.sys.ngpus {
            return;
        }
        let flag = channel_flag(g.n_channels);
        if self.follow(g, from, End::Gpu(to), 1.0) {
            self.st.used[to] ^= flag;
            self.rec_gpu(
                g,
                save,
                Some(to),
                step,
                back_to_net,
                back_to_first,
                forced,
                time,
            );
            self.st.used[to] ^= flag;
            self.follow(g, from, End::Gpu(to), -1.0);
        }
    }

    fn try_collnet_direct(&mut self, g: &mut Graph, save: &mut Graph, gpu: usize, time: &mut i32) {
        let ngpus = self.sys.ngpus;
        let mul = 1.0 / (ngpus as f32 - 1.0);
        let mut fwd = 0;
        let mut ok;
        loop {
            ok = self.follow(g, End::Gpu(gpu), End::Gpu(fwd), mul);
            if !ok {
                break;
            }
            fwd += 1;
            if fwd >= ngpus {
                break;
            }
        }
        if ok {
            let mut bwd = 0;
            loop {
                ok = self.follow(g, End::Gpu(bwd), End::Gpu(gpu), mul);
                if !ok {
                    break;
                }
                bwd += 1;
                if bwd >= ngpus {
                    break;
                }
            }
            if ok {
                // The head is in place; the other GPUs follow in index order.
                let mut step = 1;
                for index in 0..ngpus {
                    if index != gpu {
                        g.intra[g.n_channels * ngpus + step] = self.sys.gpu_rank[index];
                        step += 1;
                    }
                }
                self.rec_gpu(g, save, None, ngpus as i32, -1, -1, Forced::None, time);
            }
            while bwd > 0 {
                bwd -= 1;
                self.follow(g, End::Gpu(bwd), End::Gpu(gpu), -mul);
            }
        }
        while fwd > 0 {
            fwd -= 1;
            self.follow(g, End::Gpu(gpu), End::Gpu(fwd), -mul);
        }
    }

    fn try_nvls(&mut self, g: &mut Graph, save: &mut Graph, gpu: usize, time: &mut i32) {
        let ngpus = self.sys.ngpus;
        let mult = |d: usize| if d == gpu { 2.0 } else { 1.0 };
        let mut d0 = 0;
        let mut ok;
        loop {
            ok = self.follow(g, End::Nvs, End::Gpu(d0), mult(d0));
            d0 += 1;
            if !ok || d0 >= ngpus {
                break;
            }
        }
        if !ok {
            d0 -= 1;
        } else {
            let mut d1 = 0;
            loop {
                ok = self.follow(g, End::Gpu(d1), End::Nvs, mult(d1));
                d1 += 1;
                if !ok || d1 >= ngpus {
                    break;
                }
            }
            if !ok {
                d1 -= 1;
            } else {
                self.rec_gpu(g, save, None, ngpus as i32, -1, -1, Forced::None, time);
            }
            while d1 > 0 {
                d1 -= 1;
                self.follow(g, End::Gpu(d1), End::Nvs, -mult(d1));
            }
        }
        while d0 > 0 {
            d0 -= 1;
            self.follow(g, End::Nvs, End::Gpu(d0), -mult(d0));
        }
    }

    /// `ncclTopoSearchRecGpu`.
    #[allow(clippy::too_many_arguments)]
    fn rec_gpu(
        &mut self,
        g: &mut Graph,
        save: &mut Graph,
        gpu: Option<usize>,
        step: i32,
        back_to_net: i32,
        back_to_first: i32,
        forced: Forced,
        time: &mut i32,
    ) {
        if *time <= 0 {
            return;
        }
        *time -= 1;
        let ngpus = self.sys.ngpus;
        if step == ngpus as i32 {
            // A channel is complete: keep it if it makes a better graph, then try one more.
            g.n_channels += 1;
            if self.memo_active {
                self.memo.note(Some((g.n_channels, g.n_hops)));
            }
            if self.better(g, save) {
                save.clone_from(g);
                if g.n_channels == g.max_channels {
                    *time = -1;
                }
            }
            if g.n_channels < g.max_channels {
                self.memoised(g, save, time, Subtree::Channel);
            }
            g.n_channels -= 1;
            return;
        }
        let Some(gpu) = gpu else {
            return;
        };
        let nch = g.n_channels;
        g.intra[nch * ngpus + step as usize] = self.sys.gpu_rank[gpu];
        if step == back_to_net {
            // Leave through a NET.
            self.rec_gpu_net(g, save, gpu, step, back_to_first, forced, time);
        } else if g.pattern == Pattern::Nvls {
            self.try_nvls(g, save, gpu, time);
        } else if g.pattern == Pattern::CollNetDirect {
            self.try_collnet_direct(g, save, gpu, time);
        } else if step < ngpus as i32 - 1 {
            self.rec_gpu_next(g, save, gpu, step, back_to_net, back_to_first, forced, time);
        } else if step == back_to_first {
            // Close the ring on the first GPU.
            let Some(first) = self.sys.gpu_index_of_rank(g.intra[nch * ngpus]) else {
                return;
            };
            if self.follow(g, End::Gpu(gpu), End::Gpu(first), 1.0) {
                self.rec_gpu(
                    g,
                    save,
                    Some(first),
                    step + 1,
                    back_to_net,
                    -1,
                    forced,
                    time,
                );
                self.follow(g, End::Gpu(gpu), End::Gpu(first), -1.0);
            }
        } else {
            self.rec_gpu(g, save, Some(gpu), ngpus as i32, -1, -1, forced, time);
        }
    }

    /// `rec_gpu` at the step that leaves through a NET: each NET the channel may use, the GPU's link to it
    /// followed (half of it on each of a balanced tree's first two GPUs), then on.
    #[allow(clippy::too_many_arguments)]
    fn rec_gpu_net(
        &mut self,
        g: &mut Graph,
        save: &mut Graph,
        gpu: usize,
        step: i32,
        back_to_first: i32,
        forced: Forced,
        time: &mut i32,
    ) {
        let nch = g.n_channels;
        if !self.sys.inter {
            return;
        }
        let Some(start_net) = self.sys.net_index_of_id(g.inter[nch * 2]) else {
            return;
        };
        let nets = self.select_nets(g.type_inter, Some(gpu));
        for &n in nets.iter() {
            if !self.check_net(g, start_net, n, step) {
                continue;
            }
            let mut next_back_to_net = -1;
            let bw_inter_save = g.bw_inter;
            if g.pattern == Pattern::BalancedTree {
                // Half of the NET traffic on each of the first two GPUs.
                if step == 0 {
                    next_back_to_net = 1;
                }
                g.bw_inter /= 2.0;
            }
            let ok = self.follow(g, End::Gpu(gpu), End::Net(n), 1.0);
            g.bw_inter = bw_inter_save;
            if ok {
                g.inter[nch * 2 + 1] = self.sys.nets[n].id;
                self.rec_gpu(
                    g,
                    save,
                    Some(gpu),
                    step,
                    next_back_to_net,
                    back_to_first,
                    forced,
                    time,
                );
                if g.pattern == Pattern::BalancedTree {
                    g.bw_inter /= 2.0;
                }
                self.follow(g, End::Gpu(gpu), End::Net(n), -1.0);
                g.bw_inter = bw_inter_save;
            }
        }
    }

    /// `rec_gpu` before the last GPU: the next GPU from each candidate (a forced order, NVSwitch neighbours, or
    /// the full sort).
    #[allow(clippy::too_many_arguments)]
    fn rec_gpu_next(
        &mut self,
        g: &mut Graph,
        save: &mut Graph,
        gpu: usize,
        step: i32,
        back_to_net: i32,
        back_to_first: i32,
        forced: Forced,
        time: &mut i32,
    ) {
        // Up to two candidates inline (forced orders, NVSwitch neighbours); a pooled
        // list only for the full sort.
        let mut few = [0usize; 2];
        let mut n_few = 0;
        let mut sorted: Option<Vec<usize>> = None;
        match forced {
            Forced::Pci => {
                few[0] = step as usize + 1;
                n_few = 1;
            }
            Forced::Replay => {
                if let Some(x) = self.replay_gpu(g, step) {
                    few[0] = x;
                    n_few = 1;
                }
            }
            Forced::None if self.sys.n_nvs > 0 => {
                n_few = self.nvs_neighbours(g, gpu, &mut few);
            }
            Forced::None => {
                let sort_net = if back_to_net == -1 {
                    0
                } else if back_to_net == step + 1 {
                    1
                } else {
                    -1
                };
                let mut next = self.pool.pop().unwrap_or_default();
                self.next_gpus(g, gpu, sort_net, &mut next);
                sorted = Some(next);
            }
        }
        let list: &[usize] = match &sorted {
            Some(v) => v,
            None => &few[..n_few],
        };
        for &to in list {
            self.try_gpu(
                g,
                save,
                step + 1,
                back_to_net,
                back_to_first,
                forced,
                time,
                End::Gpu(gpu),
                to,
            );
        }
        if let Some(mut next) = sorted {
            next.clear();
            self.pool.push(next);
        }
    }

    /// `ncclTopoSearchRecNet`: start a channel from each candidate NET.
    fn rec_net(
        &mut self,
        g: &mut Graph,
        save: &mut Graph,
        back_to_net: i32,
        back_to_first: i32,
        time: &mut i32,
    ) {
        // NCCL holds this in an int: fractional speeds are truncated.
        let bw = (g.bw_inter as i32) as f32;
        let nets = self.select_nets(g.type_inter, None);
        let count = nets.len();
        let mut found = false;
        for i in 0..count {
            let head_pattern = matches!(g.pattern, Pattern::Nvls | Pattern::CollNetDirect);
            if head_pattern && found {
                break;
            }
            let n = nets[(g.n_channels + i) % count];
            let net = self.sys.nets[n].clone();
            if g.coll_net && !net.coll {
                continue;
            }
            if self.st.net_bw[n] < bw {
                continue;
            }
            let nch = g.n_channels;
            if g.pattern == Pattern::Ring
                && g.cross_nic == 2
                && nch & 1 == 1
                && net.id != g.inter[(nch - 1) * 2 + 1]
            {
                continue;
            }
            g.inter[nch * 2] = net.id;
            g.latency_inter = net.latency;
            self.charge_net(n, -bw);

            if head_pattern {
                // NVLS / CollNet direct only pair NICs with their local GPU to pick heads.
                if nch < count && net.local_gpu != -1 {
                    let head = net.local_gpu as usize;
                    let rank = self.sys.gpu_rank[head];
                    let ngpus = self.sys.ngpus;
                    let duplicate = (0..nch).any(|c| g.intra[c * ngpus] == rank);
                    if !duplicate {
                        self.try_gpu(
                            g,
                            save,
                            0,
                            back_to_net,
                            back_to_first,
                            Forced::None,
                            time,
                            End::Net(n),
                            head,
                        );
                        found = true;
                    }
                }
            } else if nch > 0 && g.same_channels {
                if let Some(first) = self.replay_gpu(g, -1) {
                    self.try_gpu(
                        g,
                        save,
                        0,
                        back_to_net,
                        back_to_first,
                        Forced::Replay,
                        time,
                        End::Net(n),
                        first,
                    );
                }
            } else {
                if nch == 0 && self.sys.n_nvs == 0 {
                    // PCI order first, as a reference, on its own small budget.
                    let mut t = 1 << 10;
                    self.try_gpu(
                        g,
                        save,
                        0,
                        back_to_net,
                        back_to_first,
                        Forced::Pci,
                        &mut t,
                        End::Net(n),
                        0,
                    );
                    if t == -1 {
                        *time = -1;
                    }
                }
                let local_gpu = net.local_gpu;
                if local_gpu != -1 {
                    self.try_gpu(
                        g,
                        save,
                        0,
                        back_to_net,
                        back_to_first,
                        Forced::None,
                        time,
                        End::Net(n),
                        local_gpu as usize,
                    );
                }
                // NCCL `continue`s here when no GPU reaches the NET, skipping its
                // bandwidth restore; that NET then stays charged. We restore it
                // (no GPU can use such a NET anyway).
                let sys = self.sys;
                let (locals, ptype) = sys.local_gpus_of_net(n);
                if ptype != PathType::Dis {
                    for &lg in locals {
                        if lg as i32 == local_gpu {
                            continue;
                        }
                        self.try_gpu(
                            g,
                            save,
                            0,
                            back_to_net,
                            back_to_first,
                            Forced::None,
                            time,
                            End::Net(n),
                            lg,
                        );
                    }
                }
            }
            self.charge_net(n, bw);
        }
    }

    /// NETs on the same asic and port share bandwidth.
    fn charge_net(&mut self, net: usize, delta: f32) {
        let sys = self.sys;
        for &m in &sys.net_port_peers[net] {
            self.st.net_bw[m] += delta;
        }
    }

    /// One search of `ncclTopoCompute`, or the replay of its twin.
    ///
    /// On one node NCCL still retries every ring/tree search with crossNic 2 when the
    /// host has several NICs, yet crossNic only matters when channels use NETs. Such a
    /// retry explores exactly what its crossNic 0 twin explored (same settings, same
    /// starting bandwidths, checked bit for bit), so it ends with the same budget left
    /// and the same bandwidths; and it cannot replace the saved graph: that graph is at
    /// least as good as anything the twin found, and equal graphs only win on fewer hops
    /// with the same crossNic. Replaying it gives NCCL's result at half the work.
    fn search_or_replay(&mut self, g: &mut Graph, save: &mut Graph, time: &mut i32) {
        // The memo's keys leave out the pass's settings and the NETs a channel used: one pass, one node, and not
        // NVLS (whose comparison does not grow with the channel count) nor CollNet direct.
        self.memo.clear();
        self.memo_active = self.memo_enabled
            && !self.sys.inter
            && !matches!(g.pattern, Pattern::Nvls | Pattern::CollNetDirect);
        if !self.twins_enabled {
            self.search_rec(g, save, time);
            return;
        }
        let key = TwinKey::of(g);
        if g.cross_nic != 0 {
            let st = &*self.st;
            let twin = self
                .twins
                .iter()
                .find(|t| t.key == key && t.start_links == st.link_bw && t.start_nets == st.net_bw);
            if let Some(t) = twin {
                self.st.link_bw.clone_from(&t.end_links);
                self.st.net_bw.clone_from(&t.end_nets);
                g.n_hops += t.hops_delta;
                *time = t.time;
                return;
            }
            self.search_rec(g, save, time);
            return;
        }
        let start_links = self.st.link_bw.clone();
        let start_nets = self.st.net_bw.clone();
        let hops = g.n_hops;
        self.search_rec(g, save, time);
        if self.st.used.iter().all(|&u| u == 0) {
            self.twins.push(TwinRun {
                key,
                start_links,
                start_nets,
                end_links: self.st.link_bw.clone(),
                end_nets: self.st.net_bw.clone(),
                time: *time,
                hops_delta: g.n_hops - hops,
            });
        }
    }

    /// `ncclTopoSearchRec`.
    fn search_rec(&mut self, g: &mut Graph, save: &mut Graph, time: &mut i32) {
        if self.sys.inter {
            let (back_to_net, back_to_first) = search_params(self.sys, g.pattern);
            self.rec_net(g, save, back_to_net, back_to_first, time);
            return;
        }
        if g.pattern == Pattern::Nvls {
            self.try_start(g, save, time, Forced::None, g.n_channels);
            return;
        }
        if g.n_channels == 0 {
            self.try_start(g, save, time, Forced::Pci, 0);
        } else if let Some(first) = self.replay_gpu(g, -1) {
            self.try_start(g, save, time, Forced::Replay, first);
        }
        if !g.same_channels || g.n_channels == 0 {
            self.memoised(g, save, time, Subtree::Starts);
        }
    }

    /// A channel on one node from `gpu`.
    fn try_start(
        &mut self,
        g: &mut Graph,
        save: &mut Graph,
        time: &mut i32,
        forced: Forced,
        gpu: usize,
    ) {
        let (back_to_net, back_to_first) = search_params(self.sys, g.pattern);
        self.try_gpu(
            g,
            save,
            0,
            back_to_net,
            back_to_first,
            forced,
            time,
            End::None,
            gpu,
        );
    }

    /// The end of `search_rec` on one node: a channel from each GPU, in index order.
    fn try_starts(&mut self, g: &mut Graph, save: &mut Graph, time: &mut i32) {
        for start in 0..self.sys.ngpus {
            self.try_start(g, save, time, Forced::None, start);
        }
    }
}

#[inline]
fn channel_flag(channel: usize) -> u64 {
    1u64.checked_shl(channel as u32).unwrap_or(0)
}

/// NCCL's `SUB_ROUND`: subtract and round to 1/1000 so float drift does not accumulate.
#[inline]
fn sub_round(a: f32, b: f32) -> f32 {
    round_half_away((a - b) * 1000.0) / 1000.0
}

/// C's `roundf` without the libm call. Below 2^23 the fraction `x - trunc(x)`
/// is exact; at or above it (and for inf/NaN, which a file's huge link width
/// can make) `x` is already its own rounding, and `x as i64 + 1` would overflow.
#[inline]
fn round_half_away(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return x;
    }
    let whole = x as i64;
    let frac = x - whole as f32;
    let rounded = if frac >= 0.5 {
        whole + 1
    } else if frac <= -0.5 {
        whole - 1
    } else {
        whole
    };
    rounded as f32
}

/// What to search for (NCCL sets these before `ncclTopoCompute`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GraphRequest {
    pub(crate) id: u32,
    pub(crate) pattern: Pattern,
    pub(crate) coll_net: bool,
    pub(crate) min_channels: usize,
    pub(crate) max_channels: usize,
    /// `NCCL_CROSS_NIC`.
    pub(crate) cross_nic_param: u32,
    /// Before 2.19 (`SearchRule::DupBeforePass2` off): channels are duplicated after pass 2, and pass 2 raises
    /// only a tree's bwIntra (v2.18.3-1 search.cc:947-969).
    pub(crate) dup_before_pass2: bool,
    /// The family whose speed ladders the search climbs (`ladder::ladder_of`).
    pub family: super::rules::Family,
}

/// `ncclTopoDupChannels`.
fn dup_channels(g: &mut Graph, cc_min: u32, ngpus: usize) {
    if g.n_channels == 0 || g.pattern == Pattern::Nvls || g.bw_intra < 25.0 {
        return;
    }
    if cc_min > 80 && g.bw_intra < 50.0 && g.n_channels > 4 {
        return;
    }
    let n = g.n_channels;
    let dup = (n * 2).min(g.max_channels);
    if dup <= n {
        return;
    }
    g.intra.copy_within(0..(dup - n) * ngpus, n * ngpus);
    g.inter.copy_within(0..(dup - n) * 2, n * 2);
    let div = dup.div_ceil(n) as f32;
    g.bw_intra /= div;
    g.bw_inter /= div;
    g.n_channels = dup;
}

/// `ncclTopoCompute`: search one graph on a thread of its own. `preset` is a graph read from a graph
/// file (`NCCL_GRAPH_FILE`): when it has channels it is used as is. (`search_graphs` runs all its graphs on one
/// such thread with `compute_with`.)
#[cfg(test)]
pub(crate) fn compute(
    sys: &SearchSystem,
    st: &mut BwState,
    req: GraphRequest,
    preset: Option<&Graph>,
) -> Graph {
    with_search_stack(sys.ngpus, || {
        compute_with(sys, st, req, preset, Shortcuts::ALL)
    })
}

/// Stack bytes per recursion level (`try_gpu` + `rec_gpu`), with room for unoptimised builds.
const STACK_PER_LEVEL: usize = 4 << 10;

/// Run `f` on a thread whose stack fits the search's recursion, as NCCL's own recursion (`ncclTopoSearchRecGpu`)
/// goes one level per GPU and channel: channels x (GPUs + 2) levels, each a few frames. The main thread's 8 MiB
/// would not hold 256 GPUs in a debug build; the reservation is virtual, pages are used only as deep as the
/// search goes.
pub(crate) fn with_search_stack<T: Send>(ngpus: usize, f: impl FnOnce() -> T + Send) -> T {
    let levels = MAX_CHANNELS * (ngpus + 2);
    let bytes = (8 << 20) + levels.saturating_mul(2 * STACK_PER_LEVEL);
    let work = std::sync::Mutex::new(Some(f));
    let run = || {
        let f = work.lock().ok().and_then(|mut slot| slot.take());
        f.map(|f| f())
    };
    let threaded = std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("search".into())
            .stack_size(bytes)
            .spawn_scoped(scope, run)
            .ok()?;
        Some(
            handle
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
        )
    });
    // No thread to be had (out of memory or threads): search here, as deep as this stack allows.
    match threaded.flatten() {
        Some(result) => result,
        None => match run() {
            Some(result) => result,
            None => unreachable!("the search ran neither on its thread nor here"),
        },
    }
}

/// The search's bounds that stay fixed over its passes: the crossNic setting, the path-type ranges inside and
/// between nodes, and whether to try the same channels on every GPU first.
struct SearchBounds {
    cross_nic: u32,
    min_type_intra: PathType,
    max_type_intra: PathType,
    min_type_inter: PathType,
    max_type_inter: PathType,
    try_same_channels: bool,
}

/// The empty graph the search starts from (`ncclTopoCompute` up to its presets), with its bounds.
fn start_graph(sys: &SearchSystem, req: &GraphRequest) -> (Graph, SearchBounds) {
    let ngpus = sys.ngpus;
    let mut graph = Graph::new(
        req.id,
        req.pattern,
        ngpus,
        req.min_channels,
        req.max_channels,
    );
    graph.coll_net = req.coll_net;
    let cross_nic = if sys.nnets() > 1
        && matches!(
            req.pattern,
            Pattern::Ring | Pattern::BalancedTree | Pattern::SplitTree
        ) {
        req.cross_nic_param
    } else {
        0
    };
    graph.cross_nic = if cross_nic == 1 { 1 } else { 0 };
    let (mut min_type_intra, mut max_type_intra) = (PathType::Loc, PathType::Sys);
    let (mut min_type_inter, mut max_type_inter) = (PathType::Pix, PathType::Sys);
    if ngpus > 1 {
        (min_type_intra, max_type_intra) = sys.gpu_path_type_range(false);
    }
    if sys.inter {
        (min_type_inter, max_type_inter) = sys.gpu_path_type_range(true);
        max_type_intra = max_type_inter;
    }
    graph.type_intra = min_type_intra;
    graph.type_inter = min_type_inter;
    let try_same_channels = req.pattern != Pattern::Nvls;
    graph.same_channels = try_same_channels;
    let bounds = SearchBounds {
        cross_nic,
        min_type_intra,
        max_type_intra,
        min_type_inter,
        max_type_inter,
        try_same_channels,
    };
    (graph, bounds)
}

/// The channel limits of the pattern and the machine (`ncclTopoCompute` after the NVLS check).
fn limit_channels(sys: &SearchSystem, req: &GraphRequest, graph: &mut Graph) {
    let ngpus = sys.ngpus;
    if req.pattern == Pattern::Nvls {
        graph.max_channels = MAX_NVLS_ARITY.min(ngpus);
    }
    if req.pattern == Pattern::CollNetDirect {
        graph.max_channels = (MAX_DIRECT_ARITY + 1).min(ngpus);
    }
    if ngpus == 1 && graph.pattern != Pattern::Ring {
        graph.pattern = Pattern::Tree;
    }
    if !sys.inter && graph.pattern == Pattern::Nvls {
        // Intra-node NVLS pulls evenly from all GPUs.
        graph.min_channels = graph.max_channels;
    }
    if graph.pattern == Pattern::Ring
        && sys.split_nvlink()
        && graph.max_channels >= 2
        && graph.min_channels == 1
    {
        // Two NVLink islands: tree needs 2 channels, and tree uses ring's count.
        graph.min_channels = 2;
    }
}

/// Nothing fits: one channel in index order at a token bandwidth.
fn one_token_channel(sys: &SearchSystem, graph: &mut Graph) {
    for i in 0..sys.ngpus {
        graph.intra[i] = sys.gpu_rank[i];
    }
    graph.inter[0] = 0;
    graph.inter[1] = 0;
    graph.bw_intra = 0.1;
    graph.bw_inter = 0.1;
    graph.type_intra = PathType::Sys;
    graph.type_inter = PathType::Sys;
    graph.n_channels = 1;
}

/// The index of the first speed of the ladder at most `bw` (the last one if none is).
fn first_speed_at_most(speeds: &[f32], bw: f32) -> usize {
    let mut index = 0;
    while speeds[index] > bw && index < speeds.len() - 1 {
        index += 1;
    }
    index
}

/// Pass 1 found no perfect solution: relax one constraint at a time in NCCL's order (the tree pattern, the
/// path type inside, then between nodes, crossNic, then a lower speed), resetting each one that is exhausted.
/// True: search again.
fn relax_one(
    sys: &SearchSystem,
    bounds: &SearchBounds,
    speeds: &[f32],
    speed_index: &mut usize,
    tmp: &mut Graph,
    graph: &Graph,
) -> bool {
    if sys.cc_min() >= 90 && tmp.pattern == Pattern::BalancedTree {
        tmp.pattern = Pattern::Tree;
        return true;
    }
    tmp.pattern = graph.pattern;
    let max_intra = if sys.inter {
        tmp.type_inter
    } else {
        bounds.max_type_intra
    };
    if tmp.type_intra < max_intra && (graph.n_channels == 0 || tmp.type_intra < graph.type_intra) {
        tmp.type_intra = next_type(tmp.type_intra);
        if tmp.type_intra < PathType::Dis {
            return true;
        }
    }
    tmp.type_intra = bounds.min_type_intra;
    if sys.inter
        && tmp.type_inter < bounds.max_type_inter
        && (graph.n_channels == 0
            || tmp.type_inter < graph.type_inter
            || tmp.type_inter < PathType::Pxn)
    {
        tmp.type_inter = next_type(tmp.type_inter);
        if tmp.type_inter < PathType::Dis {
            return true;
        }
    }
    tmp.type_inter = bounds.min_type_inter;
    if bounds.cross_nic == 2
        && tmp.cross_nic == 0
        && matches!(graph.pattern, Pattern::Ring | Pattern::BalancedTree)
    {
        tmp.cross_nic = 2;
        return true;
    }
    tmp.cross_nic = if bounds.cross_nic == 1 { 1 } else { 0 };
    if *speed_index < speeds.len() - 1
        && (graph.n_channels == 0 || (speeds[*speed_index + 1] / graph.bw_inter) as f64 > 0.49)
    {
        *speed_index += 1;
        tmp.bw_intra = speeds[*speed_index];
        tmp.bw_inter = speeds[*speed_index];
        return true;
    }
    *speed_index = first_speed_at_most(speeds, sys.max_bw);
    tmp.bw_intra = speeds[*speed_index];
    tmp.bw_inter = speeds[*speed_index];
    false
}

/// Pass 2 (a solution and speeds above it left): raise its bandwidth one speed at a time. True: search again.
fn raise_one(
    req: &GraphRequest,
    speeds: &[f32],
    speed_index: &mut usize,
    tmp: &mut Graph,
    graph: &Graph,
) -> bool {
    if !req.dup_before_pass2 {
        // 2.18: only a tree's bwIntra goes up.
        if graph.pattern != Pattern::Ring
            && tmp.bw_intra == graph.bw_intra
            && tmp.bw_intra < tmp.bw_inter * 2.0
        {
            *speed_index -= 1;
            tmp.bw_intra = speeds[*speed_index];
            return true;
        }
    } else if graph.pattern == Pattern::Ring {
        *speed_index -= 1;
        tmp.bw_intra = speeds[*speed_index];
        tmp.bw_inter = speeds[*speed_index];
        return true;
    } else if graph.pattern == Pattern::Nvls
        && tmp.bw_inter == graph.bw_inter
        && tmp.bw_inter < tmp.bw_intra * 2.0
    {
        tmp.min_channels = graph.n_channels;
        tmp.max_channels = graph.n_channels;
        *speed_index -= 1;
        tmp.bw_inter = speeds[*speed_index];
        return true;
    } else if tmp.bw_intra == graph.bw_intra && tmp.bw_intra < tmp.bw_inter * 2.0 {
        *speed_index -= 1;
        tmp.bw_intra = speeds[*speed_index];
        return true;
    }
    false
}

/// The search's shortcuts that give NCCL's result with fewer steps; each can be turned off to check it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shortcuts {
    /// Replay a single-node crossNic 2 search from its crossNic 0 twin (`search_or_replay`).
    pub(crate) replay_twins: bool,
    /// Skip channel subtrees already explored in the pass (`memo.rs`).
    pub(crate) memo: bool,
}

impl Shortcuts {
    pub(crate) const ALL: Shortcuts = Shortcuts {
        replay_twins: true,
        memo: true,
    };
    /// NCCL's plain walk.
    #[cfg(test)]
    pub(crate) const NONE: Shortcuts = Shortcuts {
        replay_twins: false,
        memo: false,
    };
}

/// `compute` with the given shortcuts (all of them in `compute`; fewer to check them).
pub(crate) fn compute_with(
    sys: &SearchSystem,
    st: &mut BwState,
    req: GraphRequest,
    preset: Option<&Graph>,
    shortcuts: Shortcuts,
) -> Graph {
    let ngpus = sys.ngpus;
    let (mut graph, bounds) = start_graph(sys, &req);
    let try_same_channels = bounds.try_same_channels;

    if let Some(p) = preset {
        if p.n_channels > 0 {
            let mut g = p.clone();
            g.min_channels = req.min_channels;
            g.max_channels = req.max_channels;
            g.coll_net = req.coll_net;
            return g;
        }
    }

    let cc_min = sys.cc_min();
    if req.pattern == Pattern::Nvls && (sys.n_nvs == 0 || cc_min < 90) {
        return graph;
    }
    limit_channels(sys, &req, &mut graph);

    let mut tmp = graph.clone();
    let speeds = ladder::ladder_of(cc_min, sys.inter, req.family);
    let mut pass = 1;
    let max_bw = sys.max_bw;
    let mut total_bw = sys.total_bw;
    if ngpus > 1 && graph.pattern != Pattern::Ring {
        // NCCL multiplies by a double.
        total_bw = (total_bw as f64 * (ngpus as f64 * 1.0 / (ngpus as f64 - 1.0))) as f32;
    }
    let mut speed_index = ladder::start_index(speeds, max_bw, total_bw, graph.min_channels);
    tmp.bw_intra = speeds[speed_index];
    tmp.bw_inter = speeds[speed_index];
    let mut global_timeout = SEARCH_GLOBAL_TIMEOUT;
    let amd_sys = sys.cpu_arch == CpuArch::X86 && sys.cpu_vendor == CpuVendor::Amd;

    let mut searcher = Searcher::new(sys, st);
    searcher.twins_enabled = shortcuts.replay_twins && !sys.inter;
    searcher.memo_enabled = shortcuts.memo;
    loop {
        // search:
        let mut time = if tmp.same_channels {
            SEARCH_TIMEOUT_SAMECHANNELS
        } else if tmp.pattern == Pattern::Tree {
            SEARCH_TIMEOUT_TREE
        } else {
            SEARCH_TIMEOUT
        };
        tmp.n_channels = 0;
        global_timeout -= time as i64;
        searcher.search_or_replay(&mut tmp, &mut graph, &mut time);

        let done = time == -1 || graph.n_channels as f32 * graph.bw_inter >= sys.total_bw;
        if !done && pass == 1 {
            // No perfect solution yet: relax one constraint at a time.
            if tmp.same_channels && !(amd_sys && tmp.type_intra == PathType::Sys) {
                tmp.same_channels = false;
                continue;
            }
            tmp.same_channels = try_same_channels;
            if time != -1 {
                global_timeout += time as i64;
            } else {
                global_timeout = SEARCH_GLOBAL_TIMEOUT;
            }
            let out_of_time = global_timeout < 0 && graph.n_channels > 0;
            if !out_of_time && relax_one(sys, &bounds, speeds, &mut speed_index, &mut tmp, &graph) {
                continue;
            }
        }
        // done:
        if pass == 1 {
            time = -1;
            if req.dup_before_pass2 {
                dup_channels(&mut graph, cc_min, ngpus);
            }
            tmp = graph.clone();
            speed_index = first_speed_at_most(speeds, graph.bw_inter);
            tmp.bw_intra = speeds[speed_index];
            tmp.bw_inter = speeds[speed_index];
            tmp.min_channels = graph.n_channels;
            pass = 2;
        }
        // pass 2: try to raise the bandwidth of the solution.
        if time != 0
            && speed_index > 0
            && raise_one(&req, speeds, &mut speed_index, &mut tmp, &graph)
        {
            continue;
        }
        break;
    }

    if graph.n_channels == 0 && !graph.coll_net && graph.pattern != Pattern::Nvls {
        one_token_channel(sys, &mut graph);
    }
    if !req.dup_before_pass2 {
        dup_channels(&mut graph, cc_min, ngpus);
    }
    graph
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::system::SearchSystem;

    /// Nothing fits: NCCL falls back to one channel in GPU index order at 0.1 GB/s, type SYS.
    #[test]
    fn fallback_when_no_speed_fits() {
        let topo = crate::pipeline::load_fixture("hgx-h200-8").unwrap();
        let mut sys = SearchSystem::new(&topo, false).unwrap();
        // Every link down to 1 GB/s: below the lowest sm90 intra rung (3 GB/s).
        for bw in &mut sys.link_bw {
            *bw = 1.0;
        }
        let mut st = sys.fresh_state();
        let req = GraphRequest {
            id: 0,
            pattern: Pattern::Ring,
            coll_net: false,
            min_channels: 1,
            max_channels: 32,
            cross_nic_param: 2,
            dup_before_pass2: true,
            family: crate::search::rules::NEWEST,
        };
        let g = compute(&sys, &mut st, req, None);
        assert_eq!(g.n_channels, 1);
        assert_eq!((g.bw_intra, g.bw_inter), (0.1, 0.1));
        assert_eq!((g.type_intra, g.type_inter), (PathType::Sys, PathType::Sys));
        assert_eq!(&g.intra[..8], &[0, 1, 2, 3, 4, 5, 6, 7]);
        // The state is restored after the search: every link back at 1 GB/s.
        assert!(st.link_bw.iter().all(|&b| b == 1.0));
    }

    /// Ring then tree as NCCL runs them (the tree at the ring's channel count), once with shortcuts `a` and once
    /// with `b`: the same graphs, every field (ranks past the last channel included), and the same state left.
    fn assert_same_searches(
        sys: &SearchSystem,
        name: &str,
        family: crate::search::rules::Family,
        dup_before_pass2: bool,
        a: Shortcuts,
        b: Shortcuts,
    ) {
        let mut st_a = sys.fresh_state();
        let mut st_b = sys.fresh_state();
        let mut ring_channels = 0;
        for (id, pattern) in [(0, Pattern::Ring), (1, Pattern::BalancedTree)] {
            let (min, max) = if id == 0 {
                (1, 32)
            } else {
                (ring_channels, ring_channels)
            };
            let req = GraphRequest {
                id,
                pattern,
                coll_net: false,
                min_channels: min,
                max_channels: max,
                cross_nic_param: 2,
                dup_before_pass2,
                family,
            };
            let graph_a = compute_with(sys, &mut st_a, req, None, a);
            let graph_b = compute_with(sys, &mut st_b, req, None, b);
            assert_eq!(graph_a, graph_b, "{name} {family:?} graph {id}");
            ring_channels = graph_a.n_channels;
        }
        assert_eq!(st_a.link_bw, st_b.link_bw, "{name} {family:?}");
        assert_eq!(st_a.net_bw, st_b.net_bw, "{name} {family:?}");
    }

    /// The memo of channel subtrees must not change any graph nor the state left behind, on every fixture, with
    /// the newest search rules and the oldest (2.18: channels duplicated after pass 2).
    #[test]
    fn memo_is_exact() {
        let twins_only = Shortcuts {
            replay_twins: true,
            memo: false,
        };
        let mut compared = 0;
        for f in crate::topo::fixtures::FIXTURES {
            let topo = crate::pipeline::load_fixture(f.name).unwrap();
            let Ok(sys) = SearchSystem::new(&topo, false) else {
                continue;
            };
            for (family, dup) in [(crate::search::rules::NEWEST, true), ((2, 18), false)] {
                assert_same_searches(&sys, f.name, family, dup, Shortcuts::ALL, twins_only);
                compared += 1;
            }
        }
        // The fixtures hold NVSwitch and PCIe machines; every one was compared twice.
        assert!(compared >= 40, "{compared} comparisons");
    }

    /// Replaying crossNic twins must not change any graph (nor the state left behind).
    #[test]
    fn twin_replay_is_exact() {
        let twins_only = Shortcuts {
            replay_twins: true,
            memo: false,
        };
        for f in crate::topo::fixtures::FIXTURES {
            let topo = crate::pipeline::load_fixture(f.name).unwrap();
            let Ok(sys) = SearchSystem::new(&topo, false) else {
                continue;
            };
            let newest = crate::search::rules::NEWEST;
            assert_same_searches(&sys, f.name, newest, true, twins_only, Shortcuts::NONE);
        }
    }

    #[test]
    fn round_matches_roundf() {
        // f32::round is C's roundf (half away from zero); compare on a dense sweep and edges.
        let mut x = -20_000.0f32;
        while x < 20_000.0 {
            assert_eq!(round_half_away(x), x.round(), "{x}");
            x += 0.0371;
        }
        for x in [
            0.5,
            -0.5,
            1.5,
            -1.5,
            2.5,
            0.499_999_97,
            8_388_607.5,
            8_388_608.0,
            3.0e9,
            -3.0e9,
            1.0e30,
            f32::MAX,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ] {
            assert_eq!(round_half_away(x), x.round(), "{x}");
        }
        assert!(round_half_away(f32::NAN).is_nan());
    }
}
