//! The all-reduce kernels beyond NCCL's menu (`OwnAlgo`,
//! `kernels/beyond.cu`) on the CPU: their constants and geometry (which CTA
//! and thread handle which 16-byte unit, how big the peer area is, the
//! launch shape per size), and a model of each flag protocol played through
//! random interleavings of every rank, CTA and thread, so tests can check
//! without a GPU that no rank reads data before it is written or after it is
//! overwritten, that a CUDA-graph replay cannot pass on the flags of an
//! earlier call, and that every output unit ends up as the exact sum.
//!
//! * `OneShot/LL`: per round, every thread pushes its 16-byte units as LL
//!   lines (data + the round number as flag) into every peer's inbox (two
//!   slots, by the round's parity), then polls its own inbox for the peers'
//!   units and adds all n inputs in rank order. No barrier.
//! * `TwoShot/Simple`: barrier 2e, reduce-scatter of 1/n (read every rank's
//!   input slice, 16-byte loads) with the sum stored straight into every
//!   rank's output (all-gather by stores), barrier 2e+1; e = calls done + 1.
//!
//! Both keep a per-(rank, channel) counter in device memory (rounds for
//! OneShot, calls for TwoShot) that each launch reads and advances, so a
//! replayed graph continues the sequence. The models are sequentially
//! consistent: the kernels' fences (`fence.acq_rel.sys` before a flag store,
//! `ld.acquire.sys` on the wait, 16-byte single-access LL lines) provide
//! that order at every point the models rely on.
//!
//! The inputs are the executor's own buffers: cuMemAlloc memory of a GPU is
//! readable and writable by every GPU with peer access to it
//! (cuCtxEnablePeerAccess maps all of it), and virtual ranks share one GPU,
//! so no copy into a registered buffer is needed (nor timed).

use crate::model::OwnAlgo;

/// Most threads per CTA (`PEER_MAX_THREADS`, the kernel's launch bound).
pub(crate) const MAX_THREADS: usize = 512;
/// Offsets in a rank's peer area (`beyond.cu`): counters, barrier flags, LL inbox.
pub(crate) const COUNTER_OFF: usize = 0;
pub(crate) const FLAGS_OFF: usize = 512;
pub(crate) const INBOX_OFF: usize = 16384;
/// `ONESHOT_UNITS`: 16-byte units per thread per OneShot round.
pub const ONESHOT_UNITS: usize = 1;
/// `TWOSHOT_UNROLL`: units per thread in flight in TwoShot.
pub(crate) const TWOSHOT_UNROLL: usize = 4;
/// Bytes of one inbox entry: two 16-byte LL lines carry one 16-byte unit.
pub(crate) const INBOX_UNIT_BYTES: usize = 32;

// The counters and flags of 64 channels x 16 ranks fit between their offsets.
const _: () = assert!(COUNTER_OFF + 64 * 8 <= FLAGS_OFF);
const _: () = assert!(FLAGS_OFF + 64 * 16 * 8 <= INBOX_OFF);

/// Bytes of one rank's peer area: counters and flags, plus the OneShot inbox
/// for `channels` CTAs of up to `threads` threads on `n_ranks` ranks.
pub(crate) fn peer_area_bytes(
    algo: OwnAlgo,
    n_ranks: usize,
    channels: usize,
    threads: usize,
) -> usize {
    match algo {
        OwnAlgo::OneShot => {
            INBOX_OFF + 2 * n_ranks * channels * ONESHOT_UNITS * threads * INBOX_UNIT_BYTES
        }
        OwnAlgo::TwoShot => INBOX_OFF,
    }
}

/// 16-byte units of `count` elements of `elem_bytes` (the last may be partial).
pub(crate) fn units(count: u64, elem_bytes: u64) -> u64 {
    let epv = 16 / elem_bytes.max(1);
    count.div_ceil(epv)
}

