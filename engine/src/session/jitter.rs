//! Remote frames played back through a jitter buffer: everything a state packet carried, the avatars and the
//! object updates sent beside them, is placed on the sender's timeline (its frame clock; each avatar minus its
//! sample-time offset), mapped to local time by the smallest delay seen recently, and played a fixed delay late
//! (100 ms by default; an adaptive buffer waits only as long as the link's measured jitter needs, up to that) on
//! the receiver's clock. Avatars are interpolated between the samples around the play
//! time; object updates come out when the play time reaches the frame that carried them. Both share one play
//! time, so a hand and the object it holds, or has just let go, never disagree: a released object's first free
//! update is applied on the frame its hand opens, not a jitter delay before.

use std::collections::VecDeque;
use std::time::Duration;

use nalgebra::{Isometry3, Translation3};
use physync_codec::{AvatarState, ObjectState, QuantConfig};

use super::playout::{ArrivalSpread, SPREAD_MEMORY};
use crate::link::TimedAvatar;
use crate::world::avatar::MAX_PLAYERS;
use crate::world::convert::{pose_from_quantized, pose_to_quantized};

/// The sample's default play-out delay.
pub const DEFAULT_JITTER_DELAY: Duration = Duration::from_millis(100);

/// How long the smallest observed delay is remembered; older observations expire so the mapping follows drift.
const DELAY_MEMORY: Duration = SPREAD_MEMORY;

/// What an adaptive buffer waits beyond the measured spread of arrivals, in sender frames: a packet is played at
/// the first step after it is due. Measured with `peer_feel --jitter-ms 25` on seeds 30-69 (with the fifteenth
/// session's spread window): one frame settled contests sooner than two (p95 at most 383.1 against 423.4 ms) and
/// showed fewer backsteps (sync figure within 10 mm on 39 seeds against 32).
const ADAPTIVE_MARGIN_FRAMES: f64 = 1.0;

/// The most play time slows down (a share of real time) when the delay mapping grows, as it does when the
/// fastest delay seen expires from its window: jumping back would make the receiver's simulation run ahead of
/// the updates it then plays, and every object it extrapolated from them would step back. It is also the most
/// play time speeds up when a faster packet shrinks the mapping by less than the play-out delay: jumping forward
/// would play two of a sender's frames in one step, and every remote object would take a double step.
const MAX_SLOWDOWN: f64 = 0.1;

/// Where in a sender frame the play time stands (a share of the frame past the frame's own time): the middle,
/// as far as can be from the frame's edges, so that a step's clock jitter never plays two frames or none.
const PLAY_PHASE: f64 = 0.5;

/// How far (in sender frames) the delay mapping may move, either way, from where the play time is heading before
/// the play time follows it. Less than a frame of drift is the fastest delay seen wobbling as packets expire from
/// its window; following it would, now and then, play no frame in one step and two in the next.
const PLAY_SLACK_FRAMES: f64 = 0.75;

/// How many steps ahead [`FrameJitterBuffer::upcoming_objects`] looks for an object's next update: the play-out
/// delay (100 ms, 6 steps at 60 Hz) and then some, so an update lost or left out of a packet is bridged by the
/// next one queued.
pub const MAX_LEAD_STEPS: u32 = 8;

/// An object update queued in a [`FrameJitterBuffer`] and the number of steps until it plays
/// ([`FrameJitterBuffer::upcoming_objects`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Upcoming {
    /// The object.
    pub id: u16,
    /// Its state once the update has played.
    pub state: ObjectState,
    /// Steps from the coming one (1) to the one that plays it.
    pub steps: u32,
}

/// The play time a [`FrameJitterBuffer`] last handed out, and where it is heading.
#[derive(Debug, Clone, Copy)]
struct PlayClock {
    /// When it was handed out (local time).
    at: Duration,
    /// The sender time played then (seconds).
    play: f64,
    /// While it moves to a new mapping: local minus sender time (seconds) once there.
    heading: Option<f64>,
}

/// Samples kept per player (a little over a second at 60 Hz).
const SAMPLES_PER_PLAYER: usize = 80;

/// Object updates held at most; beyond it the oldest are played at once (a receiver that stopped stepping).
const MAX_QUEUED_OBJECTS: usize = 65_536;

/// Maps a remote sender's frame numbers (the low 16 bits the packets carry) to its clock, and its clock to ours.
#[derive(Debug, Clone)]
pub struct SenderClock {
    step_hz: u32,
    newest_frame: Option<u64>,
    /// (local arrival, arrival minus sender time in seconds), the window the smallest delay is taken from.
    delays: VecDeque<(Duration, f64)>,
}

impl SenderClock {
    /// A clock for a sender stepping `step_hz` frames per second.
    pub fn new(step_hz: u32) -> Self {
        Self {
            step_hz: step_hz.max(1),
            newest_frame: None,
            delays: VecDeque::new(),
        }
    }

