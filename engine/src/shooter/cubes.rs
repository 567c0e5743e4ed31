//! The arena's physics cubes as both sides see them. The server simulates them; every snapshot carries their
//! quantized states; and both sides keep the same [`CubeTrack`] of those states per cube and read poses from it
//! through the same code. A player's movement and shots meet the cubes where that player saw them (the view time
//! of its input, as for lag compensation): the server reads its track at the command's view time, the client at
//! the render time it sends as that view time, so prediction and the server agree on every cube collision and
//! every shot a cube stops.

use std::collections::VecDeque;

use nalgebra::{Point3, Quaternion, UnitQuaternion};
use physync_codec::{BodyState, QuantConfig};

use super::Tick;
use super::input::ViewTime;

/// Where a cube is and how it is turned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CubePose {
    /// Centre, metres.
    pub center: Point3<f32>,
    /// Orientation.
    pub rotation: UnitQuaternion<f32>,
}

impl CubePose {
    /// The pose a quantized state describes.
    pub fn of(quant: &QuantConfig, state: &BodyState) -> Self {
        let p = state.position_f32(quant);
        let r = state.rotation_f32(quant);
        Self {
            center: Point3::new(p[0], p[1], p[2]),
            rotation: UnitQuaternion::from_quaternion(Quaternion::new(r[3], r[0], r[1], r[2])),
        }
    }

    /// An unturned cube at `center`.
    pub fn at(center: Point3<f32>) -> Self {
        Self {
            center,
            rotation: UnitQuaternion::identity(),
        }
    }

    /// The pose `t` of the way from `self` to `to`: the centre along the line, the rotation along the shorter arc.
    pub fn towards(&self, to: &Self, t: f32) -> Self {
        let a = self.rotation.quaternion();
        let mut b = *to.rotation.quaternion();
        if a.coords.dot(&b.coords) < 0.0 {
            b = -b;
        }
        Self {
            center: self.center + (to.center - self.center) * t,
            rotation: UnitQuaternion::from_quaternion(a * (1.0 - t) + b * t),
        }
    }
}

/// The recent quantized states of one cube, by tick: the server pushes every tick's, a client those its
/// snapshots bring.
#[derive(Debug, Clone, PartialEq)]
pub struct CubeTrack {
    /// Each state with its pose, dequantized once on arrival.
    samples: VecDeque<(Tick, BodyState, CubePose)>,
    capacity: usize,
    /// How many neighbouring samples differ: 0 while the cube rests over the whole track.
    changes: usize,
}

impl CubeTrack {
    /// An empty track keeping at most `capacity` states (at least two).
    pub fn new(capacity: usize) -> Self {
        Self {
            samples: VecDeque::with_capacity(capacity.max(2)),
            capacity: capacity.max(2),
            changes: 0,
        }
    }

    /// Adds the state of `tick` (quantized with `quant`); states may come in any order, a repeated tick is
    /// ignored and the oldest state leaves beyond the capacity.
    pub fn push(&mut self, tick: Tick, state: BodyState, quant: &QuantConfig) {
        let index = self.samples.partition_point(|(t, _, _)| *t < tick);
        if self.samples.get(index).is_some_and(|(t, _, _)| *t == tick) {
            return;
        }
        let state_at = |i: usize| self.samples.get(i).map(|(_, s, _)| *s);
        let (before, after) = (index.checked_sub(1).and_then(state_at), state_at(index));
        let differ = |a: Option<BodyState>, b: Option<BodyState>| {
            usize::from(a.is_some() && b.is_some() && a != b)
        };
        self.changes = self.changes + differ(before, Some(state)) + differ(Some(state), after)
            - differ(before, after);
        self.samples
            .insert(index, (tick, state, CubePose::of(quant, &state)));
        while self.samples.len() > self.capacity {
            let first = self.samples.pop_front().map(|(_, s, _)| s);
            self.changes -= differ(first, self.samples.front().map(|(_, s, _)| *s));
        }
    }

    /// The newest state and its tick.
    pub fn latest(&self) -> Option<(Tick, &BodyState)> {
        self.samples.back().map(|(t, s, _)| (*t, s))
    }

    /// The pose at `ticks` (fractional server ticks): between the two states around it, or the nearest state
    /// held where the track does not reach (no extrapolation).
    pub fn pose_at(&self, ticks: f64) -> Option<CubePose> {
        self.pose_at_held(ticks, &|_| true)
    }

