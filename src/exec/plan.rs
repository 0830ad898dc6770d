//! What the executor runs: one collective with one algorithm and protocol, on
//! given rings and trees, with a channel and thread count. Plain data, built
//! from the search (`crate::search::SearchResult`) plus explicit choices, or by
//! hand in tests.

use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::exec::beyond;
use crate::gpu::collective_code;
use crate::gpu::pattern::{DataPattern, Expectation};
use crate::model::{Algo, AnyAlgo, Coll, Pair, Proto};
use crate::search::SearchResult;
use serde::Serialize;
use std::fmt;

pub(crate) use crate::limits::{MAX_CHANNELS, MAX_THREADS, MAX_TREE_ARITY};
/// Most ranks the executor drives (real GPUs or virtual ranks); kernel
/// arguments hold one buffer pair per local rank.
pub(crate) const MAX_RANKS: usize = 16;

/// The executor's spelling of a collective (`all_reduce`): `planner run`
/// output and kernel variant names.
pub(crate) fn coll_name(coll: Coll) -> &'static str {
    match coll {
        Coll::AllReduce => "all_reduce",
        Coll::AllGather => "all_gather",
        Coll::ReduceScatter => "reduce_scatter",
        Coll::Broadcast => "broadcast",
        Coll::Reduce => "reduce",
    }
}

/// `--coll`: the collectives the executor runs (no Reduce).
pub fn parse_collective(text: &str) -> Result<Coll> {
    match Coll::parse(text) {
        Ok(coll) if coll != Coll::Reduce => Ok(coll),
        _ => Err(Error::bad_input(format!(
            "unknown collective '{text}'; expected all-reduce, all-gather, reduce-scatter or broadcast"
        ))),
    }
}

/// `PLANNER_COLL` in the kernels (`collectives.cu`, the shared numbering of
/// `crate::gpu::collective_code`); None for Reduce, which the executor does not run.
pub(crate) fn kernel_coll_id(coll: Coll) -> Option<i32> {
    match coll {
        Coll::Reduce => None,
        other => Some(collective_code(other)),
    }
}

pub(crate) use crate::exec::kernels::kernel_algo_id;

/// `--pair`: a `Pair` (its one parser) whose algorithm the executor runs.
pub fn parse_pair(text: &str) -> Result<Pair> {
    let bad = || {
        Error::bad_input(format!(
            "invalid --pair '{text}': expected ALGO/PROTO with ALGO Ring or Tree and PROTO LL, LL128 or Simple, or one of {}",
            crate::model::beyond::pairs()
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    };
    let pair = Pair::parse(text).map_err(|_| bad())?;
    match kernel_algo_id(pair.algo) {
        Some(_) => Ok(pair),
        None => Err(bad()),
    }
}

/// One rank's tree neighbours on one channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct TreeNode {
    pub up: Option<usize>,
    pub down: Vec<usize>,
}

/// Everything the executor needs to run one collective.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExecPlan {
    pub(crate) collective: Coll,
    pub(crate) algorithm: AnyAlgo,
    pub(crate) protocol: Proto,
    pub n_ranks: usize,
    /// CTAs per rank (one per channel).
    pub n_channels: usize,
    /// Threads per CTA.
    pub n_threads: usize,
    /// Per channel: the ring as a rank sequence; rank `rings[c][i]` sends to `rings[c][i+1]`.
    pub rings: Vec<Vec<usize>>,
    /// Per channel, per rank: tree parent and children.
    pub trees: Vec<Vec<TreeNode>>,
    pub dtype: Dtype,
    /// Bytes per rank as nccl-tests counts them: the all-reduce/broadcast buffer, the
    /// all-gather output or the reduce-scatter input (the total over ranks).
    pub bytes: u64,
    pub in_place: bool,
    /// Broadcast root.
    pub(crate) root: usize,
    /// Where the rings and trees came from, for the report.
    pub(crate) origin: String,
}