    /// Widens a 16-bit frame to the sender's full frame count, by its distance from the newest frame seen.
    pub fn unwrap_frame(&self, frame: u16) -> u64 {
        match self.newest_frame {
            None => u64::from(frame),
            Some(newest) => {
                let diff = i64::from(frame.wrapping_sub(newest as u16) as i16);
                (newest as i64 + diff).max(0) as u64
            }
        }
    }

    /// Notes that a packet stamped `frame` arrived at `now`; returns the sender's time of that frame (seconds).
    pub fn observe(&mut self, now: Duration, frame: u16) -> f64 {
        let full = self.unwrap_frame(frame);
        if self.newest_frame.is_none_or(|n| full > n) {
            self.newest_frame = Some(full);
        }
        let sender_time = full as f64 / f64::from(self.step_hz);
        let delay = now.as_secs_f64() - sender_time;
        while self
            .delays
            .front()
            .is_some_and(|&(at, _)| now.saturating_sub(at) > DELAY_MEMORY)
        {
            self.delays.pop_front();
        }
        while self.delays.back().is_some_and(|&(_, d)| d >= delay) {
            self.delays.pop_back();
        }
        self.delays.push_back((now, delay));
        sender_time
    }

    /// The length of one of the sender's frames (seconds).
    pub fn frame_seconds(&self) -> f64 {
        1.0 / f64::from(self.step_hz)
    }

    /// The smallest delay seen recently: local time minus sender time for the fastest packet (seconds).
    pub fn delay(&self) -> Option<f64> {
        self.delays.front().map(|&(_, d)| d)
    }
}

/// The jitter buffer for every remote frame arriving over one link: avatars and object updates.
#[derive(Debug, Clone)]
pub struct FrameJitterBuffer {
    /// The play-out delay; for an adaptive buffer, the longest.
    delay: Duration,
    /// Set for a buffer whose delay follows the link's measured jitter.
    spread: Option<ArrivalSpread>,
    clock: SenderClock,
    quant: QuantConfig,
    /// Per player: (sender time in seconds, state), oldest first.
    samples: [VecDeque<(f64, AvatarState)>; MAX_PLAYERS],
    /// Object updates: (sender time in seconds, id, state), oldest first.
    objects: VecDeque<(f64, u16, ObjectState)>,
    /// The last play time handed out.
    played: Option<PlayClock>,
}

impl FrameJitterBuffer {
    /// A buffer playing `delay` behind the fastest arrival, for a sender stepping at `step_hz`.
    pub fn new(delay: Duration, step_hz: u32, quant: QuantConfig) -> Self {
        Self {
            delay,
            spread: None,
            clock: SenderClock::new(step_hz),
            quant,
            samples: std::array::from_fn(|_| VecDeque::new()),
            objects: VecDeque::new(),
            played: None,
        }
    }

    /// A buffer that plays behind the fastest arrival by the spread of the link's recent arrival delays (98% of
    /// them) plus one frame, and never by more than `max_delay` (played until three quarters of a second of
    /// arrivals is measured): on a steady link remote frames show sooner than a fixed delay sized for a jittery
    /// one.
    pub fn adaptive(max_delay: Duration, step_hz: u32, quant: QuantConfig) -> Self {
        Self {
            spread: Some(ArrivalSpread::new(max_delay)),
            ..Self::new(max_delay, step_hz, quant)
        }
    }

    /// [`FrameJitterBuffer::adaptive`] when `adaptive`, else [`FrameJitterBuffer::new`]: what a peer's
    /// configuration asks for.
    pub fn configured(delay: Duration, adaptive: bool, step_hz: u32, quant: QuantConfig) -> Self {
        if adaptive {
            Self::adaptive(delay, step_hz, quant)
        } else {
            Self::new(delay, step_hz, quant)
        }
    }

    /// The play-out delay now: the fixed one, or what the measured jitter needs.
    pub fn delay(&self) -> Duration {
        Duration::from_secs_f64(self.delay_seconds())
    }

    fn delay_seconds(&self) -> f64 {
        let longest = self.delay.as_secs_f64();
        match self.spread.as_ref().and_then(ArrivalSpread::spread) {
            Some(spread) => {
                (spread + ADAPTIVE_MARGIN_FRAMES * self.clock.frame_seconds()).min(longest)
            }
            None => longest,
        }
    }

    /// Notes when a packet of sender time `packet_time` arrived (after [`SenderClock::observe`], which keeps the
    /// fastest delay), for an adaptive delay.
    fn measure(&mut self, now: Duration, packet_time: f64) {
        if let (Some(spread), Some(fastest)) = (&mut self.spread, self.clock.delay()) {
            spread.observe(now, packet_time, fastest);
        }
    }

