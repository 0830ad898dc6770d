//! A verify result's NCCL rows -> one pick per measured size.
//!
//! At each size, NCCL's own choice is the pair its free-choice (`auto`) row ran (`nccl_choice`), else the stock
//! model's pick. Its time is the lower of the `auto` row's median and the median of the row pinned to that pair:
//! both measure the same thing, and taking the lower one makes a switch harder, never easier. The challenger is the
//! pinned row with the lowest median. The challenger replaces NCCL's choice only when both hold:
//!
//! 1. it is faster by more than the margin: (NCCL - challenger) / NCCL x 100 > margin;
//! 2. its repeats do not overlap NCCL's: its slowest repeat is faster than the fastest repeat of NCCL's choice (in
//!    the `auto` row and the pinned row). With 5 repeats each, two rows of one distribution separate this way by
//!    chance in 2 of 252 orderings, so noise alone rarely flips a pick.
//!
//! Rows that did not run (`status` other than ok), have no repeats, or computed wrong results are not used.

use super::{Decision, Reason};
use crate::measure::{Backend, Row, RowStatus};
use crate::model::{Coll, Pair};
use crate::predict::Predictor;
use std::collections::BTreeMap;

/// Every repeat of one (pair or auto, size), pooled over duplicate rows.
#[derive(Debug, Default, Clone)]
struct Times {
    repeats_us: Vec<f64>,
}

impl Times {
    fn median(&self) -> Option<f64> {
        crate::measure::median(&self.repeats_us)
    }
    fn fastest(&self) -> Option<f64> {
        self.repeats_us.iter().copied().reduce(f64::min)
    }
    fn slowest(&self) -> Option<f64> {
        self.repeats_us.iter().copied().reduce(f64::max)
    }
}

/// What the NCCL rows hold at one size.
#[derive(Debug, Default)]
struct AtSize {
    auto: Option<Times>,
    /// The pair NCCL ran in the free-choice row (first row that says).
    auto_choice: Option<Pair>,
    pinned: BTreeMap<Pair, Times>,
}

fn usable(row: &Row) -> bool {
    row.backend == Backend::Nccl
        && row.status == RowStatus::Ok
        && !row.times_us.is_empty()
        && row.times_us.iter().all(|t| t.is_finite() && *t >= 0.0)
        && row.wrong.unwrap_or(0) == 0
}

/// Decisions for every size that has at least one usable pinned NCCL row, in size order. `stock` gives NCCL's choice
/// where the `auto` row does not say, and every `predicted_us`. Also returns notes for stderr.
pub(crate) fn decide(
    coll: Coll,
    rows: &[Row],
    stock: &dyn Predictor,
    margin_percent: f64,
) -> (Vec<Decision>, Vec<String>) {
    let mut sizes: BTreeMap<u64, AtSize> = BTreeMap::new();
    let mut unusable = 0usize;
    // NCCL's own rows only: pinned pairs and the plain `auto` row (not the `tuned` or `symm` rows, which measure
    // another configuration of NCCL).
    for row in rows
        .iter()
        .filter(|r| r.backend == Backend::Nccl && (r.pair.is_some() || r.is_auto()))
    {
        if !usable(row) {
            unusable += 1;
            continue;
        }
        let at = sizes.entry(row.bytes).or_default();
        match row.pair {
            Some(pair) => at
                .pinned
                .entry(pair)
                .or_default()
                .repeats_us
                .extend(&row.times_us),
            None => {
                at.auto
                    .get_or_insert_with(Times::default)
                    .repeats_us
                    .extend(&row.times_us);
                if at.auto_choice.is_none() {
                    at.auto_choice = row.nccl_choice.map(|c| c.pair);
                }
            }
        }
    }
    let mut notes = Vec::new();
    if unusable > 0 {
        notes.push(format!(
            "{unusable} NCCL row(s) not used (not run, failed, no repeats, or wrong results)"
        ));
    }
    let mut decisions = Vec::new();
    for (bytes, at) in &sizes {
        match decide_size(coll, *bytes, at, stock, margin_percent) {
            Some(d) => decisions.push(d),
            None => notes.push(format!(
                "{} B: no pinned NCCL row was measured; the neighbouring sizes' bands cover it",
                bytes
            )),
        }
    }
    (decisions, notes)
}

