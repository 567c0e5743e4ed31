//! The neighbour correction of a history prediction: bodies that touch and move alike (a pile shoved together, a
//! row of cubes knocked over by one push) miss their extrapolated positions by about the same amount, so an entry's
//! prediction is moved by the miss of the nearest entry already coded in the same section that moved alike, and its
//! position residual is coded under a context of how large that miss was. A body near one that changed has often
//! been pushed too: its unchanged flag is coded under a context of how near the nearest changed entry lies.
//!
//! Both ends know every earlier entry's prediction, baseline and decoded state by the time they reach an entry,
//! so the correction costs nothing on the wire. It is applied only by streams that code under contexts (the range
//! coder): bit-packed sections are sized from the uncorrected prediction before they are written.

use crate::delta::DeltaState;

/// How far (in position steps, largest axis) an earlier entry's prediction may lie from this one's to lend its
/// miss, and to make this entry's unchanged flag "near a change": on the katamari ladder the misses of bodies
/// further apart no longer agree.
const RADIUS: i64 = 400;

/// Within this distance (in position steps, largest axis) a changed entry is "close" rather than near (see
/// [`Neighbours::nearness`]).
const CLOSE: i64 = 250;

/// How much (in position steps, largest axis) an earlier entry's predicted step may differ from this one's to
/// lend its miss: bodies that were moving differently are not moved by the same push.
const STEP_LIMIT: i64 = 16;

/// How many of the latest entries are searched: bounds the work a hostile section of many changed entries can
/// cause (a datagram carries about 80 on the katamari ladder).
const SEARCHED: usize = 128;

/// Classes of the miss a correction lends (see [`Neighbours::corrected`]): 0 for no correction, then a miss of
/// 0, 1-3, 4-15 and 16 or more steps on its largest axis.
pub(crate) const NEIGHBOUR_CLASSES: usize = 5;

/// An entry coded earlier in the section: where its prediction put it, how far the prediction stepped from its
/// baseline, and by how much the prediction missed the state sent.
#[derive(Debug, Clone, Copy)]
struct Seen {
    at: [i32; 3],
    step: [i32; 3],
    miss: [i32; 3],
}

/// The changed entries of one section coded so far, for [`Neighbours::corrected`] and [`Neighbours::nearness`].
#[derive(Debug)]
pub(crate) struct Neighbours {
    seen: Vec<Seen>,
}

impl Neighbours {
    /// An empty record.
    pub(crate) fn new() -> Self {
        Self { seen: Vec::new() }
    }

    /// The entries searched: the latest [`SEARCHED`].
    fn searched(&self) -> &[Seen] {
        &self.seen[self.seen.len().saturating_sub(SEARCHED)..]
    }

    /// `raw` (the prediction from `base`) moved by the miss of the nearest earlier entry that moved alike, with
    /// the class of that miss (1..NEIGHBOUR_CLASSES); `raw` itself and class 0 when there is none or the type has
    /// no position.
    pub(crate) fn corrected<T: DeltaState>(
        &self,
        config: &T::Config,
        base: &T,
        raw: &T,
    ) -> (T, usize) {
        let Some((at, step)) = placed(base, raw) else {
            return (*raw, 0);
        };
        let mut best: Option<(i64, [i32; 3])> = None;
        for s in self.searched() {
            if chebyshev(&s.step, &step) >= STEP_LIMIT {
                continue;
            }
            let d = chebyshev(&s.at, &at);
            if d < RADIUS && best.is_none_or(|(b, _)| d < b) {
                best = Some((d, s.miss));
            }
        }
        let Some((_, miss)) = best else {
            return (*raw, 0);
        };
        let class = match chebyshev(&miss, &[0; 3]) {
            0 => return (*raw, 1),
            1..=3 => 2,
            4..=15 => 3,
            _ => 4,
        };
        (raw.moved(config, miss), class)
    }

    /// How near the nearest changed entry recorded so far lies to `base`: 0 beyond [`RADIUS`] (or for a type
    /// without a position), 1 within it, 2 within [`CLOSE`] (see [`crate::delta::Surroundings::near`]).
    pub(crate) fn nearness<T: DeltaState>(&self, base: &T) -> usize {
        let Some(p) = base.position() else {
            return 0;
        };
        match self.searched().iter().map(|s| chebyshev(&s.at, &p)).min() {
            Some(d) if d < CLOSE => 2,
            Some(d) if d < RADIUS => 1,
            _ => 0,
        }
    }

    /// Records a changed entry: `state` sent against `raw`, the uncorrected prediction from `base`.
    pub(crate) fn record<T: DeltaState>(&mut self, base: &T, raw: &T, state: &T) {
        let (Some((at, step)), Some(to)) = (placed(base, raw), state.position()) else {
            return;
        };
        self.seen.push(Seen {
            at,
            step,
            miss: difference(&to, &at),
        });
    }
}

/// Where `raw` puts the body and how far that is from `base`, if the type has a position.
fn placed<T: DeltaState>(base: &T, raw: &T) -> Option<([i32; 3], [i32; 3])> {
    let (from, at) = (base.position()?, raw.position()?);
    Some((at, difference(&at, &from)))
}