    /// Adds one packet stamped with the sender's `frame`, arrived at `now`: its avatars and its object updates.
    pub fn push(
        &mut self,
        now: Duration,
        frame: u16,
        avatars: &[TimedAvatar],
        objects: &[(u16, ObjectState)],
    ) {
        let packet_time = self.clock.observe(now, frame);
        self.measure(now, packet_time);
        self.push_avatars(packet_time, avatars);
        self.queue_objects(packet_time, objects);
    }

    /// Puts each avatar sample in its slot on the sender's timeline: the datagram's time minus its offset.
    fn push_avatars(&mut self, packet_time: f64, avatars: &[TimedAvatar]) {
        for avatar in avatars {
            let Some(queue) = self.samples.get_mut(usize::from(avatar.state.player)) else {
                continue;
            };
            let t = packet_time - avatar.sample_offset().as_secs_f64();
            let at = queue.partition_point(|&(s, _)| s <= t);
            if at > 0 && queue[at - 1].0 == t {
                queue[at - 1].1 = avatar.state;
                continue;
            }
            queue.insert(at, (t, avatar.state));
            if queue.len() > SAMPLES_PER_PLAYER {
                queue.pop_front();
            }
        }
    }

    /// Adds what a datagram overtaken on the way carried ([`crate::link::Overtaken`]), stamped with its own
    /// `frame`: each avatar sample goes into its slot, and each object update the play time has not passed
    /// goes into its slot too, played before the newer update of the same object that overtook it. One the play
    /// time has passed is dropped: a newer state of that object is already in the world.
    pub fn push_overtaken(
        &mut self,
        now: Duration,
        frame: u16,
        avatars: &[TimedAvatar],
        objects: &[(u16, ObjectState)],
    ) {
        let played = self.played.map(|p| p.play);
        let packet_time = self.clock.observe(now, frame);
        self.measure(now, packet_time);
        self.push_avatars(packet_time, avatars);
        if played.is_none_or(|play| packet_time > play) {
            self.queue_objects(packet_time, objects);
        }
    }

    /// Puts object updates in their slot on the sender's timeline, after the updates already there for the same
    /// time; an update for an object already queued at that time (the same datagram again) replaces it.
    fn queue_objects(&mut self, packet_time: f64, objects: &[(u16, ObjectState)]) {
        for &(id, state) in objects {
            let at = self.objects.partition_point(|&(t, _, _)| t < packet_time);
            let end = self.objects.partition_point(|&(t, _, _)| t <= packet_time);
            match self.objects.range(at..end).position(|&(_, i, _)| i == id) {
                Some(k) => self.objects[at + k].2 = state,
                None => self.objects.insert(end, (packet_time, id, state)),
            }
        }
    }

    /// Forgets a player's avatar (it left).
    pub fn remove(&mut self, player: u8) {
        if let Some(q) = self.samples.get_mut(usize::from(player)) {
            q.clear();
        }
    }