/// The choices that do not come from the search.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanChoice {
    pub collective: Coll,
    pub algorithm: AnyAlgo,
    pub protocol: Proto,
    /// None: NCCL's rule for this size (`launch_shape`).
    pub n_channels: Option<usize>,
    pub n_threads: Option<usize>,
    pub dtype: Dtype,
    pub bytes: u64,
    pub in_place: bool,
    pub root: usize,
}

impl PlanChoice {
    pub fn all_reduce(algorithm: impl Into<AnyAlgo>, protocol: Proto, bytes: u64) -> Self {
        PlanChoice {
            collective: Coll::AllReduce,
            algorithm: algorithm.into(),
            protocol,
            n_channels: None,
            n_threads: None,
            dtype: Dtype::F32,
            bytes,
            in_place: false,
            root: 0,
        }
    }
}

impl fmt::Display for ExecPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}/{} {}, {} x {}, {} {}",
            coll_name(self.collective),
            self.algorithm.name(),
            self.protocol.nccl_name(),
            crate::units::count(self.n_ranks, "rank"),
            crate::units::count(self.n_channels, "channel"),
            crate::units::count(self.n_threads, "thread"),
            self.dtype.nccl_tests_name(),
            if self.in_place {
                "in-place"
            } else {
                "out-of-place"
            }
        )
    }
}

/// NCCL's per-call channel and thread choice for Ring and Tree
/// (`enqueue.cc:1865-1907`), from the communicator's
/// channel count and the thread thresholds (§2.9: LL 8, LL128 8, Simple 64;
/// Ring LL times the rank count). `ring_simple_threads` is NCCL's
/// `maxThreads[Ring][Simple]` (256 or 512, §2.3). The kernels beyond NCCL
/// have their own rule (`exec::beyond::launch_shape`).
pub fn launch_shape(
    algorithm: impl Into<AnyAlgo>,
    protocol: Proto,
    n_ranks: usize,
    bytes: u64,
    comm_channels: usize,
    ring_simple_threads: usize,
) -> (usize, usize) {
    let algorithm = match algorithm.into() {
        // planner's own kernels: their own rule, at most the communicator's channels.
        AnyAlgo::Own(own) => return beyond::launch_shape(own, n_ranks, bytes, comm_channels),
        AnyAlgo::Nccl(nccl) => nccl,
    };
    let max_threads = match (algorithm, protocol) {
        (Algo::Ring, Proto::Simple) => ring_simple_threads,
        (_, Proto::Ll128) => 640,
        _ => 512,
    };
    let threshold = match (algorithm, protocol) {
        (Algo::Ring, Proto::Ll) => 8 * n_ranks as u64,
        (_, Proto::Ll) | (_, Proto::Ll128) => 8,
        (_, Proto::Simple) => 64,
    };
    let mut nc = comm_channels.max(1) as u64;
    let mut nt = max_threads as u64;
    while bytes < nc * nt * threshold && nc >= 2 {
        nc -= 1;
    }
    while bytes < nc * nt * threshold && nt.is_multiple_of(128) {
        nt /= 2;
    }
    if protocol == Proto::Simple {
        // Ring +32, Tree +128; plans admit no other algorithm.
        nt += if algorithm == Algo::Tree { 128 } else { 32 };
    }
    if nt / 32 < 3 {
        nt = 96;
    }
    if algorithm == Algo::Tree {
        nt = MAX_THREADS as u64;
    }
    (nc as usize, nt as usize)
}