/// OneShot rounds of one launch: every round, each of `channels` CTAs of
/// `threads` threads takes ONESHOT_UNITS units per thread.
pub fn one_shot_rounds(n_units: u64, channels: usize, threads: usize) -> u64 {
    let all_round = (ONESHOT_UNITS * threads * channels).max(1) as u64;
    n_units.div_ceil(all_round)
}

/// The unit OneShot's thread `tid` of CTA `ch` handles in round `k`, slot `u`
/// (may be past the end: then only unit slot 0 is sent, as a flag-only line).
pub fn one_shot_unit(
    k: u64,
    ch: usize,
    tid: usize,
    u: usize,
    channels: usize,
    threads: usize,
) -> u64 {
    let cta_round = (ONESHOT_UNITS * threads) as u64;
    k * cta_round * channels as u64 + ch as u64 * cta_round + (u * threads + tid) as u64
}

/// TwoShot: elements `[lo, hi)` that CTA `ch` of rank `rank` reduces and
/// broadcasts. Slices (1/n) and CTA parts are whole 16-byte units; only the
/// buffer's end is ragged.
pub fn two_shot_part(
    count: u64,
    elem_bytes: u64,
    n_ranks: usize,
    channels: usize,
    rank: usize,
    ch: usize,
) -> (u64, u64) {
    let epv = 16 / elem_bytes.max(1);
    let n = n_ranks.max(1) as u64;
    let slice = count.div_ceil(n).div_ceil(epv) * epv;
    let s_lo = count.min(rank as u64 * slice);
    let s_hi = count.min(s_lo + slice);
    let part = slice.div_ceil(channels.max(1) as u64).div_ceil(epv) * epv;
    let lo = s_hi.min(s_lo + ch as u64 * part);
    let hi = s_hi.min(lo + part);
    (lo, hi)
}

/// The kernels' own launch shape (CTAs per rank, threads per CTA) for an
/// all-reduce of `bytes` per rank on `n_ranks`, at most `max_ctas` CTAs:
/// as few CTAs and threads as hold the data in one pass (OneShot: one unit
/// per thread per round; TwoShot: TWOSHOT_UNROLL units per thread of its
/// 1/n slice), whole warps, 64 to 512 threads.
pub(crate) fn launch_shape(
    algo: OwnAlgo,
    n_ranks: usize,
    bytes: u64,
    max_ctas: usize,
) -> (usize, usize) {
    let n_units = bytes.div_ceil(16).max(1);
    let (per_thread, work) = match algo {
        OwnAlgo::OneShot => (ONESHOT_UNITS as u64, n_units),
        OwnAlgo::TwoShot => (
            TWOSHOT_UNROLL as u64,
            n_units.div_ceil(n_ranks.max(1) as u64),
        ),
    };
    let threads_needed = work.div_ceil(per_thread);
    let per_cta = MAX_THREADS as u64;
    let ctas = threads_needed
        .div_ceil(per_cta)
        .clamp(1, max_ctas.max(1) as u64) as usize;
    let threads = if ctas == 1 {
        (threads_needed.div_ceil(32) * 32).clamp(64, MAX_THREADS as u64) as usize
    } else {
        MAX_THREADS
    };
    (ctas, threads)
}

// ------------------------------------------------------------ the models

/// A small deterministic generator for the interleavings (xorshift64*).
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % n.max(1) as u64) as usize
    }
}

/// The input value of unit `unit` of rank `rank` at call `call`: distinct
/// per (rank, call, unit), so a misplaced or stale unit shows in the sum.
pub(crate) fn model_input(rank: usize, call: usize, unit: u64) -> i64 {
    (rank as i64 + 1) * 1_000_003 + call as i64 * 7_919 + unit as i64
}

fn model_sum(n_ranks: usize, call: usize, unit: u64) -> i64 {
    (0..n_ranks).map(|r| model_input(r, call, unit)).sum()
}

/// One launch of a model: its shape and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelCall {
    pub channels: usize,
    pub threads: usize,
    /// Elements per rank.
    pub count: u64,
    pub elem_bytes: u64,
}

