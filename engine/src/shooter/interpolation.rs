//! Interpolation of remote players (seed 001): a history of the positions and view angles received in snapshots,
//! rendered at `latest − delay` (100 ms by default) by interpolating between the two samples around that time.
//! A jump between consecutive samples beyond a threshold (or a death/respawn) is a teleport: the player snaps to
//! the new place instead of sliding across the map.

use std::collections::VecDeque;
use std::time::Duration;

use nalgebra::Point3;

use super::Tick;
use super::units;

/// The default teleport threshold, metres.
pub const TELEPORT_DISTANCE: f32 = 3.0;

/// Interpolation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct InterpolationConfig {
    /// How far behind the newest snapshot remote players are shown (100 ms in seed 001).
    pub delay: Duration,
    /// A move between two consecutive samples longer than this (metres) is a teleport.
    pub teleport_distance: f32,
    /// Samples kept per player.
    pub capacity: usize,
}

impl Default for InterpolationConfig {
    fn default() -> Self {
        Self {
            delay: Duration::from_millis(100),
            teleport_distance: TELEPORT_DISTANCE,
            capacity: 32,
        }
    }
}

/// What a snapshot says about a remote player, in wire units.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RemoteSample {
    /// Feet position in position steps.
    pub position: [i32; 3],
    /// View yaw in steps.
    pub yaw: u16,
    /// View pitch in steps.
    pub pitch: i16,
    /// Alive at that tick.
    pub alive: bool,
}

impl RemoteSample {
    /// The part of a player's state that remote clients render.
    pub fn from_state(state: &super::player::PlayerState) -> Self {
        Self {
            position: state.motion.position,
            yaw: state.motion.yaw,
            pitch: state.motion.pitch,
            alive: state.alive(),
        }
    }
}

/// A remote player's pose to render.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InterpolatedPose {
    /// Feet position, metres.
    pub position: Point3<f32>,
    /// View yaw, radians.
    pub yaw: f32,
    /// View pitch, radians.
    pub pitch: f32,
    /// Alive at the render time.
    pub alive: bool,
    /// The samples around the render time are a teleport apart: this is the destination, not a blend.
    pub snapped: bool,
    /// The render time lay outside the history: the nearest sample is held (no extrapolation).
    pub held: bool,
}

/// One remote player's sample history.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteInterpolator {
    config: InterpolationConfig,
    tick_rate_hz: u32,
    samples: VecDeque<(Tick, RemoteSample)>,
    teleports: u64,
}

impl RemoteInterpolator {
    /// An empty history for a match ticking at `tick_rate_hz`.
    pub fn new(config: InterpolationConfig, tick_rate_hz: u32) -> Self {
        Self {
            samples: VecDeque::with_capacity(config.capacity.max(2)),
            config,
            tick_rate_hz: tick_rate_hz.max(1),
            teleports: 0,
        }
    }

    /// The interpolation delay in ticks.
    pub fn delay_ticks(&self) -> f64 {
        self.config.delay.as_secs_f64() * f64::from(self.tick_rate_hz)
    }

    /// The render time for a client whose newest server time is `latest_ticks` (fractional ticks).
    pub fn render_time(&self, latest_ticks: f64) -> f64 {
        latest_ticks - self.delay_ticks()
    }

    /// Teleports seen between consecutive samples so far.
    pub fn teleports(&self) -> u64 {
        self.teleports
    }

    /// The newest tick held.
    pub fn latest_tick(&self) -> Option<Tick> {
        self.samples.back().map(|(t, _)| *t)
    }

    /// Adds the sample of `tick`. Samples may arrive out of order; a duplicate tick is ignored, and the oldest
    /// sample is dropped beyond the capacity.
    pub fn push(&mut self, tick: Tick, sample: RemoteSample) {
        let index = self.samples.partition_point(|(t, _)| *t < tick);
        if self.samples.get(index).is_some_and(|(t, _)| *t == tick) {
            return;
        }
        if index == self.samples.len()
            && let Some((_, previous)) = self.samples.back()
            && self.is_teleport(previous, &sample)
        {
            self.teleports += 1;
        }
        self.samples.insert(index, (tick, sample));
        while self.samples.len() > self.config.capacity.max(2) {
            self.samples.pop_front();
        }
    }

    fn is_teleport(&self, a: &RemoteSample, b: &RemoteSample) -> bool {
        let distance = (units::dequantize_position(b.position)
            - units::dequantize_position(a.position))
        .norm();
        a.alive != b.alive || distance > self.config.teleport_distance
    }

    /// The pose at `render_ticks` (fractional server ticks), or `None` before any sample arrived.
    pub fn sample_at(&self, render_ticks: f64) -> Option<InterpolatedPose> {
        let (first_tick, first) = self.samples.front()?;
        let (last_tick, last) = self.samples.back()?;
        if render_ticks <= f64::from(*first_tick) {
            return Some(pose_of(first, render_ticks < f64::from(*first_tick), false));
        }
        if render_ticks >= f64::from(*last_tick) {
            return Some(pose_of(last, render_ticks > f64::from(*last_tick), false));
        }
        let next = self
            .samples
            .partition_point(|(t, _)| f64::from(*t) <= render_ticks);
        let (ta, a) = &self.samples[next - 1];
        let (tb, b) = &self.samples[next];
        Some(blend(
            (*ta, a),
            (*tb, b),
            render_ticks,
            self.config.teleport_distance,
        ))
    }
}

