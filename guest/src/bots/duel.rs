//! Simultaneous touches on purpose: two players grab one free cube in the same frame, before either can hear of
//! the other, so the host has to decide who got it. Beside the bots (it uses the left hand; they use the right).

use std::time::Duration;

use physync_engine::session::PlayerControls;
use physync_engine::world::authority::DEFAULT_AUTHORITY;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::ObjectId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One contest: the cube, and when each of the two players grabbed it (`None`: its grab was refused).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DuelRound {
    /// The contested cube.
    pub cube: ObjectId,
    /// When the round started.
    pub at: Duration,
    /// When each duelist's grab succeeded locally.
    pub grabbed: [Option<Duration>; 2],
    released: [bool; 2],
}

impl DuelRound {
    /// Both duelists took the cube locally: a real conflict for the host to settle.
    pub fn contested(&self) -> bool {
        self.grabbed.iter().all(Option::is_some)
    }
}

/// Two players (by the index their driver gives them) contesting one cube every `period`. Call
/// [`Duel::act`] from each player's input hook.
#[derive(Debug, Clone)]
pub struct Duel {
    players: [usize; 2],
    period: Duration,
    hold: Duration,
    next_at: Duration,
    avoid: Vec<ObjectId>,
    rng: ChaCha8Rng,
    rounds: Vec<DuelRound>,
}

impl Duel {
    /// Players `players` contest a cube every `period` from `start` on, each holding it (if it got it) for
    /// `hold`.
    pub fn new(
        players: [usize; 2],
        start: Duration,
        period: Duration,
        hold: Duration,
        seed: u64,
    ) -> Self {
        Self {
            players,
            period,
            hold,
            next_at: start,
            avoid: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
            rounds: Vec::new(),
        }
    }

    /// Cubes never contested.
    pub fn avoid(&mut self, cubes: &[ObjectId]) {
        self.avoid = cubes.to_vec();
    }

    /// Every round so far, the current one last.
    pub fn rounds(&self) -> &[DuelRound] {
        &self.rounds
    }

    /// Acts for player `player` at `now`: starts a round when one is due (choosing a free resting cube under
    /// default authority), grabs the round's cube, lets go once the hold is over.
    pub fn act(&mut self, player: usize, now: Duration, controls: &mut dyn PlayerControls) {
        let Some(slot) = self.players.iter().position(|&p| p == player) else {
            return;
        };
        let running = self
            .rounds
            .last()
            .is_some_and(|r| !r.released.iter().all(|&x| x));
        if !running {
            if now < self.next_at {
                return;
            }
            let world = controls.world();
            let free: Vec<ObjectId> = (0..world.object_count() as ObjectId)
                .filter(|&id| {
                    world.holder(id).is_none()
                        && world.is_at_rest(id)
                        && world.authority(id).view.authority == DEFAULT_AUTHORITY
                        && !self.avoid.contains(&id)
                })
                .collect();
            if free.is_empty() {
                self.next_at = now + self.period;
                return;
            }
            let cube = free[self.rng.random_range(0..free.len())];
            self.rounds.push(DuelRound {
                cube,
                at: now,
                grabbed: [None; 2],
                released: [false; 2],
            });
        }
        let Some(round) = self.rounds.last_mut() else {
            return;
        };
        if round.released[slot] {
            return;
        }
        let first_turn = round.grabbed[slot].is_none() && now.saturating_sub(round.at) < self.hold;
        if first_turn
            && controls
                .world()
                .grip(controls.player(), Hand::Left)
                .is_none()
        {
            if controls.grab(Hand::Left, round.cube).is_ok() {
                round.grabbed[slot] = Some(now);
            } else {
                round.released[slot] = true;
            }
        } else if now.saturating_sub(round.at) >= self.hold {
            controls.release(Hand::Left);
            round.released[slot] = true;
            self.next_at = now + self.period;
        }
    }
}
