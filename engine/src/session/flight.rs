//! Whether a backstep an observer showed was a step the authority's own trajectory made. An observer simulates
//! another player's flying object between received states; when the authority's object touched something the
//! observer's world did not have there (a hand or an object of a third player, seen at another time on each
//! peer), the next received state turns the observer's copy back, and the physics pose steps back. A
//! [`FlightLog`] per peer records each object's wire state after every step and whether that step touched
//! anything; [`backstep_cause`] then tells the backsteps whose received states the authority produced in free
//! flight, over every step between them, from those after a contact there; of the former, those shortly after
//! the object changed authority (a new authority's copy trails the old one's) from what the sync itself got
//! wrong. [`BackstepsByCause`] sums them up; [`BackstepsByCause::free_flight`] is what the sync made.

use physync_codec::BodyState;
use serde::Serialize;

use super::feel::{Backstep, LOGGED_BACKSTEP_M};
use crate::world::World;
use crate::world::authority::PlayerIndex;
use crate::world::scene::ObjectId;

/// One step of one object on the peer that recorded it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Flight {
    state: BodyState,
    free: bool,
    /// The last received state written into the object, and how many of this peer's steps ago.
    source: Option<(BodyState, u64)>,
}

/// Every step of every object on one peer: its wire state after the step, whether it flew free in it (not
/// held, not at rest, touching nothing), and the received state it was simulated from.
#[derive(Debug, Clone, Default)]
pub struct FlightLog {
    player: PlayerIndex,
    objects: Vec<Vec<Flight>>,
}

impl FlightLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records the latest step of `world` (call after each step, as [`super::FeelMeter::observe`]).
    pub fn record(&mut self, world: &World) {
        self.player = world.local_player();
        self.objects.resize(world.object_count(), Vec::new());
        for (id, track) in self.objects.iter_mut().enumerate() {
            let id = id as ObjectId;
            let state = world.object_state(id).body;
            let free = world.holder(id).is_none() && !state.at_rest && !world.in_contact(id);
            let source = world
                .last_applied(id)
                .map(|a| (a.state, world.frame().saturating_sub(a.frame)));
            track.push(Flight {
                state,
                free,
                source,
            });
        }
    }

    /// The player whose world this log recorded.
    pub fn player(&self) -> PlayerIndex {
        self.player
    }

    fn find(&self, object: ObjectId, state: &BodyState) -> Option<usize> {
        self.objects
            .get(usize::from(object))?
            .iter()
            .rposition(|f| f.state == *state)
    }

    /// The step of this peer's `object` that `state` stands for: the one that produced it here, or, for a
    /// state another peer (in `relays`) stepped on from a state of this peer's (a host relaying its own step
    /// of a guest's object), the step as many steps past that one.
    fn locate(&self, relays: &[FlightLog], object: ObjectId, state: &BodyState) -> Option<usize> {
        self.find(object, state).or_else(|| {
            relays
                .iter()
                .filter(|l| l.player != self.player)
                .find_map(|l| {
                    let flight = l.objects[usize::from(object)][l.find(object, state)?];
                    let (source, steps) = flight.source?;
                    Some(self.find(object, &source)? + steps as usize)
                })
        })
    }

    /// Whether this peer's `object` flew free over every step after the one `from` stands for up to `after`
    /// steps past the one `to` stands for (see [`FlightLog::locate`]); `None` when neither this peer nor a
    /// relay of its states produced them. Without `from`, the step `to` stands for and those after it count.
    fn flew_free(
        &self,
        relays: &[FlightLog],
        object: ObjectId,
        from: Option<&BodyState>,
        to: &BodyState,
        after: u64,
    ) -> Option<bool> {
        let track = self.objects.get(usize::from(object))?;
        let end = self.locate(relays, object, to)?;
        let start = match from {
            Some(from) => self.locate(relays, object, from)? + 1,
            None => end,
        };
        let last = (end + after as usize).min(track.len().checked_sub(1)?);
        Some(track[start.min(last)..=last].iter().all(|f| f.free))
    }
}