impl ExecPlan {
    /// A plan on the search's rings and trees. Runtime channels beyond the
    /// search's are copies of its channels in order (as NCCL duplicates them).
    pub fn from_search(search: &SearchResult, choice: &PlanChoice) -> Result<ExecPlan> {
        let conn = &search.connection;
        if conn.rings.is_empty() {
            return Err(Error::runtime("the search returned no ring channel"));
        }
        let n_ranks = conn.rings[0].len();
        let mut rings = Vec::with_capacity(conn.rings.len());
        for (c, ring) in conn.rings.iter().enumerate() {
            let mut order = Vec::with_capacity(ring.len());
            for &r in ring {
                if r < 0 || r as usize >= n_ranks {
                    return Err(Error::runtime(format!(
                        "search ring {c}: rank {r} outside 0..{n_ranks}"
                    )));
                }
                order.push(r as usize);
            }
            rings.push(order);
        }
        let mut trees = Vec::with_capacity(conn.trees.len());
        for (c, per_rank) in conn.trees.iter().enumerate() {
            if per_rank.len() != n_ranks {
                return Err(Error::runtime(format!(
                    "search tree {c}: {} ranks, the rings have {n_ranks}",
                    per_rank.len()
                )));
            }
            let mut nodes = Vec::with_capacity(n_ranks);
            for links in per_rank {
                let conv = |r: i32| -> Result<Option<usize>> {
                    if r < 0 {
                        Ok(None)
                    } else if (r as usize) < n_ranks {
                        Ok(Some(r as usize))
                    } else {
                        Err(Error::runtime(format!(
                            "search tree {c}: rank {r} outside 0..{n_ranks} (a network peer?)"
                        )))
                    }
                };
                let up = conv(links.up)?;
                let mut down = Vec::new();
                for &d in &links.down {
                    if let Some(d) = conv(d)? {
                        down.push(d);
                    }
                }
                nodes.push(TreeNode { up, down });
            }
            trees.push(nodes);
        }
        if trees.is_empty() {
            trees = rings.iter().map(|r| chain_tree(r)).collect();
        }
        let origin = format!(
            "search: {} ring channel(s), {} tree channel(s)",
            rings.len(),
            trees.len()
        );
        Self::build(n_ranks, rings, trees, choice, origin)
    }

    /// Without a search: ring 0..n-1 on every channel and the chain 0 -> 1 -> ...
    /// -> n-1 as the tree (NCCL's one-node tree), `comm_channels` channels.
    pub fn default_shapes(
        n_ranks: usize,
        comm_channels: usize,
        choice: &PlanChoice,
    ) -> Result<ExecPlan> {
        let ring: Vec<usize> = (0..n_ranks).collect();
        let rings = vec![ring.clone(); comm_channels.max(1)];
        let trees = vec![chain_tree(&ring); comm_channels.max(1)];
        Self::build(
            n_ranks,
            rings,
            trees,
            choice,
            "ring 0..n-1 and chain tree (no search result)".to_string(),
        )
    }

    /// Test shapes for virtual ranks: rings alternate between 0..n-1 and its
    /// reverse, trees between the chain and a binary tree (heap order on the
    /// ring), so one run covers several orders and fan-ins of 1 and 2.
    pub fn test_shapes(
        n_ranks: usize,
        comm_channels: usize,
        choice: &PlanChoice,
    ) -> Result<ExecPlan> {
        let n_ch = comm_channels.max(1);
        let mut rings = Vec::new();
        let mut trees = Vec::new();
        for c in 0..n_ch {
            let mut ring: Vec<usize> = (0..n_ranks).collect();
            if c % 2 == 1 {
                ring.reverse();
            }
            trees.push(if c % 2 == 0 {
                chain_tree(&ring)
            } else {
                heap_tree(&ring)
            });
            rings.push(ring);
        }
        Self::build(
            n_ranks,
            rings,
            trees,
            choice,
            "test shapes: rings 0..n-1 / reversed, trees chain / binary".to_string(),
        )
    }