/// `a - b` per axis, saturated to `i32`.
fn difference(a: &[i32; 3], b: &[i32; 3]) -> [i32; 3] {
    [0, 1, 2].map(|i| {
        (i64::from(a[i]) - i64::from(b[i])).clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32
    })
}

/// The largest per-axis distance between `a` and `b`.
fn chebyshev(a: &[i32; 3], b: &[i32; 3]) -> i64 {
    (0..3)
        .map(|i| (i64::from(a[i]) - i64::from(b[i])).abs())
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::StateConfig;
    use crate::state::{BodyState, ObjectState};

    fn at(position: [i32; 3]) -> ObjectState {
        ObjectState {
            body: BodyState {
                position,
                ..BodyState::default()
            },
            ..ObjectState::default()
        }
    }

    /// Records an entry whose baseline was at `from`, predicted at `to`, sent at `sent`.
    fn seen(n: &mut Neighbours, from: [i32; 3], to: [i32; 3], sent: [i32; 3]) {
        n.record(&at(from), &at(to), &at(sent));
    }

    #[test]
    fn the_nearest_entry_that_moved_alike_lends_its_miss() {
        let config = StateConfig::default();
        let mut n = Neighbours::new();
        // Moved alike (step 40 on x) but 700 steps away: out of reach.
        seen(&mut n, [0, 0, 700], [40, 0, 700], [60, 0, 700]);
        // Next to it but stepping the other way: not pushed by the same thing.
        seen(&mut n, [0, 0, 100], [-40, 0, 100], [-45, 3, 100]);
        // Alike and 200 away: its miss (+7, -2, 0) is lent.
        seen(&mut n, [200, 0, 0], [238, 0, 0], [245, -2, 0]);
        // Alike and 300 away: further than the one above.
        seen(&mut n, [0, 300, 0], [40, 300, 0], [90, 300, 0]);
        let (p, class) = n.corrected(&config, &at([0, 0, 0]), &at([40, 0, 0]));
        assert_eq!(p.body.position, [47, -2, 0]);
        assert_eq!(class, 3);
        // Nothing alike within reach: the prediction stands, class 0.
        let (p, class) = n.corrected(&config, &at([0, 0, 5000]), &at([40, 0, 5000]));
        assert_eq!((p.body.position, class), ([40, 0, 5000], 0));
    }

    #[test]
    fn a_neighbour_that_was_predicted_exactly_is_class_one() {
        let config = StateConfig::default();
        let mut n = Neighbours::new();
        seen(&mut n, [0, 0, 0], [10, 0, 0], [10, 0, 0]);
        let (p, class) = n.corrected(&config, &at([100, 0, 0]), &at([110, 0, 0]));
        assert_eq!((p.body.position, class), ([110, 0, 0], 1));
        seen(&mut n, [0, 50, 0], [10, 50, 0], [30, 50, 0]);
        assert_eq!(n.corrected(&config, &at([0, 60, 0]), &at([10, 60, 0])).1, 4);
    }

    #[test]
    fn extreme_positions_saturate_and_stay_in_bounds() {
        // Hostile decoded states at the ends of i32: the misses saturate and the corrected prediction is clamped
        // into the quantizer's bounds, without overflow (debug builds check).
        let config = StateConfig::default();
        let bounds = &config.quant.position;
        let (lo, hi) = (i32::MIN, i32::MAX);
        let mut n = Neighbours::new();
        seen(&mut n, [hi, hi, hi], [hi, hi, hi], [lo, lo, lo]);
        seen(&mut n, [lo, lo, lo], [lo, lo, lo], [hi, hi, hi]);
        for p in [[hi; 3], [lo; 3]] {
            let (q, class) = n.corrected(&config, &at(p), &at(p));
            assert_eq!(class, 4);
            assert!(bounds.contains(q.body.position));
            assert_eq!(n.nearness(&at(p)), 2);
        }
        let max = bounds.axes.map(|a| a.max_index);
        let mut n = Neighbours::new();
        seen(&mut n, [0; 3], max, [i32::MAX; 3]);
        let (q, _) = n.corrected(&config, &at([0; 3]), &at(max));
        assert_eq!(q.body.position, max);
    }

    #[test]
    fn nearness_grades_the_nearest_changed_entry() {
        let mut n = Neighbours::new();
        assert_eq!(n.nearness(&at([0; 3])), 0);
        seen(&mut n, [0; 3], [0, 0, 10], [0, 0, 12]);
        assert_eq!(n.nearness(&at([0, 200, 0])), 2);
        assert_eq!(n.nearness(&at([0, 300, 0])), 1);
        assert_eq!(n.nearness(&at([0, 700, 0])), 0);
    }

    #[test]
    fn only_the_latest_entries_are_searched() {
        let config = StateConfig::default();
        let mut n = Neighbours::new();
        seen(&mut n, [0; 3], [5, 0, 0], [9, 0, 0]);
        for i in 0..SEARCHED as i32 {
            seen(
                &mut n,
                [10_000 + i, 0, 0],
                [10_005 + i, 0, 0],
                [10_005 + i, 0, 0],
            );
        }
        let (p, class) = n.corrected(&config, &at([0, 10, 0]), &at([5, 10, 0]));
        assert_eq!((p.body.position, class), ([5, 10, 0], 0));
        assert_eq!(n.nearness(&at([0; 3])), 0);
    }
}