/// A deliberate protocol bug, to show the models catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutant {
    /// The protocol as the kernels run it.
    None,
    /// The sequence number is a launch argument, as if captured into a CUDA
    /// graph: every call of the sequence reuses the first call's value.
    SequenceFromLaunch,
    /// OneShot: one inbox slot instead of two (no parity).
    OneSlot,
    /// TwoShot: no barrier before the reduce-scatter.
    NoStartBarrier,
    /// TwoShot: no barrier after the all-gather.
    NoEndBarrier,
}

/// What a model run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Scheduler steps taken.
    pub(crate) steps: u64,
    /// Polls or waits that found their flag not yet set (a thread had to wait).
    pub blocked_polls: u64,
    /// Output units checked.
    pub units_checked: u64,
}

/// OneShot/LL: one slot of an inbox.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    flag: u32,
    /// The round the data really belongs to (the model's truth, not the flag).
    round: u64,
    from: usize,
    unit: u64,
    value: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LlPhase {
    Push(usize),
    Poll(usize),
    Done,
}

#[derive(Debug, Clone)]
struct LlThread {
    ch: usize,
    tid: usize,
    /// Round index within this launch.
    k: u64,
    phase: LlPhase,
    acc: i64,
}

/// The OneShot model's deadlock message: the calls each rank reached and the first threads still waiting.
fn one_shot_deadlock(threads: &[Vec<LlThread>], call_of: &[usize]) -> String {
    let waiting: Vec<String> = threads
        .iter()
        .enumerate()
        .flat_map(|(r, ts)| {
            ts.iter()
                .filter(|t| t.phase != LlPhase::Done)
                .map(move |t| {
                    format!(
                        "rank {r} ch {} thread {} round {} {:?}",
                        t.ch, t.tid, t.k, t.phase
                    )
                })
        })
        .take(4)
        .collect();
    format!(
        "deadlock: no thread can move (calls reached per rank {call_of:?}; {})",
        waiting.join(", ")
    )
}

/// Play OneShot/LL through `calls` (every rank runs them in order, each rank
/// on its own stream: a rank's next launch starts when all its threads of
/// the previous one are done, independently of the other ranks) with a
/// random interleaving from `seed`. Err names the first violation: a poll
/// that passed on data of another round or unit, a wrong output unit, or a
/// deadlock.
pub fn simulate_one_shot(
    n_ranks: usize,
    calls: &[ModelCall],
    seed: u64,
    mutant: Mutant,
) -> Result<ModelStats, String> {
    let mut rng = Rng::new(seed);
    let mut sim = OneShotSim::new(n_ranks, calls, mutant);
    loop {
        sim.end_launches();
        if sim.call_of.iter().all(|&c| c >= calls.len()) {
            return Ok(sim.stats);
        }
        let (runnable, blocked) = sim.runnable();
        if runnable.is_empty() {
            return Err(one_shot_deadlock(&sim.threads, &sim.call_of));
        }
        sim.stats.blocked_polls += blocked;
        sim.stats.steps += 1;
        let (r, i) = runnable[rng.below(runnable.len())];
        sim.step(r, i)?;
    }
}

/// The OneShot/LL model's state: per rank its call, its threads and, per channel, the device counter (rounds
/// done), the first round of its current launch (true, and as flagged) and, for the mutant, the value captured at
/// the first launch; the inboxes.
struct OneShotSim<'a> {
    n_ranks: usize,
    calls: &'a [ModelCall],
    mutant: Mutant,
    stats: ModelStats,
    counter: Vec<Vec<u64>>,
    captured: Vec<Vec<u64>>,
    /// Inbox: (owner, parity, from, ch, u, tid) -> slot.
    inbox: std::collections::HashMap<(usize, u64, usize, usize, usize, usize), Slot>,
    call_of: Vec<usize>,
    threads: Vec<Vec<LlThread>>,
    r0_true: Vec<Vec<u64>>,
    r0_flag: Vec<Vec<u64>>,
}