    /// Players with samples.
    pub fn players(&self) -> impl Iterator<Item = u8> + '_ {
        (0..MAX_PLAYERS as u8).filter(|&p| !self.samples[usize::from(p)].is_empty())
    }

    /// The sender time being played at local time `now`, once anything arrived: `now` minus the play-out
    /// delay and the smallest delay seen recently, with the play time placed [`PLAY_PHASE`] into a sender frame
    /// so that steps a frame apart each play exactly one of the sender's frames. It runs at real time while that
    /// mapping stays within [`PLAY_SLACK_FRAMES`] of where it is heading; beyond, it heads for the mapping
    /// (placed in its frame the same way) at no less than [`MAX_SLOWDOWN`] under real time when the mapping
    /// grew, and at no more than it over real time when it shrank, unless by more than the play-out delay (then
    /// the new mapping is taken at once: updates skipped forward are applied together, the newest last).
    fn play_time(&mut self, now: Duration) -> Option<f64> {
        let clock = self.play_clock_at(now)?;
        self.played = Some(clock);
        Some(clock.play)
    }

    /// The play time [`FrameJitterBuffer::play_time`] would hand out at `now` if nothing else arrived first.
    fn play_time_at(&self, now: Duration) -> Option<f64> {
        self.play_clock_at(now).map(|c| c.play)
    }

    /// The play time at `now` and where it is heading, from the last one handed out (see
    /// [`FrameJitterBuffer::play_time`]); a clock read out of order runs at real time.
    fn play_clock_at(&self, now: Duration) -> Option<PlayClock> {
        let delay = self.clock.delay()?;
        let playout = self.delay_seconds();
        let target = now.as_secs_f64() - playout - delay;
        let frame = self.clock.frame_seconds();
        let placed = |t: f64| ((t / frame - PLAY_PHASE).round() + PLAY_PHASE) * frame;
        let Some(last) = self.played else {
            return Some(PlayClock {
                at: now,
                play: placed(target),
                heading: None,
            });
        };
        let elapsed = now.as_secs_f64() - last.at.as_secs_f64();
        let steady = last.play + elapsed;
        if elapsed <= 0.0 {
            return Some(PlayClock {
                at: now,
                play: steady,
                ..last
            });
        }
        let now_s = now.as_secs_f64();
        let heading = last.heading.map_or(steady, |offset| now_s - offset);
        let goal = if (target - heading).abs() <= PLAY_SLACK_FRAMES * frame {
            heading
        } else {
            placed(target)
        };
        let play = if goal - steady > playout {
            goal
        } else if goal > steady {
            goal.min(last.play + elapsed * (1.0 + MAX_SLOWDOWN))
        } else {
            goal.max(last.play + elapsed * (1.0 - MAX_SLOWDOWN))
        };
        Some(PlayClock {
            at: now,
            play,
            heading: (play != goal).then_some(now_s - goal),
        })
    }

    /// The avatar of `player` to show at local time `now`: interpolated between the samples around
    /// `now - delay` on the sender's timeline (held objects from the earlier sample), the newest sample when
    /// play time has run past it, the oldest before it. Drops samples no longer needed.
    pub fn sample(&mut self, now: Duration, player: u8) -> Option<AvatarState> {
        let play = self.play_time(now)?;
        let queue = self.samples.get_mut(usize::from(player))?;
        let after = queue.partition_point(|&(t, _)| t <= play);
        if after >= 2 {
            queue.drain(..after - 1);
        }
        let after = queue.partition_point(|&(t, _)| t <= play);
        match (after.checked_sub(1).map(|i| queue[i]), queue.get(after)) {
            (Some((ta, a)), Some(&(tb, b))) => {
                let f = ((play - ta) / (tb - ta)).clamp(0.0, 1.0) as f32;
                Some(interpolate(&self.quant, &a, &b, f))
            }
            (Some((_, a)), None) => Some(a),
            (None, Some(&(_, b))) => Some(b),
            (None, None) => None,
        }
    }

    /// Moves into `out`, oldest first, the object updates of every frame the play time has reached at `now`
    /// (with the avatars of [`FrameJitterBuffer::sample`] at the same `now`, they make one remote frame).
    pub fn pop_objects(&mut self, now: Duration, out: &mut Vec<(u16, ObjectState)>) {
        let Some(play) = self.play_time(now) else {
            return;
        };
        let overflow = self.objects.len().saturating_sub(MAX_QUEUED_OBJECTS);
        let due = self
            .objects
            .partition_point(|&(t, _, _)| t <= play)
            .max(overflow);
        out.extend(self.objects.drain(..due).map(|(_, id, state)| (id, state)));
    }

    /// Puts into `out` (cleared first), for each object with an update queued within [`MAX_LEAD_STEPS`] steps
    /// of `step` from `next` (the time of the coming step), the state it will hold once the first of those steps
    /// that plays any of its updates has played (the last update that step plays) and how many steps away that
    /// is, if nothing else arrives first. A receiver that has just played a frame uses them to move its copies
    /// the way their senders did ([`crate::world::World::lead_into`]).
    pub fn upcoming_objects(&self, next: Duration, step: Duration, out: &mut Vec<Upcoming>) {
        out.clear();
        let mut steps = 1;
        let Some(mut play) = self.play_time_at(next) else {
            return;
        };
        for &(t, id, state) in &self.objects {
            while t > play {
                if steps == MAX_LEAD_STEPS {
                    break;
                }
                steps += 1;
                let Some(later) = self.play_time_at(next + step * (steps - 1)) else {
                    return;
                };
                play = later;
            }
            if t > play {
                break;
            }
            out.push(Upcoming { id, state, steps });
        }
        // A stable sort by id keeps each object's updates in play order: the first names the object's first
        // step, and the last update of that step is the one kept.
        out.sort_by_key(|u| u.id);
        out.dedup_by(|later, kept| {
            if later.id != kept.id {
                return false;
            }
            if later.steps == kept.steps {
                *kept = *later;
            }
            true
        });
    }

    /// Object updates waiting for their play time.
    pub fn queued_objects(&self) -> usize {
        self.objects.len()
    }
}

fn between(a: &Isometry3<f32>, b: &Isometry3<f32>, f: f32) -> Isometry3<f32> {
    let rotation = a
        .rotation
        .try_slerp(&b.rotation, f, 1e-6)
        .unwrap_or(if f < 0.5 { a.rotation } else { b.rotation });
    Isometry3::from_parts(
        Translation3::from(a.translation.vector.lerp(&b.translation.vector, f)),
        rotation,
    )
}