    /// Explicit rings and trees (one per channel, repeated cyclically up to the
    /// channel count).
    pub fn build(
        n_ranks: usize,
        rings: Vec<Vec<usize>>,
        trees: Vec<Vec<TreeNode>>,
        choice: &PlanChoice,
        origin: String,
    ) -> Result<ExecPlan> {
        if n_ranks == 0 || n_ranks > MAX_RANKS {
            return Err(Error::bad_input(format!(
                "{n_ranks} ranks: the executor drives 1 to {MAX_RANKS}"
            )));
        }
        if rings.is_empty() || trees.is_empty() {
            return Err(Error::bad_input(
                "a plan needs at least one ring and one tree",
            ));
        }
        validate_vocabulary(choice)?;
        let (default_nc, default_nt) = launch_shape(
            choice.algorithm,
            choice.protocol,
            n_ranks,
            choice.bytes,
            rings.len(),
            512,
        );
        let n_channels = choice.n_channels.unwrap_or(default_nc);
        let n_threads = choice.n_threads.unwrap_or(default_nt);
        validate_shape(choice, n_channels, n_threads)?;
        if choice.root >= n_ranks {
            return Err(Error::bad_input(format!(
                "--root {}: there are only {n_ranks} ranks",
                choice.root
            )));
        }
        let rings: Vec<Vec<usize>> = (0..n_channels)
            .map(|c| rings[c % rings.len()].clone())
            .collect();
        let trees: Vec<Vec<TreeNode>> = (0..n_channels)
            .map(|c| trees[c % trees.len()].clone())
            .collect();
        for (c, ring) in rings.iter().enumerate() {
            validate_ring(ring, n_ranks).map_err(|e| Error::runtime(format!("ring {c}: {e}")))?;
        }
        for (c, tree) in trees.iter().enumerate() {
            validate_tree(tree, n_ranks).map_err(|e| Error::runtime(format!("tree {c}: {e}")))?;
        }
        let elem = choice.dtype.size();
        if !choice.bytes.is_multiple_of(elem) {
            return Err(Error::bad_input(format!(
                "size {} B is not a whole number of {} elements ({} B each)",
                choice.bytes,
                choice.dtype.nccl_tests_name(),
                elem
            )));
        }
        Ok(ExecPlan {
            collective: choice.collective,
            algorithm: choice.algorithm,
            protocol: choice.protocol,
            n_ranks,
            n_channels,
            n_threads,
            rings,
            trees,
            dtype: choice.dtype,
            bytes: choice.bytes,
            in_place: choice.in_place,
            root: choice.root,
            origin,
        })
    }

    /// Element count of one rank's input buffer.
    pub fn send_count(&self) -> usize {
        let total = (self.bytes / self.dtype.size()) as usize;
        match self.collective {
            Coll::AllReduce | Coll::Broadcast | Coll::Reduce => total,
            Coll::AllGather => self.per_rank_count(),
            Coll::ReduceScatter => self.per_rank_count() * self.n_ranks,
        }
    }

    /// Element count of one rank's output buffer.
    pub(crate) fn recv_count(&self) -> usize {
        let total = (self.bytes / self.dtype.size()) as usize;
        match self.collective {
            Coll::AllReduce | Coll::Broadcast | Coll::Reduce => total,
            Coll::AllGather => self.per_rank_count() * self.n_ranks,
            Coll::ReduceScatter => self.per_rank_count(),
        }
    }

    /// The count a collective call is given: all elements for all-reduce and
    /// broadcast, the per-rank block for all-gather and reduce-scatter. As in
    /// nccl-tests (`common.cu:899-911`) the block is a multiple of 16 bytes.
    pub fn call_count(&self) -> usize {
        match self.collective {
            Coll::AllReduce | Coll::Broadcast | Coll::Reduce => {
                (self.bytes / self.dtype.size()) as usize
            }
            Coll::AllGather | Coll::ReduceScatter => self.per_rank_count(),
        }
    }

    /// The test data of a run of this plan (`crate::gpu::pattern`): its
    /// amplitude follows from the type and the rank count.
    pub(crate) fn data_pattern(&self, seed: u32) -> DataPattern {
        DataPattern::new(self.dtype, self.n_ranks, seed)
    }