impl<'a> OneShotSim<'a> {
    /// Every rank at its first call's launch.
    fn new(n_ranks: usize, calls: &'a [ModelCall], mutant: Mutant) -> Self {
        let max_ch = calls.iter().map(|c| c.channels).max().unwrap_or(1);
        let counter = vec![vec![0u64; max_ch]; n_ranks];
        let mut sim = OneShotSim {
            n_ranks,
            calls,
            mutant,
            stats: ModelStats::default(),
            captured: counter.clone(),
            counter,
            inbox: std::collections::HashMap::new(),
            call_of: vec![0usize; n_ranks],
            threads: vec![Vec::new(); n_ranks],
            r0_true: vec![vec![0u64; max_ch]; n_ranks],
            r0_flag: vec![vec![0u64; max_ch]; n_ranks],
        };
        if let Some(call) = calls.first() {
            for r in 0..n_ranks {
                sim.threads[r] = sim.start(r, call);
            }
        }
        sim
    }

    /// Rank `r` launches `call`: its first rounds per channel (true, and as flagged), its threads.
    fn start(&mut self, r: usize, call: &ModelCall) -> Vec<LlThread> {
        let mut v = Vec::new();
        for ch in 0..call.channels {
            self.r0_true[r][ch] = self.counter[r][ch];
            self.r0_flag[r][ch] = if self.mutant == Mutant::SequenceFromLaunch {
                self.captured[r][ch]
            } else {
                self.counter[r][ch]
            };
            let rounds = one_shot_rounds(
                units(call.count, call.elem_bytes),
                call.channels,
                call.threads,
            );
            for tid in 0..call.threads {
                v.push(LlThread {
                    ch,
                    tid,
                    k: 0,
                    phase: if rounds == 0 {
                        LlPhase::Done
                    } else {
                        LlPhase::Push(0)
                    },
                    acc: 0,
                });
            }
        }
        v
    }

    fn parity_of(&self, round: u64) -> u64 {
        if self.mutant == Mutant::OneSlot {
            0
        } else {
            round & 1
        }
    }

    /// Launch ends: a rank whose threads are all done moves to its next call.
    fn end_launches(&mut self) {
        let calls = self.calls;
        for r in 0..self.n_ranks {
            while self.call_of[r] < calls.len()
                && self.threads[r].iter().all(|t| t.phase == LlPhase::Done)
            {
                let call = calls[self.call_of[r]];
                let n_units = units(call.count, call.elem_bytes);
                let rounds = one_shot_rounds(n_units, call.channels, call.threads);
                for ch in 0..call.channels {
                    self.counter[r][ch] = self.r0_true[r][ch] + rounds;
                }
                self.call_of[r] += 1;
                self.threads[r] = match calls.get(self.call_of[r]) {
                    Some(next) => self.start(r, next),
                    None => Vec::new(),
                };
            }
        }
    }

    /// The poll's slot of thread `t` of rank `r` from peer `q` at `flag_round`.
    fn slot(&self, r: usize, t: &LlThread, q: usize, flag_round: u64) -> Slot {
        self.inbox
            .get(&(r, self.parity_of(flag_round), q, t.ch, 0, t.tid))
            .copied()
            .unwrap_or_default()
    }

    /// Runnable threads (rank, index): a push always, a poll once its slot holds the flag; and how many polls
    /// are blocked.
    fn runnable(&self) -> (Vec<(usize, usize)>, u64) {
        let mut runnable = Vec::new();
        let mut blocked = 0u64;
        for r in 0..self.n_ranks {
            if self.call_of[r] >= self.calls.len() {
                continue;
            }
            for (i, t) in self.threads[r].iter().enumerate() {
                match t.phase {
                    LlPhase::Poll(q) if q < self.n_ranks => {
                        let flag_round = self.r0_flag[r][t.ch] + 1 + t.k;
                        if self.slot(r, t, q, flag_round).flag == flag_round as u32 {
                            runnable.push((r, i));
                        } else {
                            blocked += 1;
                        }
                    }
                    LlPhase::Done => {}
                    _ => runnable.push((r, i)),
                }
            }
        }
        (runnable, blocked)
    }