fn decide_size(
    coll: Coll,
    bytes: u64,
    at: &AtSize,
    stock: &dyn Predictor,
    margin_percent: f64,
) -> Option<Decision> {
    // The challenger: the pinned pair with the lowest median (ties: the first in pair order).
    let (best, best_times, best_us) = at
        .pinned
        .iter()
        .filter_map(|(pair, times)| Some((*pair, times, times.median()?)))
        .min_by(|a, b| a.2.total_cmp(&b.2))?;
    let (nccl, nccl_from) = match at.auto_choice {
        Some(pair) => (Some(pair), Some("auto row")),
        None => match stock.pick(coll, bytes) {
            Some(pair) => (Some(pair), Some("stock model")),
            None => (None, None),
        },
    };
    let predicted = |pair: Pair| stock.predict_us(coll, pair, bytes);
    let measured = |pair: Pair| at.pinned.get(&pair).and_then(Times::median);
    let mut decision = Decision {
        coll,
        bytes,
        nccl,
        nccl_from,
        nccl_us: None,
        best: Some(best),
        best_us: Some(best_us),
        gain_percent: None,
        pick: best,
        reason: Reason::Faster,
        measured_us: Some(best_us),
        predicted_us: predicted(best),
    };
    let Some(nccl) = nccl else {
        decision.reason = Reason::NcclChoiceUnknown;
        return Some(decision);
    };
    // NCCL's choice, as measured in the auto row (when it ran that pair) and in the row pinned to it.
    let mut nccl_rows: Vec<&Times> = Vec::new();
    if at.auto_choice == Some(nccl) {
        nccl_rows.extend(at.auto.as_ref());
    }
    nccl_rows.extend(at.pinned.get(&nccl));
    let nccl_us = nccl_rows.iter().filter_map(|t| t.median()).reduce(f64::min);
    let nccl_fastest = nccl_rows
        .iter()
        .filter_map(|t| t.fastest())
        .reduce(f64::min);
    decision.nccl_us = nccl_us;
    decision.pick = nccl;
    decision.measured_us = measured(nccl).or(nccl_us);
    decision.predicted_us = predicted(nccl);
    let (Some(nccl_us), Some(nccl_fastest)) = (nccl_us, nccl_fastest) else {
        decision.reason = Reason::NcclChoiceUnmeasured;
        return Some(decision);
    };
    if best == nccl {
        decision.gain_percent = Some(0.0);
        decision.reason = Reason::NcclIsBest;
        return Some(decision);
    }
    let gain = if nccl_us > 0.0 {
        (nccl_us - best_us) / nccl_us * 100.0
    } else {
        0.0
    };
    decision.gain_percent = Some(gain);
    if gain <= margin_percent {
        decision.reason = Reason::WithinMargin;
    } else if best_times.slowest().is_none_or(|s| s >= nccl_fastest) {
        decision.reason = Reason::RepeatsOverlap;
    } else {
        decision.pick = best;
        decision.measured_us = Some(best_us);
        decision.predicted_us = predicted(best);
        decision.reason = Reason::Faster;
    }
    Some(decision)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::NcclChoice;
    use crate::model::{Algo, AnyAlgo, Proto};
    use crate::predict::NoModel;

    const RING_LL: Pair = Pair {
        algo: AnyAlgo::Nccl(Algo::Ring),
        proto: Proto::Ll,
    };
    const RING_SIMPLE: Pair = Pair {
        algo: AnyAlgo::Nccl(Algo::Ring),
        proto: Proto::Simple,
    };
    const TREE_LL: Pair = Pair {
        algo: AnyAlgo::Nccl(Algo::Tree),
        proto: Proto::Ll,
    };

    fn row(pair: Option<Pair>, bytes: u64, times: &[f64]) -> Row {
        let mut r = Row::empty(Backend::Nccl, pair, bytes, RowStatus::Ok);
        r.times_us = times.to_vec();
        r.repeats = times.len() as u32;
        r.derive_stats();
        r
    }

    fn auto(bytes: u64, choice: Pair, times: &[f64]) -> Row {
        let mut r = row(None, bytes, times);
        r.nccl_choice = Some(NcclChoice {
            pair: choice,
            channel_lo: 0,
            channel_hi: 1,
        });
        r
    }

    /// A stock model that always picks `pair` and predicts 1 µs per KiB.
    struct Always(Pair);
    impl Predictor for Always {
        fn label(&self) -> String {
            "test".into()
        }
        fn predict_us(&self, _: Coll, _: Pair, bytes: u64) -> Option<f64> {
            Some(bytes as f64 / 1024.0)
        }
        fn pick(&self, _: Coll, _: u64) -> Option<Pair> {
            Some(self.0)
        }
    }

    #[test]
    fn a_clear_win_beyond_margin_and_spread_switches() {
        // NCCL: Ring/Simple, medians 28.5 (auto) and 28.3 (pinned) -> 28.3; Ring/LL 22.1 -> gain 21.9 %
        let rows = [
            auto(2 << 20, RING_SIMPLE, &[28.4, 28.5, 28.6]),
            row(Some(RING_SIMPLE), 2 << 20, &[28.2, 28.3, 28.9]),
            row(Some(RING_LL), 2 << 20, &[22.0, 22.1, 22.2]),
        ];
        let (d, notes) = decide(Coll::AllReduce, &rows, &NoModel, 5.0);
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].pick, RING_LL);
        assert_eq!(d[0].reason, Reason::Faster);
        assert_eq!(d[0].nccl, Some(RING_SIMPLE));
        assert_eq!(d[0].nccl_us, Some(28.3));
        let gain = d[0].gain_percent.unwrap();
        assert!((gain - (28.3 - 22.1) / 28.3 * 100.0).abs() < 1e-9, "{gain}");
        assert_eq!(d[0].measured_us, Some(22.1));
    }

    #[test]
    fn a_gain_within_the_margin_keeps_nccls_choice() {
        // 10.0 vs 9.6: 4 % faster, repeats apart, but the margin is 5 %
        let rows = [
            auto(4096, RING_LL, &[10.0, 10.0, 10.1]),
            row(Some(RING_LL), 4096, &[10.0, 10.1, 10.2]),
            row(Some(TREE_LL), 4096, &[9.5, 9.6, 9.7]),
        ];
        let (d, _) = decide(Coll::AllReduce, &rows, &NoModel, 5.0);
        assert_eq!(d[0].pick, RING_LL);
        assert_eq!(d[0].reason, Reason::WithinMargin);
        assert_eq!(d[0].measured_us, Some(10.1));
        // with a 3 % margin the same data switches
        let (d, _) = decide(Coll::AllReduce, &rows, &NoModel, 3.0);
        assert_eq!(d[0].pick, TREE_LL);
    }

    #[test]
    fn overlapping_repeats_keep_nccls_choice_despite_the_gain() {
        // medians 12.0 vs 10.5 (12.5 % faster), but Tree/LL's slowest repeat (13.0) is slower than NCCL's fastest (11.0)
        let rows = [
            auto(512, RING_LL, &[11.0, 12.0, 12.5]),
            row(Some(RING_LL), 512, &[11.8, 12.0, 12.1]),
            row(Some(TREE_LL), 512, &[10.0, 10.5, 13.0]),
        ];
        let (d, _) = decide(Coll::AllReduce, &rows, &NoModel, 5.0);
        assert_eq!(d[0].pick, RING_LL);
        assert_eq!(d[0].reason, Reason::RepeatsOverlap);
    }

    #[test]
    fn without_an_auto_row_the_stock_models_pick_is_nccls_choice() {
        let rows = [
            row(Some(RING_LL), 64, &[10.0, 10.0]),
            row(Some(TREE_LL), 64, &[10.1, 10.2]),
        ];
        let (d, _) = decide(Coll::AllReduce, &rows, &Always(TREE_LL), 5.0);
        assert_eq!(d[0].nccl, Some(TREE_LL));
        assert_eq!(d[0].nccl_from, Some("stock model"));
        assert_eq!(d[0].pick, TREE_LL, "1 % is within the margin");
        assert_eq!(d[0].predicted_us, Some(64.0 / 1024.0));
        // no model and no auto row: the measured best, said so
        let (d, _) = decide(Coll::AllReduce, &rows, &NoModel, 5.0);
        assert_eq!(d[0].pick, RING_LL);
        assert_eq!(d[0].reason, Reason::NcclChoiceUnknown);
    }

    #[test]
    fn failed_wrong_and_native_rows_are_not_used() {
        let mut wrong = row(Some(TREE_LL), 1024, &[1.0, 1.0]);
        wrong.wrong = Some(3);
        let mut failed = row(Some(RING_SIMPLE), 1024, &[]);
        failed.status = RowStatus::Failed;
        let mut native = row(Some(RING_SIMPLE), 1024, &[0.5, 0.5]);
        native.backend = Backend::Native;
        let rows = [
            auto(1024, RING_LL, &[10.0, 10.0]),
            row(Some(RING_LL), 1024, &[10.0, 10.0]),
            wrong,
            failed,
            native,
        ];
        let (d, notes) = decide(Coll::AllReduce, &rows, &NoModel, 5.0);
        assert_eq!(d[0].pick, RING_LL);
        assert_eq!(d[0].reason, Reason::NcclIsBest);
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("2 NCCL row(s) not used"), "{notes:?}");
    }

    #[test]
    fn a_size_with_only_the_auto_row_is_left_to_its_neighbours() {
        let rows = [auto(8, RING_LL, &[10.0]), row(Some(RING_LL), 16, &[10.0])];
        let (d, notes) = decide(Coll::AllReduce, &rows, &NoModel, 5.0);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].bytes, 16);
        assert!(notes[0].starts_with("8 B: no pinned NCCL row"), "{notes:?}");
    }
}