/// Why an observer's object stepped back in free flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackstepCause {
    /// The authority's own trajectory turned: its object touched something over the steps the observer's poses
    /// compared stand for (a hand or an object that the observer's world had elsewhere), and the observer
    /// replays the bounce where its copy touches nothing.
    AuthorityContact,
    /// The object changed authority on the observer shortly before ([`Backstep::after_handover`]): the new
    /// authority's states come from its own copy, which trails the old one's.
    AfterHandover,
    /// Neither: what the sync itself got wrong.
    Sync,
}

/// Why `b` (one observer's backstep) happened, from every peer's [`FlightLog`]. A backstep whose states no log
/// accounts for is not put down to the authority's contact.
pub fn backstep_cause(b: &Backstep, logs: &[FlightLog]) -> BackstepCause {
    let turned_on_authority = b.applied.and_then(|applied| {
        let log = logs.iter().find(|l| l.player() == b.authority)?;
        let after = b.frame.saturating_sub(applied.frame);
        let origin = b.origin.as_ref().map(|p| &p.state);
        log.flew_free(logs, b.object, origin, &applied.state, after)
            .map(|free| !free)
    });
    if turned_on_authority == Some(true) {
        BackstepCause::AuthorityContact
    } else if b.after_handover {
        BackstepCause::AfterHandover
    } else {
        BackstepCause::Sync
    }
}

/// The largest backstep (m) of each [`BackstepCause`], render or physics pose, and how many went over
/// [`LOGGED_BACKSTEP_M`]: what stands behind a `max_backstep_mm` over its goal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BackstepsByCause {
    /// [`BackstepCause::AuthorityContact`].
    pub authority_contact: f32,
    /// [`BackstepCause::AfterHandover`].
    pub after_handover: f32,
    /// [`BackstepCause::Sync`].
    pub sync: f32,
    /// Backsteps over [`LOGGED_BACKSTEP_M`] of each cause, in the order above.
    pub over_goal: [u32; 3],
}

impl BackstepsByCause {
    /// The figures of one observer's `backsteps`.
    pub fn of(backsteps: &[Backstep], logs: &[FlightLog]) -> Self {
        backsteps.iter().fold(Self::default(), |mut f, b| {
            let (max, slot) = match backstep_cause(b, logs) {
                BackstepCause::AuthorityContact => (&mut f.authority_contact, 0),
                BackstepCause::AfterHandover => (&mut f.after_handover, 1),
                BackstepCause::Sync => (&mut f.sync, 2),
            };
            *max = max.max(b.metres);
            if b.metres > LOGGED_BACKSTEP_M {
                f.over_goal[slot] += 1;
            }
            f
        })
    }

    /// The largest backstep whose received states the authority produced in free flight, over every step the
    /// observer's poses compared stand for ([`BackstepCause::AfterHandover`] or [`BackstepCause::Sync`]): what the
    /// sync made, the authority's own contacts left out.
    pub fn free_flight(&self) -> f32 {
        self.after_handover.max(self.sync)
    }

    /// The worst of two observers' figures (counts added).
    pub fn merge(self, other: Self) -> Self {
        Self {
            authority_contact: self.authority_contact.max(other.authority_contact),
            after_handover: self.after_handover.max(other.after_handover),
            sync: self.sync.max(other.sync),
            over_goal: [0, 1, 2].map(|i| self.over_goal[i] + other.over_goal[i]),
        }
    }
}

#[cfg(test)]
mod tests {
    use nalgebra::Vector3;
    use physync_codec::{BodyState, ObjectState};

    use super::*;
    use crate::session::FeelMeter;
    use crate::world::authority::Direction;
    use crate::world::avatar::Hand;
    use crate::world::scene::SceneSpec;
    use crate::world::{World, WorldConfig};

    fn world(player: PlayerIndex) -> World {
        let config = WorldConfig {
            local_player: player,
            ..WorldConfig::default()
        };
        World::new(config, &SceneSpec::towers(&[1, 1]))
    }

    fn place(world: &mut World, id: ObjectId, at: [f32; 3]) {
        let state = BodyState::quantize(
            &world.config().quant,
            at,
            [0.0, 0.0, 0.0, 1.0],
            [0.0; 3],
            [0.0; 3],
            false,
        );
        world.apply_body_state(id, &state);
    }