    /// One step of thread `i` of rank `r`: a push into the next peer's inbox, a poll of one peer, or the end of
    /// a round (its unit checked). Err on data of another round or unit, or a wrong sum.
    fn step(&mut self, r: usize, i: usize) -> Result<(), String> {
        let n_ranks = self.n_ranks;
        let call = self.calls[self.call_of[r]];
        let n_units = units(call.count, call.elem_bytes);
        let rounds = one_shot_rounds(n_units, call.channels, call.threads);
        let t = self.threads[r][i].clone();
        let true_round = self.r0_true[r][t.ch] + 1 + t.k;
        let flag_round = self.r0_flag[r][t.ch] + 1 + t.k;
        let unit = one_shot_unit(t.k, t.ch, t.tid, 0, call.channels, call.threads);
        let value = if unit < n_units {
            model_input(r, self.call_of[r], unit)
        } else {
            0
        };
        // The first peer from q on in rank order, skipping this rank.
        let next_peer = |q: usize| (q..n_ranks).find(|&p| p != r);
        let mut t = t;
        match t.phase {
            LlPhase::Push(q) => match next_peer(q) {
                Some(p) => {
                    let parity = self.parity_of(flag_round);
                    self.inbox.insert(
                        (p, parity, r, t.ch, 0, t.tid),
                        Slot {
                            flag: flag_round as u32,
                            round: true_round,
                            from: r,
                            unit,
                            value,
                        },
                    );
                    t.phase = LlPhase::Push(p + 1);
                }
                None => {
                    t.acc = value;
                    t.phase = LlPhase::Poll(next_peer(0).unwrap_or(n_ranks));
                }
            },
            LlPhase::Poll(q) if q < n_ranks => {
                // Runnable: the slot holds this round's flag.
                let slot = self.slot(r, &t, q, flag_round);
                if slot.round != true_round || slot.from != q || slot.unit != unit {
                    return Err(format!(
                        "rank {r} channel {} thread {} round {true_round}: the poll of peer {q} passed on round {} unit {} of rank {} (want unit {unit})",
                        t.ch, t.tid, slot.round, slot.unit, slot.from
                    ));
                }
                t.acc += slot.value;
                t.phase = LlPhase::Poll(next_peer(q + 1).unwrap_or(n_ranks));
            }
            LlPhase::Poll(_) => {
                if unit < n_units {
                    let want = model_sum(n_ranks, self.call_of[r], unit);
                    if t.acc != want {
                        return Err(format!(
                            "rank {r} call {} unit {unit}: sum {} (want {want})",
                            self.call_of[r], t.acc
                        ));
                    }
                    self.stats.units_checked += 1;
                }
                t.k += 1;
                t.acc = 0;
                t.phase = if t.k >= rounds {
                    LlPhase::Done
                } else {
                    LlPhase::Push(0)
                };
            }
            LlPhase::Done => {}
        }
        self.threads[r][i] = t;
        Ok(())
    }
}