    /// [`CubeTrack::pose_at`] over only the states of the ticks `held` accepts: on the server, what a client
    /// that received those snapshots computed.
    pub fn pose_at_held(&self, ticks: f64, held: &dyn Fn(Tick) -> bool) -> Option<CubePose> {
        let next = self
            .samples
            .partition_point(|(t, _, _)| f64::from(*t) <= ticks);
        if self.changes == 0 {
            // A cube resting over the whole track: any held state gives its pose.
            return self
                .samples
                .range(..next)
                .rev()
                .chain(self.samples.range(next..))
                .find(|(t, _, _)| held(*t))
                .map(|(_, _, pose)| *pose);
        }
        let before = self.samples.range(..next).rev().find(|(t, _, _)| held(*t));
        let after = self.samples.range(next..).find(|(t, _, _)| held(*t));
        match (before, after) {
            // A resting cube: nothing to blend.
            (Some((_, a, pose)), Some((_, b, _))) if a == b => Some(*pose),
            (Some((ta, _, a)), Some((tb, _, b))) => {
                let t = ((ticks - f64::from(*ta)) / f64::from(tb - ta)) as f32;
                Some(a.towards(b, t))
            }
            (Some((_, _, only)), None) | (None, Some((_, _, only))) => Some(*only),
            (None, None) => None,
        }
    }

    /// The pose at a view time (what a player saw when it gave an input).
    pub fn pose_at_view(&self, view: ViewTime) -> Option<CubePose> {
        self.pose_at(view.as_ticks())
    }
}

/// Every cube's pose at `view`, from the states of `tracks` that `held(cube, tick)` accepts; a cube with no
/// such state stands at `fallback`'s pose.
pub fn poses_at_view(
    tracks: &[CubeTrack],
    view: ViewTime,
    fallback: &[CubePose],
    held: &dyn Fn(usize, Tick) -> bool,
) -> Vec<CubePose> {
    tracks
        .iter()
        .zip(fallback)
        .enumerate()
        .map(|(k, (track, initial))| {
            track
                .pose_at_held(view.as_ticks(), &|t| held(k, t))
                .unwrap_or(*initial)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(quant: &QuantConfig, x: f32) -> BodyState {
        BodyState::quantize(
            quant,
            [x, 0.5, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [0.0; 3],
            [0.0; 3],
            false,
        )
    }

    #[test]
    fn a_track_with_a_gap_gives_the_same_pose_as_a_full_one_on_a_straight_path() {
        let quant = QuantConfig::default();
        let mut full = CubeTrack::new(32);
        let mut gappy = CubeTrack::new(32);
        for tick in 10..20 {
            let s = state(&quant, tick as f32 * 0.25);
            full.push(tick, s, &quant);
            if tick != 14 {
                gappy.push(tick, s, &quant);
            }
        }
        let view = ViewTime {
            tick: 13,
            fraction: 128,
        };
        let a = full.pose_at_view(view).unwrap();
        let b = gappy.pose_at_view(view).unwrap();
        assert!((a.center - b.center).norm() < 1e-3, "{a:?} {b:?}");
        assert!((a.center.x - 13.5 * 0.25).abs() < 1e-2);
        // Beyond the newest state the newest is held.
        let late = full.pose_at_view(ViewTime::at(40)).unwrap();
        assert!((late.center.x - 19.0 * 0.25).abs() < 1e-2);
    }

    #[test]
    fn a_resting_track_counts_no_changes_and_gives_its_pose_from_any_held_state() {
        let quant = QuantConfig::default();
        let mut track = CubeTrack::new(4);
        for tick in [10, 12, 11, 13] {
            track.push(tick, state(&quant, 1.0), &quant);
        }
        assert_eq!(track.changes, 0);
        let only_13 = track.pose_at_held(10.5, &|t| t == 13).unwrap();
        assert!((only_13.center.x - 1.0).abs() < 1e-3);
        assert_eq!(track.pose_at_held(10.5, &|_| false), None);
        // A move in the middle, then the track forgets it as newer resting states arrive.
        track.push(14, state(&quant, 2.0), &quant);
        assert_eq!(track.changes, 1);
        track.push(15, state(&quant, 2.0), &quant);
        track.push(16, state(&quant, 2.0), &quant);
        assert_eq!(track.changes, 1);
        track.push(17, state(&quant, 2.0), &quant);
        assert_eq!(track.changes, 0);
        // An old state arriving late between two others is counted against both.
        let mut late = CubeTrack::new(8);
        late.push(1, state(&quant, 1.0), &quant);
        late.push(3, state(&quant, 1.0), &quant);
        late.push(2, state(&quant, 3.0), &quant);
        assert_eq!(late.changes, 2);
    }
}