    /// What rank `rank`'s output must hold after one call of this plan.
    pub fn expectation(&self, rank: usize, seed: u32) -> Expectation {
        Expectation {
            pattern: self.data_pattern(seed),
            collective: self.collective,
            n_ranks: self.n_ranks as u32,
            rank: rank as u32,
            root: self.root as u32,
            count: self.call_count() as u64,
        }
    }

    fn per_rank_count(&self) -> usize {
        let total = (self.bytes / self.dtype.size()) as usize;
        let align = 16 / self.dtype.size() as usize;
        (total / self.n_ranks) & !(align - 1)
    }

    /// Same plan for another size (channel/thread choice kept).
    pub(crate) fn with_bytes(&self, bytes: u64) -> ExecPlan {
        ExecPlan {
            bytes,
            ..self.clone()
        }
    }
}

/// The part of the vocabulary the executor runs: no Reduce; Ring and Tree,
/// and the all-reduce kernels beyond NCCL (the pairs are checked in
/// `validate_shape`).
fn validate_vocabulary(choice: &PlanChoice) -> Result<()> {
    if kernel_coll_id(choice.collective).is_none() {
        return Err(Error::bad_input(format!(
            "{}: the executor runs all-reduce, all-gather, reduce-scatter and broadcast only",
            choice.collective.cli_name()
        )));
    }
    if kernel_algo_id(choice.algorithm).is_none() {
        return Err(Error::bad_input(format!(
            "{}: the executor runs Ring, Tree, OneShot and TwoShot only",
            choice.algorithm.name()
        )));
    }
    Ok(())
}

fn validate_shape(choice: &PlanChoice, n_channels: usize, n_threads: usize) -> Result<()> {
    if n_channels == 0 || n_channels > MAX_CHANNELS {
        return Err(Error::bad_input(format!(
            "--channels {n_channels}: must be between 1 and {MAX_CHANNELS}"
        )));
    }
    if !n_threads.is_multiple_of(32) || !(64..=MAX_THREADS).contains(&n_threads) {
        return Err(Error::bad_input(format!(
            "--threads {n_threads}: must be a multiple of 32 between 64 and {MAX_THREADS}"
        )));
    }
    if let AnyAlgo::Own(own) = choice.algorithm {
        if choice.collective != Coll::AllReduce || choice.protocol != own.protocol() {
            return Err(Error::bad_input(format!(
                "{} runs all-reduce with {} only (asked for {} {}/{})",
                own.name(),
                own.protocol().nccl_name(),
                coll_name(choice.collective),
                own.name(),
                choice.protocol.nccl_name()
            )));
        }
        if n_threads > beyond::MAX_THREADS {
            return Err(Error::bad_input(format!(
                "--threads {n_threads}: {} runs at most {} threads per CTA",
                own.name(),
                beyond::MAX_THREADS
            )));
        }
    }
    if choice.algorithm == Algo::Tree {
        // The split tree gives each half whole warps (see tree_split_threads).
        let (up, down) = tree_split_threads(choice.protocol, n_threads);
        if up == 0 || down == 0 || !up.is_multiple_of(32) || !down.is_multiple_of(32) {
            return Err(Error::bad_input(format!(
                "--threads {n_threads}: too few for the split tree ({up} reduce + {down} broadcast threads); use at least 128"
            )));
        }
    }
    if choice.collective != Coll::AllReduce
        && (choice.algorithm != Algo::Ring || choice.protocol != Proto::Simple)
    {
        return Err(Error::bad_input(format!(
            "{} runs with Ring/Simple only (asked for {}/{})",
            coll_name(choice.collective),
            choice.algorithm.name(),
            choice.protocol.nccl_name()
        )));
    }
    Ok(())
}