/// TwoShot/Simple: one buffer cell (a 16-byte unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    Poison,
    /// The input of (rank, call), as the user wrote it.
    Input {
        rank: usize,
        call: usize,
    },
    /// The all-reduce result of a call.
    Output {
        call: usize,
        value: i64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CtaPhase {
    /// Barrier `which` (0 start, 1 end): signalling peer q, then waiting for peer q.
    Signal(u8, usize),
    Wait(u8, usize),
    /// Data phase: its unit workers run.
    Data,
    Done,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UnitStep {
    Read(usize),
    Write(usize),
    Done,
}

#[derive(Debug, Clone)]
struct Cta {
    ch: usize,
    /// The call number as the barrier values use it (e), and the truth.
    e_flag: u64,
    phase: CtaPhase,
    /// Per unit of this CTA's part: (unit, step, running sum).
    units: Vec<(u64, UnitStep, i64)>,
}

/// One move of a TwoShot model step on a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TwoShotMove {
    /// The user's next input write.
    User,
    /// CTA c's barrier or phase step.
    Cta(usize),
    /// CTA c's unit worker i: its next read or write.
    Unit(usize, usize),
}

/// What a rank's stream does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    /// The user writes the call's input, unit by unit (stream-ordered before the launch).
    UserWrite(u64),
    Kernel,
    Finished,
}

/// The first phase of TwoShot's barrier `which` (0 start, 1 end), or past it where the mutant drops it.
fn two_shot_first_phase(mutant: Mutant, which: u8) -> CtaPhase {
    let uses_barrier = match mutant {
        Mutant::NoStartBarrier => which != 0,
        Mutant::NoEndBarrier => which != 1,
        _ => true,
    };
    if uses_barrier {
        CtaPhase::Signal(which, 0)
    } else if which == 0 {
        CtaPhase::Data
    } else {
        CtaPhase::Done
    }
}

/// What may move now in the TwoShot model, per rank; counts the waits that found their flag not yet set.
fn two_shot_runnable(
    stream: &[Stream],
    ctas: &[Vec<Cta>],
    flags: &[Vec<Vec<u64>>],
    stats: &mut ModelStats,
) -> Vec<(usize, TwoShotMove)> {
    let n_ranks = stream.len();
    // What may move now, per rank.
    let mut runnable: Vec<(usize, TwoShotMove)> = Vec::new();
    for r in 0..n_ranks {
        match stream[r] {
            Stream::UserWrite(_) => runnable.push((r, TwoShotMove::User)),
            Stream::Kernel => {
                for (c, cta) in ctas[r].iter().enumerate() {
                    match cta.phase {
                        CtaPhase::Signal(..) => runnable.push((r, TwoShotMove::Cta(c))),
                        CtaPhase::Wait(which, q) => {
                            let value = 2 * cta.e_flag + which as u64;
                            if flags[r][cta.ch][q] >= value {
                                runnable.push((r, TwoShotMove::Cta(c)));
                            } else {
                                stats.blocked_polls += 1;
                            }
                        }
                        CtaPhase::Data => {
                            let mut any = false;
                            for (i, u) in cta.units.iter().enumerate() {
                                if u.1 != UnitStep::Done {
                                    runnable.push((r, TwoShotMove::Unit(c, i)));
                                    any = true;
                                }
                            }
                            if !any {
                                runnable.push((r, TwoShotMove::Cta(c)));
                            }
                        }
                        CtaPhase::Done => {}
                    }
                }
            }
            Stream::Finished => {}
        }
    }
    runnable
}

/// The CTAs of rank `r`'s TwoShot launch of `call`: each reads and advances its channel's counter
/// (`counter`, the rank's row; `captured`, the values the mutant's launch argument froze).
fn two_shot_launch(
    r: usize,
    call: &ModelCall,
    n_ranks: usize,
    counter: &mut [u64],
    captured: &[u64],
    mutant: Mutant,
) -> Vec<Cta> {
    let epv = 16 / call.elem_bytes.max(1);
    (0..call.channels)
        .map(|ch| {
            let e_true = counter[ch] + 1;
            let e_flag = if mutant == Mutant::SequenceFromLaunch {
                captured[ch] + 1
            } else {
                e_true
            };
            let (lo, hi) =
                two_shot_part(call.count, call.elem_bytes, n_ranks, call.channels, r, ch);
            let unit_list = (lo / epv..hi.div_ceil(epv))
                .filter(|_| hi > lo)
                .map(|u| (u, UnitStep::Read(0), 0i64))
                .collect();
            counter[ch] = e_true;
            Cta {
                ch,
                e_flag,
                phase: two_shot_first_phase(mutant, 0),
                units: unit_list,
            }
        })
        .collect()
}