/// Blends two avatar samples: poses interpolated, held objects (a discrete fact) from the earlier one. An
/// object both samples hold in the same grab is placed between where the two put it, and its grip is taken
/// relative to the blended hand: the holder's grip may give way from sample to sample (the object stopped on
/// something while the hand went on), and the earlier grip on a later hand would show the object where it
/// never was.
fn interpolate(quant: &QuantConfig, a: &AvatarState, b: &AvatarState, f: f32) -> AvatarState {
    let mut out = *a;
    out.head = pose_to_quantized(
        quant,
        &between(
            &pose_from_quantized(quant, &a.head),
            &pose_from_quantized(quant, &b.head),
            f,
        ),
    );
    for (hand, (ha, hb)) in out.hands.iter_mut().zip(a.hands.iter().zip(&b.hands)) {
        let (hand_a, hand_b) = (
            pose_from_quantized(quant, &ha.pose),
            pose_from_quantized(quant, &hb.pose),
        );
        let blended = between(&hand_a, &hand_b, f);
        hand.pose = pose_to_quantized(quant, &blended);
        if let (Some(held), Some(held_a), Some(held_b)) = (&mut hand.held, ha.held, hb.held)
            && (held_a.object, held_a.ownership_seq) == (held_b.object, held_b.ownership_seq)
        {
            let object_a = hand_a * pose_from_quantized(quant, &held_a.relative);
            let object_b = hand_b * pose_from_quantized(quant, &held_b.relative);
            let object = between(&object_a, &object_b, f);
            held.relative = pose_to_quantized(
                quant,
                &(pose_from_quantized(quant, &hand.pose).inverse() * object),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use physync_codec::QuantizedPose;

    use super::*;

    fn avatar(player: u8, x: f32, quant: &QuantConfig) -> AvatarState {
        let mut a = AvatarState {
            player,
            ..AvatarState::default()
        };
        a.head = QuantizedPose::quantize(quant, [x, 1.7, 0.0], [0.0, 0.0, 0.0, 1.0]);
        a
    }

    /// Datagrams sent every frame, each carrying some of 8 objects, arrive after 75-175 ms in any order; a link
    /// hands each entry over as fresh (newer than anything received for that object) or overtaken. Played back
    /// frame by frame, every object's updates come out in the order they were sent, never an older one after a
    /// newer, and the overtaken ones fill in: with 50 ms of jitter each way every update sent is played (seed 0:
    /// 3369 of 3369; 2091 with the overtaken ones dropped).
    #[test]
    fn overtaken_updates_fill_in_and_never_play_out_of_order() {
        use rand::{Rng, SeedableRng};
        let quant = QuantConfig::default();
        let frame_s = 1.0 / 60.0;
        let state = |frame: u16| {
            let mut s = ObjectState::default();
            s.body.position = [i32::from(frame), 0, 0];
            s
        };
        for seed in 0..20 {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut sent = 0usize;
            // (arrival in seconds, frame, object updates)
            type Datagram = (f64, u16, Vec<(u16, ObjectState)>);
            let mut datagrams: Vec<Datagram> = (0..600u16)
                .map(|frame| {
                    let objects: Vec<(u16, ObjectState)> = (0..8u16)
                        .filter(|_| rng.random_bool(0.7))
                        .map(|id| (id, state(frame)))
                        .collect();
                    sent += objects.len();
                    let arrival = f64::from(frame) * frame_s + rng.random_range(0.075..0.175);
                    (arrival, frame, objects)
                })
                .collect();
            datagrams.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut buffer = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, quant);
            let mut newest = [None::<u16>; 8];
            let mut played = [None::<u16>; 8];
            let (mut count, mut next) = (0usize, 0usize);
            let mut due = Vec::new();
            for step in 0..700u32 {
                let now = f64::from(step) * frame_s;
                while next < datagrams.len() && datagrams[next].0 <= now {
                    let (arrival, frame, objects) = &datagrams[next];
                    let at = Duration::from_secs_f64(*arrival);
                    let (fresh, late): (Vec<_>, Vec<_>) = objects.iter().partition(|(id, _)| {
                        let n = &mut newest[usize::from(*id)];
                        let is_fresh = n.is_none_or(|n| *frame > n);
                        if is_fresh {
                            *n = Some(*frame);
                        }
                        is_fresh
                    });
                    buffer.push(at, *frame, &[], &fresh);
                    buffer.push_overtaken(at, *frame, &[], &late);
                    next += 1;
                }
                due.clear();
                buffer.pop_objects(Duration::from_secs_f64(now), &mut due);
                for (id, s) in &due {
                    let frame = s.body.position[0] as u16;
                    let last = &mut played[usize::from(*id)];
                    assert!(
                        last.is_none_or(|l| frame > l),
                        "seed {seed}: object {id} played {frame} after {last:?}"
                    );
                    *last = Some(frame);
                    count += 1;
                }
            }
            assert!(
                count * 100 >= sent * 97,
                "seed {seed}: {count} of {sent} played"
            );
        }
    }

    /// What a receiver leads its remote objects with ([`FrameJitterBuffer::upcoming_objects`]) is what the
    /// coming steps play: datagrams sent every frame but every seventh (lost), each naming object 3 and, every
    /// fourth frame, object 5, arrive 107 ms later. After every step, each object named is played exactly the
    /// number of steps later that was named, and the state named is the last update of it that step plays; every
    /// step that plays an object was named for it.
    #[test]
    fn the_upcoming_updates_are_what_the_coming_steps_play() {
        let frame = Duration::from_secs(1) / 60;
        let state = |f: u32, id: u16| {
            let mut s = ObjectState::default();
            s.body.position = [f as i32, i32::from(id), 0];
            (id, s)
        };
        let mut buffer = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, QuantConfig::default());
        let (mut upcoming, mut due) = (Vec::new(), Vec::new());
        let mut named: HashMap<(u32, u16), ObjectState> = HashMap::new();
        let (mut matched, mut ahead) = (0, 0);
        for step in 0..300u32 {
            let now = frame * step;
            if step % 7 != 6 {
                let mut objects = vec![state(step, 3)];
                if step % 4 == 0 {
                    objects.push(state(step, 5));
                }
                buffer.push(now + Duration::from_millis(107), step as u16, &[], &objects);
            }
            due.clear();
            buffer.pop_objects(now, &mut due);
            let mut played: Vec<(u16, ObjectState)> = Vec::new();
            for &(id, s) in due.iter().rev() {
                if !played.iter().any(|&(p, _)| p == id) {
                    played.push((id, s));
                }
            }
            for (id, s) in played {
                if let Some(expected) = named.remove(&(step, id)) {
                    assert_eq!(s, expected, "step {step}, object {id}");
                    matched += 1;
                } else {
                    assert!(step <= 20, "step {step} played object {id} unnamed");
                }
            }
            assert!(
                named.keys().all(|&(at, _)| at > step),
                "step {step}: named but not played"
            );
            buffer.upcoming_objects(now + frame, frame, &mut upcoming);
            for u in &upcoming {
                assert!((1..=MAX_LEAD_STEPS).contains(&u.steps));
                ahead += usize::from(u.steps > 1);
                let earlier = named.insert((step + u.steps, u.id), u.state);
                assert!(earlier.is_none_or(|e| e == u.state), "step {step}: {u:?}");
            }
        }
        assert!(matched > 300, "{matched} updates played as named");
        assert!(ahead > 250, "{ahead} updates named more than a step ahead");
    }

    #[test]
    fn play_time_never_runs_back_when_the_fastest_delay_expires() {
        let mut b = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, QuantConfig::default());
        // One packet arrives 50 ms fast, every other 100 ms late: after DELAY_MEMORY the fast one expires
        // and the mapping grows by 50 ms.
        let (mut last, mut at) = (f64::MIN, Duration::ZERO);
        for frame in 0..600u16 {
            let late = if frame == 0 { 0.05 } else { 0.1 };
            let arrival = Duration::from_secs_f64(f64::from(frame) / 60.0 + late);
            b.push(arrival, frame, &[], &[]);
            let now = Duration::from_secs_f64(f64::from(frame) / 60.0 + 0.1);
            let play = b.play_time(now).unwrap();
            let elapsed = (now - at).as_secs_f64();
            assert!(
                play >= last + 0.89 * elapsed || last == f64::MIN,
                "frame {frame}: play time {play} after {last}"
            );
            (last, at) = (play, now);
        }
    }

    /// A packet faster than any before moves the mapping on by 30 ms: the play time catches up at no more than
    /// [`MAX_SLOWDOWN`] over real time, so no step plays two frames of a sender at once, and it gets within half
    /// a frame of the new mapping (the middle of the frame it falls in) within 20 frames. A mapping moved on by more than the play-out delay (150 ms here) is taken at once.
    #[test]
    fn play_time_catches_up_gradually_when_a_faster_packet_arrives() {
        for (faster, gradual) in [(0.03, true), (0.15, false)] {
            let mut b = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, QuantConfig::default());
            let (mut last, mut at) = (f64::MIN, Duration::ZERO);
            let (mut fastest_pace, mut caught_up) = (0.0_f64, None);
            for frame in 0..300u16 {
                let sent = f64::from(frame) / 60.0;
                let late = if frame >= 60 { 0.2 - faster } else { 0.2 };
                b.push(Duration::from_secs_f64(sent + late), frame, &[], &[]);
                let now = Duration::from_secs_f64(sent + 0.2);
                let play = b.play_time(now).unwrap();
                if frame >= 60 {
                    fastest_pace = fastest_pace.max((play - last) / (now - at).as_secs_f64());
                    let target = now.as_secs_f64() - 0.1 - (0.2 - faster);
                    if caught_up.is_none() && (play - target).abs() <= 0.5 / 60.0 + 1e-9 {
                        caught_up = Some(frame);
                    }
                }
                (last, at) = (play, now);
            }
            let caught_up = caught_up.expect("the play time reaches its new mapping");
            if gradual {
                assert!(fastest_pace <= 1.0 + MAX_SLOWDOWN + 1e-6, "{fastest_pace}");
                assert!(caught_up < 80, "caught up at frame {caught_up}");
            } else {
                assert!(fastest_pace > 2.0, "{fastest_pace}");
                assert_eq!(caught_up, 60);
            }
        }
    }

    /// The fastest delay seen moves by 1.5 ms now and then (a packet a little faster than the rest arrives, and
    /// expires from the window 3 s later), with the receiver's steps falling right on the sender's frame
    /// boundaries. Every step after the first second must still play exactly one of the sender's frames: a step
    /// that plays none stalls every remote object for a frame, and one that plays two makes them take a double
    /// step.
    #[test]
    fn a_wobbling_fastest_delay_plays_one_frame_every_step() {
        let mut b = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, QuantConfig::default());
        let mut due = Vec::new();
        let mut uneven = Vec::new();
        for frame in 0..1200u16 {
            let sent = f64::from(frame) / 60.0;
            let late = if frame % 400 == 0 { 0.0985 } else { 0.1 };
            let mut update = ObjectState::default();
            update.body.position = [i32::from(frame), 0, 0];
            b.push(
                Duration::from_secs_f64(sent + late),
                frame,
                &[],
                &[(1, update)],
            );
            due.clear();
            b.pop_objects(Duration::from_secs_f64(sent + 0.2), &mut due);
            if frame >= 60 && due.len() != 1 {
                uneven.push((frame, due.len()));
            }
        }
        assert!(
            uneven.is_empty(),
            "steps playing other than one frame: {uneven:?}"
        );
    }

    /// Frames sent every 1/60 s, each with one object update, arrive 125 ms ± `jitter` later (uniform, seeded);
    /// played back frame by frame for 20 s. Returns the mean time (ms) from a frame's sending to the step that
    /// plays its update, over the last 15 s, and the share of updates played later than the step after the
    /// one their frame was due in.
    fn shown_after(buffer: &mut FrameJitterBuffer, jitter: f64) -> (f64, f64) {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let frame_s = 1.0 / 60.0;
        let mut datagrams: Vec<(f64, u16)> = (0..1200u16)
            .map(|f| {
                (
                    f64::from(f) * frame_s + 0.125 + rng.random_range(-jitter..=jitter),
                    f,
                )
            })
            .collect();
        datagrams.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut next, mut due) = (0, Vec::new());
        let (mut total, mut count, mut late) = (0.0, 0usize, 0usize);
        let mut newest_played = None::<u16>;
        for step in 0..1300u32 {
            let now = f64::from(step) * frame_s;
            while next < datagrams.len() && datagrams[next].0 <= now {
                let (at, f) = datagrams[next];
                let mut update = ObjectState::default();
                update.body.position = [i32::from(f), 0, 0];
                buffer.push(Duration::from_secs_f64(at), f, &[], &[(1, update)]);
                next += 1;
            }
            due.clear();
            buffer.pop_objects(Duration::from_secs_f64(now), &mut due);
            for (_, s) in &due {
                let f = s.body.position[0] as u16;
                if f >= 300 {
                    total += now - f64::from(f) * frame_s;
                    count += 1;
                    late += usize::from(newest_played.is_some_and(|n| f + 1 < n));
                }
                newest_played = Some(newest_played.map_or(f, |n| n.max(f)));
            }
        }
        (total / count as f64 * 1000.0, late as f64 / count as f64)
    }

    /// A steadier link must not show remote frames later than a jittery one. Played a fixed 100 ms behind the
    /// fastest arrival, ±25 ms of jitter showed each frame 216.7 ms after it was sent against 183.3 ms at ±50 ms
    /// (the fastest packet is 25 ms early instead of 50). The adaptive buffer waits the measured spread and a
    /// frame: ±25 ms now shows frames after 166.7 ms, and ±50 ms (whose spread needs all of the 100 ms) plays as
    /// the fixed buffer did; on both, under 2% of updates come a step late.
    #[test]
    fn a_steadier_link_shows_remote_frames_no_later_than_a_jittery_one() {
        let quant = QuantConfig::default();
        let adaptive = || FrameJitterBuffer::adaptive(DEFAULT_JITTER_DELAY, 60, quant);
        let (steady, steady_late) = shown_after(&mut adaptive(), 0.025);
        let (jittery, jittery_late) = shown_after(&mut adaptive(), 0.05);
        let (fixed_jittery, _) = shown_after(
            &mut FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, quant),
            0.05,
        );
        assert!(
            steady + 5.0 < jittery,
            "±25 ms shows frames after {steady:.1} ms, ±50 ms after {jittery:.1} ms"
        );
        assert!(
            (jittery - fixed_jittery).abs() < 1.0,
            "±50 ms: adaptive {jittery:.1} ms, fixed {fixed_jittery:.1} ms"
        );
        assert!(
            steady_late < 0.02 && jittery_late < 0.02,
            "late updates: {steady_late} and {jittery_late}"
        );
    }

    #[test]
    fn frames_unwrap_across_the_16_bit_boundary() {
        let mut c = SenderClock::new(60);
        c.observe(Duration::from_secs(1), 65_530);
        assert_eq!(c.unwrap_frame(3), 65_539);
        assert_eq!(c.unwrap_frame(65_500), 65_500);
    }

    #[test]
    fn jittered_samples_play_back_smoothly_behind_the_delay() {
        let quant = QuantConfig::default();
        let mut buffer = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, quant);
        // The sender moves the head 1 m/s along x, one sample a frame; arrivals take 50 to 90 ms.
        let jitter = [0.05, 0.09, 0.06, 0.08, 0.05, 0.07];
        let mut shown = Vec::new();
        for frame in 0..120u16 {
            let sent = f64::from(frame) / 60.0;
            let arrival = Duration::from_secs_f64(sent + jitter[usize::from(frame) % jitter.len()]);
            let a = avatar(1, sent as f32, &quant);
            buffer.push(arrival, frame, &[TimedAvatar::new(a, Duration::ZERO)], &[]);
            if frame > 30 {
                let s = buffer.sample(arrival, 1).unwrap();
                shown.push((
                    arrival.as_secs_f64(),
                    quant.position.dequantize(s.head.position)[0],
                ));
            }
        }
        // Play time is arrival - 100 ms - the 50 ms fastest delay, placed in its frame: the shown x lags by
        // 150 ms give or take a frame, and the 40 ms spread of arrivals does not show.
        let lags: Vec<f64> = shown.iter().map(|&(t, x)| t - f64::from(x)).collect();
        let (min, max) = lags
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &l| (lo.min(l), hi.max(l)));
        let mean = lags.iter().sum::<f64>() / lags.len() as f64;
        assert!(max - min < 0.02, "lag between {min} and {max} s");
        assert!((mean - 0.15).abs() < 1.0 / 60.0, "mean lag {mean} s");
    }

    #[test]
    fn sample_offsets_place_relayed_samples_earlier() {
        let quant = QuantConfig::default();
        let mut buffer = FrameJitterBuffer::new(Duration::ZERO, 60, quant);
        // About five frames apart, so that halfway between them is where the play time stands in a frame
        // (PLAY_PHASE).
        let apart = (6.0 - 2.0 * PLAY_PHASE) / 60.0;
        let old = TimedAvatar::new(avatar(2, 0.0, &quant), Duration::from_secs_f64(apart));
        let new = TimedAvatar::new(avatar(2, 1.0, &quant), Duration::ZERO);
        buffer.push(Duration::from_secs(1), 60, &[old], &[]);
        buffer.push(Duration::from_secs(1), 60, &[new], &[]);
        let halfway = Duration::from_secs(1) - Duration::from_secs_f64(apart / 2.0);
        let halfway = buffer.sample(halfway, 2).unwrap();
        let x = quant.position.dequantize(halfway.head.position)[0];
        assert!((x - 0.5).abs() < 0.01, "{x}");
        assert!(buffer.sample(Duration::from_secs(1), 3).is_none());
    }

    #[test]
    fn a_held_object_whose_grip_gives_way_stays_put_between_samples() {
        // The holder's hand moves 10 cm a frame while the object it holds stays pressed where it is (its grip
        // gives way): the grip changes from sample to sample. Between two samples the hand is interpolated;
        // the object must be where both samples put it, not the earlier grip on the interpolated hand.
        use physync_codec::HeldObject;
        let quant = QuantConfig::default();
        let object = [0.5f32, 0.6, -3.0];
        let sample = |hand_x: f32| {
            let mut a = avatar(2, 0.0, &quant);
            a.hands[1].pose =
                QuantizedPose::quantize(&quant, [hand_x, 0.6, -3.0], [0.0, 0.0, 0.0, 1.0]);
            a.hands[1].held = Some(HeldObject {
                object: 7,
                relative: QuantizedPose::quantize(
                    &quant,
                    [object[0] - hand_x, 0.0, 0.0],
                    [0.0, 0.0, 0.0, 1.0],
                ),
                authority_seq: 0,
                ownership_seq: 1,
            });
            a
        };
        let played = interpolate(&quant, &sample(0.5), &sample(0.3), 0.5);
        let hand = quant.position.dequantize(played.hands[1].pose.position);
        let grip = quant
            .position
            .dequantize(played.hands[1].held.unwrap().relative.position);
        let shown = hand[0] + grip[0];
        assert!(
            (shown - object[0]).abs() < 0.003,
            "the held object is shown at x = {shown}, held at {}",
            object[0]
        );
    }
}