/// NCCL's split of a tree CTA into reduce-up and broadcast-down threads
/// (`all_reduce.h` runTreeSplit): Simple half (+64 from 256 on), LL/LL128 70 %
/// rounded down to whole warps. Returns (reduce, broadcast).
pub(crate) fn tree_split_threads(protocol: Proto, n_threads: usize) -> (usize, usize) {
    let up = match protocol {
        Proto::Simple => {
            let half = n_threads / 2;
            if half >= 256 {
                half + 64
            } else {
                half
            }
        }
        _ => (n_threads * 7 / (10 * 32)) * 32,
    };
    (up, n_threads - up)
}

fn validate_ring(ring: &[usize], n_ranks: usize) -> std::result::Result<(), String> {
    if ring.len() != n_ranks {
        return Err(format!("{} entries for {n_ranks} ranks", ring.len()));
    }
    let mut seen = vec![false; n_ranks];
    for &r in ring {
        if r >= n_ranks {
            return Err(format!("rank {r} outside 0..{n_ranks}"));
        }
        if seen[r] {
            return Err(format!("rank {r} appears twice"));
        }
        seen[r] = true;
    }
    Ok(())
}

/// A tree must be one tree over all ranks: one root, parent and child links
/// that agree, at most `MAX_TREE_ARITY` children, every rank reachable.
pub fn validate_tree(tree: &[TreeNode], n_ranks: usize) -> std::result::Result<(), String> {
    if tree.len() != n_ranks {
        return Err(format!("{} entries for {n_ranks} ranks", tree.len()));
    }
    let roots: Vec<usize> = (0..n_ranks).filter(|&r| tree[r].up.is_none()).collect();
    if roots.len() != 1 {
        return Err(format!(
            "{} roots ({roots:?}), need exactly one",
            roots.len()
        ));
    }
    for (r, node) in tree.iter().enumerate() {
        if node.down.len() > MAX_TREE_ARITY {
            return Err(format!(
                "rank {r} has {} children (at most {MAX_TREE_ARITY})",
                node.down.len()
            ));
        }
        for &d in &node.down {
            if d >= n_ranks || tree[d].up != Some(r) {
                return Err(format!("rank {r} lists child {d}, whose parent is not {r}"));
            }
        }
        if let Some(u) = node.up {
            if u >= n_ranks || !tree[u].down.contains(&r) {
                return Err(format!("rank {r} has parent {u}, which does not list it"));
            }
        }
    }
    let mut reached = vec![false; n_ranks];
    let mut stack = vec![roots[0]];
    while let Some(r) = stack.pop() {
        if reached[r] {
            return Err(format!("rank {r} reached twice (a cycle)"));
        }
        reached[r] = true;
        stack.extend(tree[r].down.iter().copied());
    }
    if let Some(r) = reached.iter().position(|&x| !x) {
        return Err(format!("rank {r} is not reachable from the root"));
    }
    Ok(())
}

/// The chain along `order`: order[0] is the root, each rank's child is the next.
pub fn chain_tree(order: &[usize]) -> Vec<TreeNode> {
    let mut nodes = vec![TreeNode::default(); order.len()];
    for (i, &r) in order.iter().enumerate() {
        nodes[r].up = if i == 0 { None } else { Some(order[i - 1]) };
        if i + 1 < order.len() {
            nodes[r].down = vec![order[i + 1]];
        }
    }
    nodes
}

/// A binary tree in heap order along `order`: the parent of order[i] is order[(i-1)/2].
pub fn heap_tree(order: &[usize]) -> Vec<TreeNode> {
    let mut nodes = vec![TreeNode::default(); order.len()];
    for (i, &r) in order.iter().enumerate() {
        if i > 0 {
            nodes[r].up = Some(order[(i - 1) / 2]);
        }
        for child in [2 * i + 1, 2 * i + 2] {
            if child < order.len() {
                nodes[r].down.push(order[child]);
            }
        }
    }
    nodes
}
