//! A memo of the search's channel subtrees, so that NCCL's search gives the same graph at a fraction of the steps.
//!
//! Where the search budget binds (an NVSwitch ring at a speed where a seventh channel never fits), NCCL's
//! `ncclTopoSearchRec` reaches the same bandwidth state at a channel boundary again and again: every order of the
//! same rings charges the same links. What the search does below a boundary depends only on what the key holds:
//! the channel count, the hop count, the previous channel (the same-channel replay follows it), the links' and the
//! NETs' bandwidths left. The used-GPU flags of the channels still to come are all clear at a boundary, and the
//! settings of the pass are fixed (the memo is cleared at every pass). The saved graph does not steer the
//! recursion: it only decides whether a finished channel set is kept, and a kept set that reaches the pass's
//! channel limit ends the pass (`time = -1`); a subtree that ended so is not stored.
//!
//! A subtree explored to its end is stored with the budget it took, the best channel count it completed (and the
//! fewest hops at that count) and the graph tail it left behind (later channels' ranks: not read again, but part
//! of the graph NCCL would hold). When the same boundary comes again, with more budget left than the subtree
//! takes and a saved graph that no graph of the subtree could beat, the search skips it: NCCL would walk the same
//! steps, keep nothing, restore every link, and leave the same tail. Otherwise it walks the subtree as NCCL does.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// The most channels a subtree completed and the fewest hops at that count (`None`: it completed none).
pub(super) type Best = Option<(usize, i32)>;

/// What one subtree, explored to its end, did.
struct Outcome {
    /// Budget it took (NCCL's `time` decrements).
    steps: i32,
    best: Best,
    /// `intra` from the subtree's first channel to the last one it built, as the subtree left it.
    intra_tail: Box<[i32]>,
}

/// The memo of one pass and the summaries of the subtrees being explored.
#[derive(Default)]
pub(super) struct ChannelMemo {
    entries: HashMap<Box<[u32]>, Outcome, BuildHasherDefault<WordHasher>>,
    /// One summary per subtree being explored, innermost last.
    open: Vec<Best>,
    /// Key buffers to reuse, so that only a stored key is allocated.
    buffers: Vec<Vec<u32>>,
}

/// The boundary's key: which part of the search (`kind`), channel count, hop count, the previous channel's ranks
/// where that part reads them, the link and NET bandwidths left (as bits: equal keys mean bit-identical states).
pub(super) fn key_into(
    key: &mut Vec<u32>,
    kind: u32,
    n_channels: usize,
    n_hops: i32,
    previous: &[i32],
    links: &[f32],
    nets: &[f32],
) {
    key.clear();
    key.reserve(3 + previous.len() + links.len() + nets.len());
    key.push(kind);
    key.push(n_channels as u32);
    key.push(n_hops as u32);
    key.extend(previous.iter().map(|&r| r as u32));
    key.extend(links.iter().map(|b| b.to_bits()));
    key.extend(nets.iter().map(|b| b.to_bits()));
}

/// Two summaries as one: more channels wins, then fewer hops.
fn merge(a: Best, b: Best) -> Best {
    match (a, b) {
        (None, x) | (x, None) => x,
        (Some((ka, ha)), Some((kb, hb))) => Some(if ka != kb {
            if ka > kb {
                (ka, ha)
            } else {
                (kb, hb)
            }
        } else {
            (ka, ha.min(hb))
        }),
    }
}

impl ChannelMemo {
    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.open.clear();
    }

    /// The stored subtree at `key`: the budget it takes, its best and the tail it leaves.
    pub(super) fn get(&self, key: &[u32]) -> Option<(i32, Best, &[i32])> {
        self.entries
            .get(key)
            .map(|o| (o.steps, o.best, &o.intra_tail[..]))
    }

    /// A channel set completed (or a skipped subtree's best): counts for every subtree being explored.
    pub(super) fn note(&mut self, best: Best) {
        if let Some(top) = self.open.last_mut() {
            *top = merge(*top, best);
        }
    }

    /// A subtree starts being explored.
    pub(super) fn open(&mut self) {
        self.open.push(None);
    }

    /// The subtree opened last is done: its summary counts for the one around it too.
    pub(super) fn close(&mut self) -> Best {
        let best = self.open.pop().flatten();
        self.note(best);
        best
    }

    /// An empty key buffer (`recycle` it when done).
    pub(super) fn buffer(&mut self) -> Vec<u32> {
        self.buffers.pop().unwrap_or_default()
    }

    pub(super) fn recycle(&mut self, buffer: Vec<u32>) {
        self.buffers.push(buffer);
    }

    pub(super) fn store(&mut self, key: &[u32], steps: i32, best: Best, intra_tail: &[i32]) {
        self.entries.insert(
            key.into(),
            Outcome {
                steps,
                best,
                intra_tail: intra_tail.into(),
            },
        );
    }
}

/// A multiply-rotate hash over the key's words (the keys are the search's own numbers, not an attacker's).
#[derive(Default)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
        for &b in chunks.remainder() {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, word: u32) {
        self.write_u64(word as u64);
    }
    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_keeps_most_channels_then_fewest_hops() {
        assert_eq!(merge(None, None), None);
        assert_eq!(merge(Some((3, 40)), None), Some((3, 40)));
        assert_eq!(merge(Some((3, 40)), Some((4, 90))), Some((4, 90)));
        assert_eq!(merge(Some((4, 90)), Some((4, 80))), Some((4, 80)));
    }

    #[test]
    fn close_passes_the_summary_outwards() {
        let mut memo = ChannelMemo::default();
        memo.open();
        memo.note(Some((2, 10)));
        memo.open();
        memo.note(Some((3, 20)));
        assert_eq!(memo.close(), Some((3, 20)));
        assert_eq!(memo.close(), Some((3, 20)));
        assert!(memo.open.is_empty());
    }
}
