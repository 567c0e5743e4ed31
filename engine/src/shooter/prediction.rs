//! Client-side prediction and reconciliation of the local player (seeds 000 and 001). Each tick the client runs
//! its own input through [`simulate_player`] at once and keeps `(input, predicted state)` in a 32-tick ring. When
//! the server's state for a tick arrives, the prediction for that tick is compared with it; on a mismatch the
//! client restarts from the server's state and re-simulates every input the server has not yet applied. A server
//! tick older than the ring (the client ran more than ~1 s ahead) forces a resynchronisation.

use super::Tick;
use super::cubes::CubePose;
use super::hitbox::ShotRay;
use super::input::PlayerInput;
use super::map::WorldGeometry;
use super::player::{PlayerState, simulate_player};
use super::ring::TickRing;
use super::rules::GameRules;

/// Sizes and tolerances of the predictor.
#[derive(Debug, Clone, PartialEq)]
pub struct PredictionConfig {
    /// Ticks of history (32 in seed 000: about a second at 30 Hz).
    pub history_ticks: usize,
    /// Largest per-axis position difference, in position steps, still counted as a match (5 ≈ 1 cm).
    pub position_tolerance: i32,
    /// Largest vertical-velocity difference, in velocity steps, still counted as a match (13 ≈ 5 cm/s).
    pub velocity_tolerance: i32,
}

impl Default for PredictionConfig {
    fn default() -> Self {
        Self {
            history_ticks: 32,
            position_tolerance: 5,
            velocity_tolerance: 13,
        }
    }
}

/// What a reconciliation found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReconcileOutcome {
    /// The prediction matched within tolerance; nothing changed.
    Matched,
    /// The predicted movement or weapon state was wrong (a misprediction): the unacknowledged inputs were
    /// re-simulated from the server's state.
    Corrected {
        /// Ticks re-simulated.
        resimulated: u32,
        /// How far the current predicted position moved, metres.
        correction_m: f32,
    },
    /// Only server-owned state differed (health after a hit), or the player died or respawned: re-simulated
    /// like a correction but not counted as a misprediction, since no prediction could have known it.
    Overridden {
        /// Ticks re-simulated.
        resimulated: u32,
        /// How far the current predicted position moved, metres.
        correction_m: f32,
    },
    /// The server's tick was outside the history (or ahead of the client): the predictor restarted from the
    /// server's state at the server's tick.
    Resynchronised,
    /// The state was for a tick already reconciled (reordered or duplicated snapshot); ignored.
    Stale,
}

/// Cumulative counters of a predictor.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PredictionStats {
    /// Ticks predicted.
    pub predicted: u64,
    /// Server states compared.
    pub reconciled: u64,
    /// Mispredictions corrected.
    pub mispredictions: u64,
    /// Server-owned overrides applied.
    pub overrides: u64,
    /// Resynchronisations.
    pub resyncs: u64,
    /// Stale server states ignored.
    pub stale: u64,
    /// Ticks re-simulated in total.
    pub resimulated_ticks: u64,
    /// Largest correction of the current position caused by a misprediction, metres.
    pub max_correction_m: f32,
    /// Sum of misprediction corrections, metres (for a mean).
    pub total_correction_m: f64,
}

impl PredictionStats {
    /// Adds the counters of `other` (a predictor this one replaced) to these.
    pub fn absorb(&mut self, other: &Self) {
        self.predicted += other.predicted;
        self.reconciled += other.reconciled;
        self.mispredictions += other.mispredictions;
        self.overrides += other.overrides;
        self.resyncs += other.resyncs;
        self.stale += other.stale;
        self.resimulated_ticks += other.resimulated_ticks;
        self.max_correction_m = self.max_correction_m.max(other.max_correction_m);
        self.total_correction_m += other.total_correction_m;
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    input: PlayerInput,
    /// The cubes as the player saw them that tick (the server meets the input with the same poses).
    cubes: Vec<CubePose>,
    state: PlayerState,
}

/// The local player's predictor.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPredictor {
    config: PredictionConfig,
    ring: TickRing<Entry>,
    tick: Tick,
    state: PlayerState,
    last_server_tick: Option<Tick>,
    stats: PredictionStats,
}

impl ClientPredictor {
    /// Starts predicting from the server's `state` at `tick`.
    pub fn new(config: PredictionConfig, tick: Tick, state: PlayerState) -> Self {
        let mut ring = TickRing::new(config.history_ticks);
        ring.insert(
            tick,
            Entry {
                input: PlayerInput::default(),
                cubes: Vec::new(),
                state,
            },
        );
        Self {
            config,
            ring,
            tick,
            state,
            last_server_tick: Some(tick),
            stats: PredictionStats::default(),
        }
    }

    /// Starts over from the server's `state` at `tick` (the client re-aligned its clock), keeping the counters:
    /// a misprediction counted before a re-alignment stays counted.
    pub fn restart(&mut self, tick: Tick, state: PlayerState) {
        let stats = self.stats;
        *self = Self::new(self.config.clone(), tick, state);
        self.stats = stats;
    }

