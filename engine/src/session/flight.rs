//! Whether a backstep an observer showed was a step the authority's own trajectory made. An observer simulates
//! another player's flying object between received states; when the authority's object touched something the
//! observer's world did not have there (a hand or an object of a third player, seen at another time on each
//! peer), the next received state turns the observer's copy back, and the physics pose steps back. A
//! [`FlightLog`] per peer records each object's wire state after every step and whether that step touched
//! anything; [`max_free_flight_backstep`] then keeps only the backsteps whose received states the authority
//! produced in free flight, over every step between them: what the sync itself got wrong.

use physync_codec::BodyState;

use super::feel::Backstep;
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

/// The largest of `backsteps` (one observer's) that the sync made: those whose received states the authority
/// produced in free flight, over every step the observer's poses compared stand for (a backstep after a
/// contact on the authority is the authority's own trajectory). A backstep whose states no log accounts for
/// counts.
pub fn max_free_flight_backstep(backsteps: &[Backstep], logs: &[FlightLog]) -> f32 {
    backsteps
        .iter()
        .filter(|b| {
            let Some(applied) = b.applied else {
                return true;
            };
            let Some(log) = logs.iter().find(|l| l.player() == b.authority) else {
                return true;
            };
            let after = b.frame.saturating_sub(applied.frame);
            log.flew_free(
                logs,
                b.object,
                b.origin.as_ref().map(|p| &p.state),
                &applied.state,
                after,
            )
            .unwrap_or(true)
        })
        .map(|b| b.metres)
        .fold(0.0, f32::max)
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

    /// Player 1 (the authority) throws cube 0 sideways; with `obstacle`, cube 1 sits in its path in player 3's
    /// hand on the authority's world only. The observer (player 2) gets the authority's states two frames late,
    /// every third frame; `replay_old` writes one state from six frames before once more, late. Returns the
    /// observer's backstep, all of them and those the sync made.
    fn observe_throw(obstacle: bool, replay_old: bool) -> (f32, f32) {
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
        let (mut authority_log, mut observer_log) = (FlightLog::new(), FlightLog::new());
        let mut meter = FeelMeter::new();
        let mut sent: Vec<ObjectState> = Vec::new();
        for frame in 0..40 {
            authority.step();
            authority_log.record(&authority);
            sent.push(authority.object_state(0));
            let late = match frame {
                f if replay_old && f == 24 => Some(sent[f - 8]),
                f if f >= 2 && f % 3 == 0 => Some(sent[f - 2]),
                _ => None,
            };
            if let Some(state) = late {
                observer
                    .receive_object_state(0, Direction::HostToGuest { guest: 2 }, &state)
                    .unwrap();
            }
            observer.step();
            meter.observe(&observer);
            observer_log.record(&observer);
        }
        let sync = max_free_flight_backstep(meter.backsteps(), &[authority_log, observer_log]);
        let f = meter.figures();
        assert_eq!(
            f.max_backstep_m,
            f.max_render_backstep_m.max(f.max_physics_backstep_m)
        );
        (f.max_backstep_m, sync)
    }

    #[test]
    fn a_backstep_after_a_contact_only_the_authority_had_is_the_authoritys_own() {
        let (all, sync) = observe_throw(true, false);
        assert!(all > 0.01, "no backstep to classify: {all}");
        assert!(sync < 0.002, "all {all}, sync {sync}");
    }

    #[test]
    fn a_backstep_the_sync_made_in_free_flight_counts() {
        assert!(observe_throw(false, false).0 < 0.002);
        let (all, sync) = observe_throw(false, true);
        assert!(all > 0.01, "no backstep: {all}");
        assert_eq!(sync, all);
    }
}