/// One barrier or phase step of TwoShot's CTA `cta` of rank `r`.
fn two_shot_cta_step(
    cta: &mut Cta,
    r: usize,
    n_ranks: usize,
    flags: &mut [Vec<Vec<u64>>],
    mutant: Mutant,
) {
    let peers_from = |q: usize| (q..n_ranks).find(|&p| p != r);
    let after = |which: u8| {
        if which == 0 {
            CtaPhase::Data
        } else {
            CtaPhase::Done
        }
    };
    match cta.phase {
        CtaPhase::Signal(which, q) => match peers_from(q) {
            Some(p) => {
                flags[p][cta.ch][r] = 2 * cta.e_flag + which as u64;
                cta.phase = CtaPhase::Signal(which, p + 1);
            }
            None => {
                cta.phase = match peers_from(0) {
                    Some(p) => CtaPhase::Wait(which, p),
                    None => after(which),
                }
            }
        },
        // Runnable: the peer's flag reached the value.
        CtaPhase::Wait(which, q) => {
            cta.phase = match peers_from(q + 1) {
                Some(p) => CtaPhase::Wait(which, p),
                None => after(which),
            }
        }
        CtaPhase::Data => cta.phase = two_shot_first_phase(mutant, 1),
        CtaPhase::Done => {}
    }
}