    /// The tick of the latest predicted state.
    pub fn tick(&self) -> Tick {
        self.tick
    }

    /// The latest predicted state (what the local player sees itself as).
    pub fn state(&self) -> &PlayerState {
        &self.state
    }

    /// The predicted state for `tick`, if still in the history.
    pub fn state_at(&self, tick: Tick) -> Option<&PlayerState> {
        self.ring.get(tick).map(|e| &e.state)
    }

    /// The input recorded for `tick`, if still in the history (what the client resends with redundancy).
    pub fn input_at(&self, tick: Tick) -> Option<&PlayerInput> {
        self.ring.get(tick).map(|e| &e.input)
    }

    /// Counters.
    pub fn stats(&self) -> PredictionStats {
        self.stats
    }

    /// Predicts the next tick under `input` with the cubes at `cubes` (where the player sees them, at the view
    /// time its input names) and records it. Returns the shot fired, for a locally predicted effect (give it a
    /// client-local id; damage is the server's word); `geometry` keeps the cubes placed, so the shot can be
    /// traced against the same cubes.
    pub fn predict(
        &mut self,
        input: PlayerInput,
        cubes: Vec<CubePose>,
        geometry: &mut WorldGeometry,
        rules: &GameRules,
    ) -> Option<ShotRay> {
        self.tick += 1;
        geometry.place_cubes(&cubes);
        let shot = simulate_player(&mut self.state, &input, geometry, rules);
        self.ring.insert(
            self.tick,
            Entry {
                input,
                cubes,
                state: self.state,
            },
        );
        self.stats.predicted += 1;
        shot
    }

    /// Compares the server's state for `server_tick` with the prediction for that tick and corrects the
    /// prediction if needed (see [`ReconcileOutcome`]).
    pub fn reconcile(
        &mut self,
        server_tick: Tick,
        server_state: &PlayerState,
        geometry: &mut WorldGeometry,
        rules: &GameRules,
    ) -> ReconcileOutcome {
        if self
            .last_server_tick
            .is_some_and(|last| server_tick <= last)
        {
            self.stats.stale += 1;
            return ReconcileOutcome::Stale;
        }
        let predicted = match self.ring.get(server_tick) {
            Some(entry) if server_tick <= self.tick => entry.state,
            _ => {
                self.resynchronise(server_tick, *server_state);
                return ReconcileOutcome::Resynchronised;
            }
        };
        self.last_server_tick = Some(server_tick);
        self.stats.reconciled += 1;
        let predicted_ok = self.predicted_part_matches(&predicted, server_state);
        if predicted_ok && predicted.vitals == server_state.vitals {
            return ReconcileOutcome::Matched;
        }
        // A death or a respawn moves the player (or stops it) for reasons prediction cannot know.
        let server_event = predicted_ok || predicted.alive() != server_state.alive();
        let before = self.state.position();
        let mut state = *server_state;
        if let Some(entry) = self.ring.get_mut(server_tick) {
            entry.state = state;
        }
        let mut resimulated = 0;
        for tick in server_tick + 1..=self.tick {
            let Some(entry) = self.ring.get_mut(tick) else {
                break;
            };
            geometry.place_cubes(&entry.cubes);
            simulate_player(&mut state, &entry.input, geometry, rules);
            entry.state = state;
            resimulated += 1;
        }
        self.state = state;
        let correction_m = (self.state.position() - before).norm();
        self.stats.resimulated_ticks += u64::from(resimulated);
        if server_event {
            self.stats.overrides += 1;
            ReconcileOutcome::Overridden {
                resimulated,
                correction_m,
            }
        } else {
            self.stats.mispredictions += 1;
            self.stats.max_correction_m = self.stats.max_correction_m.max(correction_m);
            self.stats.total_correction_m += f64::from(correction_m);
            ReconcileOutcome::Corrected {
                resimulated,
                correction_m,
            }
        }
    }

    fn predicted_part_matches(&self, predicted: &PlayerState, server: &PlayerState) -> bool {
        let (p, s) = (&predicted.motion, &server.motion);
        let position_ok = p
            .position
            .iter()
            .zip(s.position.iter())
            .all(|(a, b)| (a - b).abs() <= self.config.position_tolerance);
        position_ok
            && (p.vertical_velocity - s.vertical_velocity).abs() <= self.config.velocity_tolerance
            && p.yaw == s.yaw
            && p.pitch == s.pitch
            && p.grounded == s.grounded
            && predicted.weapon == server.weapon
    }

    fn resynchronise(&mut self, server_tick: Tick, server_state: PlayerState) {
        self.stats.resyncs += 1;
        self.ring.clear();
        self.tick = server_tick;
        self.state = server_state;
        self.last_server_tick = Some(server_tick);
        self.ring.insert(
            server_tick,
            Entry {
                input: PlayerInput::default(),
                cubes: Vec::new(),
                state: server_state,
            },
        );
    }
}
