//! A long session's script beside the bots: one player holds a cube in its left hand for many minutes; another
//! grabs each of a few cubes in turn and lets it go, then leaves them idle (the bots avoid them) and, once the
//! idle time has passed, touches each of them again. What a session must survive: objects that travelled, then
//! went unsent for longer than half the 16-bit sequence space, then moved again.

use std::time::Duration;

use physync_engine::session::PlayerControls;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::ObjectId;

/// How long each idle cube is held when it is finally touched.
const TOUCH: Duration = Duration::from_millis(300);

/// The script. Call [`LongHaul::act`] from each player's input hook.
#[derive(Debug, Clone)]
pub struct LongHaul {
    held: ObjectId,
    idle: Vec<ObjectId>,
    hold: Duration,
    idle_for: Duration,
    holder: usize,
    toucher: usize,
    held_since: Option<Duration>,
    released_at: Option<Duration>,
    /// 0 while touching the idle cubes the first time, 1 after the idle time.
    pass: usize,
    next: usize,
    touching_until: Option<Duration>,
    touched: usize,
}

impl LongHaul {
    /// Player `holder` holds `held` for `hold` from its first turn; player `toucher` touches every cube of
    /// `idle` from its first turn, and again once the session time reaches `idle_for`.
    pub fn new(
        (holder, held, hold): (usize, ObjectId, Duration),
        (toucher, idle, idle_for): (usize, Vec<ObjectId>, Duration),
    ) -> Self {
        Self {
            held,
            idle,
            hold,
            idle_for,
            holder,
            toucher,
            held_since: None,
            released_at: None,
            pass: 0,
            next: 0,
            touching_until: None,
            touched: 0,
        }
    }

    /// The cubes bots must leave alone: the held one and the idle ones.
    pub fn reserved(&self) -> Vec<ObjectId> {
        std::iter::once(self.held)
            .chain(self.idle.iter().copied())
            .collect()
    }

    /// How long the held cube was held, once it was let go.
    pub fn held_for(&self) -> Option<Duration> {
        Some(self.released_at?.saturating_sub(self.held_since?))
    }

    /// Idle cubes touched again after the idle time.
    pub fn touched(&self) -> usize {
        self.touched
    }

    /// Acts for player `player` at `now`.
    pub fn act(&mut self, player: usize, now: Duration, controls: &mut dyn PlayerControls) {
        if player == self.holder {
            match (self.held_since, self.released_at) {
                (None, _) if controls.grab(Hand::Left, self.held).is_ok() => {
                    self.held_since = Some(now);
                }
                (Some(since), None) if now.saturating_sub(since) >= self.hold => {
                    controls.release(Hand::Left);
                    self.released_at = Some(now);
                }
                _ => {}
            }
        }
        if player != self.toucher || (self.pass == 1 && now < self.idle_for) {
            return;
        }
        match self.touching_until {
            None => {
                let Some(&cube) = self.idle.get(self.next) else {
                    if self.pass == 0 {
                        self.pass = 1;
                        self.next = 0;
                    }
                    return;
                };
                if controls.grab(Hand::Left, cube).is_ok() {
                    self.touching_until = Some(now + TOUCH);
                } else {
                    self.next += 1;
                }
            }
            Some(until) if now >= until => {
                controls.release(Hand::Left);
                self.touched += self.pass;
                self.next += 1;
                self.touching_until = None;
            }
            Some(_) => {}
        }
    }
}