/// The pose at `render_ticks` between sample `a` (at or before it) and sample `b` (after it): a teleport
/// between them snaps to `b`, anything else is interpolated. The client renders remote players through this and
/// the server rewinds them through it, from the same samples, so both put a hitbox at the same place.
pub fn blend(
    (ta, a): (Tick, &RemoteSample),
    (tb, b): (Tick, &RemoteSample),
    render_ticks: f64,
    teleport_distance: f32,
) -> InterpolatedPose {
    let distance =
        (units::dequantize_position(b.position) - units::dequantize_position(a.position)).norm();
    if a.alive != b.alive || distance > teleport_distance {
        return pose_of(b, false, true);
    }
    let t = ((render_ticks - f64::from(ta)) / f64::from(tb - ta)) as f32;
    let pa = units::dequantize_position(a.position);
    let pb = units::dequantize_position(b.position);
    let yaw_delta = f32::from(b.yaw.wrapping_sub(a.yaw) as i16);
    let yaw = units::yaw_radians(a.yaw)
        + yaw_delta * t * std::f32::consts::TAU / units::YAW_STEPS_PER_TURN;
    let pitch = units::pitch_radians(a.pitch)
        + (units::pitch_radians(b.pitch) - units::pitch_radians(a.pitch)) * t;
    InterpolatedPose {
        position: pa + (pb - pa) * t,
        yaw: yaw.rem_euclid(std::f32::consts::TAU),
        pitch,
        alive: a.alive,
        snapped: false,
        held: false,
    }
}

/// The pose of one sample, as held (`held`) or snapped to (`snapped`).
pub fn pose_of(sample: &RemoteSample, held: bool, snapped: bool) -> InterpolatedPose {
    InterpolatedPose {
        position: units::dequantize_position(sample.position),
        yaw: units::yaw_radians(sample.yaw),
        pitch: units::pitch_radians(sample.pitch),
        alive: sample.alive,
        snapped,
        held,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(x_m: f32, yaw: u16) -> RemoteSample {
        RemoteSample {
            position: units::quantize_position(&Point3::new(x_m, 0.0, 0.0)),
            yaw,
            pitch: 0,
            alive: true,
        }
    }

    #[test]
    fn renders_100_ms_behind_and_interpolates_between_snapshots() {
        let mut interp = RemoteInterpolator::new(InterpolationConfig::default(), 30);
        assert_eq!(interp.sample_at(5.0), None);
        for tick in 0..=10u32 {
            interp.push(tick, sample(tick as f32 * 0.2, 0));
        }
        assert!((interp.delay_ticks() - 3.0).abs() < 1e-9);
        let render = interp.render_time(10.0);
        let pose = interp.sample_at(render).unwrap();
        assert!((pose.position.x - 1.4).abs() < 2e-3, "{pose:?}");
        let between = interp.sample_at(6.25).unwrap();
        assert!((between.position.x - 1.25).abs() < 2e-3);
        assert!(!between.snapped && !between.held);
        let starved = interp.sample_at(12.0).unwrap();
        assert!(starved.held);
        assert!(
            (starved.position.x - 2.0).abs() < 2e-3,
            "holds the newest sample"
        );
    }

    #[test]
    fn lost_and_reordered_snapshots_still_interpolate() {
        let mut interp = RemoteInterpolator::new(InterpolationConfig::default(), 30);
        interp.push(0, sample(0.0, 0));
        interp.push(4, sample(0.8, 0));
        interp.push(2, sample(0.4, 0));
        interp.push(2, sample(9.0, 0));
        let pose = interp.sample_at(3.0).unwrap();
        assert!((pose.position.x - 0.6).abs() < 2e-3, "{pose:?}");
        assert_eq!(interp.teleports(), 0);
    }

    #[test]
    fn yaw_takes_the_short_way_round() {
        let mut interp = RemoteInterpolator::new(InterpolationConfig::default(), 30);
        interp.push(0, sample(0.0, 65_000));
        interp.push(1, sample(0.0, 500));
        let pose = interp.sample_at(0.5).unwrap();
        // 65 000 to 500 is 1036 steps forward through the wrap; halfway is 65 518.
        let expected = units::yaw_radians(65_518);
        assert!(
            (pose.yaw - expected).abs() < 1e-3,
            "{} vs {}",
            pose.yaw,
            expected
        );
    }

    #[test]
    fn a_teleport_snaps_instead_of_sliding() {
        let mut interp = RemoteInterpolator::new(InterpolationConfig::default(), 30);
        interp.push(0, sample(0.0, 0));
        interp.push(1, sample(0.2, 0));
        interp.push(2, sample(15.0, 0));
        interp.push(3, sample(15.2, 0));
        assert_eq!(interp.teleports(), 1);
        let across = interp.sample_at(1.5).unwrap();
        assert!(across.snapped);
        assert!((across.position.x - 15.0).abs() < 2e-3, "{across:?}");
        let after = interp.sample_at(2.5).unwrap();
        assert!(!after.snapped && (after.position.x - 15.1).abs() < 2e-3);
        let before = interp.sample_at(0.5).unwrap();
        assert!(!before.snapped && (before.position.x - 0.1).abs() < 2e-3);

        let mut respawn = RemoteInterpolator::new(InterpolationConfig::default(), 30);
        respawn.push(
            0,
            RemoteSample {
                alive: false,
                ..sample(0.0, 0)
            },
        );
        respawn.push(1, sample(1.0, 0));
        assert!(
            respawn.sample_at(0.5).unwrap().snapped,
            "dead to alive is a teleport"
        );
    }
}