    /// What the observer is sent besides the authority's states.
    #[derive(Clone, Copy, PartialEq)]
    enum Late {
        /// Nothing.
        Nothing,
        /// One state from eight frames before, once more, late.
        Replay,
        /// The same state as a new authority's (player 3's, one authority sequence on): a touch that took the
        /// cube with a copy trailing the authority's.
        Handover,
    }

    /// Player 1 (the authority) throws cube 0 sideways; with `obstacle`, cube 1 sits in its path in player 3's
    /// hand on the authority's world only. The observer (player 2) gets the thrown state, then the authority's
    /// states two frames late, every third frame, and `late` on frame 24. Returns the observer's largest backstep and its backsteps by
    /// cause.
    fn observe_throw(obstacle: bool, late: Late) -> (f32, BackstepsByCause) {
        let (mut authority, mut observer) = (world(1), world(2));
        if obstacle {
            place(&mut authority, 1, [0.0, 1.35, 0.0]);
            authority.grab(3, Hand::Left, 1).unwrap();
        }
        place(&mut authority, 0, [-1.0, 1.5, 0.0]);
        authority.grab(1, Hand::Right, 0).unwrap();
        authority.throw(
            1,
            Hand::Right,
            Vector3::new(4.0, 0.0, 0.0),
            Vector3::zeros(),
        );
        // The observer knows the throw from the start: no handover in what it is then sent.
        observer
            .receive_object_state(
                0,
                Direction::HostToGuest { guest: 2 },
                &authority.object_state(0),
            )
            .unwrap();
        let (mut authority_log, mut observer_log) = (FlightLog::new(), FlightLog::new());
        let mut meter = FeelMeter::new();
        let mut sent: Vec<ObjectState> = Vec::new();
        for frame in 0..40 {
            authority.step();
            authority_log.record(&authority);
            sent.push(authority.object_state(0));
            let state = match frame {
                24 if late == Late::Replay => Some(sent[frame - 8]),
                24 if late == Late::Handover => Some(ObjectState {
                    authority: 3,
                    authority_seq: sent[frame - 8].authority_seq.wrapping_add(1),
                    ..sent[frame - 8]
                }),
                f if f >= 2 && f % 3 == 0 => Some(sent[f - 2]),
                _ => None,
            };
            if let Some(state) = state {
                observer
                    .receive_object_state(0, Direction::HostToGuest { guest: 2 }, &state)
                    .unwrap();
            }
            observer.step();
            meter.observe(&observer);
            observer_log.record(&observer);
        }
        let by_cause = BackstepsByCause::of(meter.backsteps(), &[authority_log, observer_log]);
        let f = meter.figures();
        assert_eq!(
            f.max_backstep_m,
            f.max_render_backstep_m.max(f.max_physics_backstep_m)
        );
        (f.max_backstep_m, by_cause)
    }

    #[test]
    fn a_backstep_after_a_contact_only_the_authority_had_is_the_authoritys_own() {
        let (all, by_cause) = observe_throw(true, Late::Nothing);
        assert!(all > 0.01, "no backstep to classify: {all}");
        assert_eq!(by_cause.authority_contact, all);
        assert!(
            by_cause.after_handover.max(by_cause.sync) < 0.002,
            "{by_cause:?}"
        );
        assert!(by_cause.over_goal[0] > 0 && by_cause.over_goal[1..] == [0, 0]);
    }

    #[test]
    fn a_backstep_the_sync_made_in_free_flight_counts() {
        assert!(observe_throw(false, Late::Nothing).0 < 0.002);
        let (all, by_cause) = observe_throw(false, Late::Replay);
        assert!(all > 0.01, "no backstep: {all}");
        assert_eq!(by_cause.sync, all);
        assert_eq!(by_cause.over_goal[..2], [0, 0], "{by_cause:?}");
    }

    #[test]
    fn a_backstep_right_after_a_late_copy_took_the_object_is_put_down_to_the_handover() {
        let (all, by_cause) = observe_throw(false, Late::Handover);
        assert!(all > 0.01, "no backstep: {all}");
        assert_eq!(by_cause.after_handover, all);
        assert!(by_cause.sync < 0.002, "{by_cause:?}");
        assert_eq!(by_cause.over_goal[2], 0, "{by_cause:?}");
    }
}