/// Play TwoShot/Simple through `calls`, each preceded on every rank by the
/// user writing that call's input into the rank's input buffer (in place:
/// into its one buffer), every rank on its own stream, with a random
/// interleaving from `seed`. Err names the first violation: a read that saw
/// anything but this call's input of that rank, an output unit that is not
/// this call's sum when its rank's launch ends, or a deadlock.
pub fn simulate_two_shot(
    n_ranks: usize,
    calls: &[ModelCall],
    in_place: bool,
    seed: u64,
    mutant: Mutant,
) -> Result<ModelStats, String> {
    let mut rng = Rng::new(seed);
    let mut stats = ModelStats::default();
    let max_units = calls
        .iter()
        .map(|c| units(c.count, c.elem_bytes))
        .max()
        .unwrap_or(0) as usize;
    let max_ch = calls.iter().map(|c| c.channels).max().unwrap_or(1);
    // Buffers per rank: input and output (the same one in place).
    let mut input = vec![vec![Cell::Poison; max_units]; n_ranks];
    let mut output = vec![vec![Cell::Poison; max_units]; n_ranks];
    // flags[owner][ch][from]
    let mut flags = vec![vec![vec![0u64; n_ranks]; max_ch]; n_ranks];
    let mut counter = vec![vec![0u64; max_ch]; n_ranks];
    let captured = counter.clone();
    let mut call_of = vec![0usize; n_ranks];
    let mut stream = vec![Stream::UserWrite(0); n_ranks];
    let mut ctas: Vec<Vec<Cta>> = vec![Vec::new(); n_ranks];
    if calls.is_empty() {
        return Ok(stats);
    }
    loop {
        if stream.iter().all(|s| *s == Stream::Finished) {
            return Ok(stats);
        }
        let runnable = two_shot_runnable(&stream, &ctas, &flags, &mut stats);
        if runnable.is_empty() {
            return Err(format!(
                "deadlock: nothing can move (calls reached per rank {call_of:?})"
            ));
        }
        stats.steps += 1;
        let (r, what) = runnable[rng.below(runnable.len())];
        let call = calls[call_of[r]];
        let n_units = units(call.count, call.elem_bytes);
        match what {
            TwoShotMove::User => {
                let Stream::UserWrite(u) = stream[r] else {
                    continue;
                };
                if u < n_units {
                    input[r][u as usize] = Cell::Input {
                        rank: r,
                        call: call_of[r],
                    };
                    if in_place {
                        output[r][u as usize] = input[r][u as usize];
                    }
                    stream[r] = Stream::UserWrite(u + 1);
                }
                if u + 1 >= n_units {
                    // Launch: every CTA reads its counter.
                    ctas[r] =
                        two_shot_launch(r, &call, n_ranks, &mut counter[r], &captured[r], mutant);
                    stream[r] = Stream::Kernel;
                }
            }
            TwoShotMove::Cta(c) => {
                two_shot_cta_step(&mut ctas[r][c], r, n_ranks, &mut flags, mutant)
            }
            TwoShotMove::Unit(c, i) => {
                let cta = &mut ctas[r][c];
                let (unit, step, acc) = cta.units[i];
                match step {
                    UnitStep::Read(q) => {
                        let cell = input[q][unit as usize];
                        let want = Cell::Input {
                            rank: q,
                            call: call_of[r],
                        };
                        if cell != want {
                            return Err(format!(
                                "rank {r} call {} channel {}: read unit {unit} of rank {q}'s input and saw {cell:?} (want {want:?})",
                                call_of[r], cta.ch
                            ));
                        }
                        let acc = acc + model_input(q, call_of[r], unit);
                        let next = if q + 1 < n_ranks {
                            UnitStep::Read(q + 1)
                        } else {
                            UnitStep::Write(0)
                        };
                        cta.units[i] = (unit, next, acc);
                    }
                    UnitStep::Write(d) => {
                        output[d][unit as usize] = Cell::Output {
                            call: call_of[r],
                            value: acc,
                        };
                        if in_place {
                            input[d][unit as usize] = output[d][unit as usize];
                        }
                        let next = if d + 1 < n_ranks {
                            UnitStep::Write(d + 1)
                        } else {
                            UnitStep::Done
                        };
                        cta.units[i] = (unit, next, acc);
                    }
                    UnitStep::Done => {}
                }
            }
        }
        // Launch end: every CTA done -> check this rank's output, next call.
        if stream[r] == Stream::Kernel && ctas[r].iter().all(|c| c.phase == CtaPhase::Done) {
            for u in 0..n_units {
                let want = Cell::Output {
                    call: call_of[r],
                    value: model_sum(n_ranks, call_of[r], u),
                };
                if output[r][u as usize] != want {
                    return Err(format!(
                        "rank {r} call {}: at the end of its launch output unit {u} is {:?} (want {want:?})",
                        call_of[r], output[r][u as usize]
                    ));
                }
                stats.units_checked += 1;
            }
            call_of[r] += 1;
            stream[r] = if call_of[r] < calls.len() {
                Stream::UserWrite(0)
            } else {
                Stream::Finished
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_shapes_by_hand() {
        // 8 B: one unit, one CTA of the fewest threads.
        assert_eq!(launch_shape(OwnAlgo::OneShot, 2, 8, 24), (1, 64));
        // 64 KiB = 4096 units: 8 CTAs of 512 threads.
        assert_eq!(launch_shape(OwnAlgo::OneShot, 2, 64 << 10, 24), (8, 512));
        // 256 MiB: capped at 24 CTAs.
        assert_eq!(launch_shape(OwnAlgo::OneShot, 2, 256 << 20, 24), (24, 512));
        // TwoShot 2 ranks, 64 KiB: 2048 units per slice, 4 per thread: 512 threads.
        assert_eq!(launch_shape(OwnAlgo::TwoShot, 2, 64 << 10, 24), (1, 512));
        assert_eq!(launch_shape(OwnAlgo::TwoShot, 8, 1 << 20, 24), (4, 512));
    }

    #[test]
    fn peer_area_sizes() {
        assert_eq!(peer_area_bytes(OwnAlgo::TwoShot, 8, 24, 512), INBOX_OFF);
        assert_eq!(
            peer_area_bytes(OwnAlgo::OneShot, 2, 1, 64),
            INBOX_OFF + 2 * 2 * 64 * 32
        );
    }
}
