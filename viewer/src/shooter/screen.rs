//! The shooter screen: the first-person view with its HUD in the centre, the scoreboard, match phase, results
//! and Leave on the side. Each frame reads mouse and keys into the client's input, runs the client, and draws
//! what it predicts (the local player) and interpolates (everyone else).

use egui::{
    CentralPanel, Color32, CursorGrab, Grid, Panel, PointerButton, Rect, RichText, Sense, Ui,
    ViewportCommand,
};
use nalgebra::Point3;
use physync_engine::shooter::units;
use physync_guest::dedicated::ClientEvent;

use super::arena_view::{self, Tracer};
use super::controls::{Controls, PointerOnView};
use super::hud::{self, HIT_MARKER_SECONDS, Vitals};
use super::session::{ShooterSession, ShooterStatus};
use crate::camera::OrbitCamera;
use crate::palette::player_color;
use crate::render3d::Solid;

/// Seconds a tracer stays visible.
const TRACER_SECONDS: f32 = 0.25;
/// A predicted move longer than this (metres) is a respawn or a correction: the camera jumps instead of gliding.
const SNAP_DISTANCE: f32 = 2.0;
/// How far in front of the eye, right of it and below it a tracer starts, metres.
const MUZZLE: (f32, f32, f32) = (0.4, 0.18, 0.15);

/// Why the shooter screen closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShooterExit {
    /// The person pressed Leave.
    Left,
    /// The session ended by itself, with the reason.
    Ended(String),
}

/// The arena's static boxes, built once the match data arrived.
struct Arena {
    solids: Vec<Solid>,
    floor_half: f32,
}

/// The shooter screen and the session it plays.
pub struct ShooterScreen {
    session: ShooterSession,
    controls: Controls,
    arena: Option<Arena>,
    tracers: Vec<Tracer>,
    /// Seconds left of the hit marker.
    hit_marker: f32,
    hits_confirmed: u64,
    shots_fired: u64,
    remote_shots: u64,
    last_clock: Option<f64>,
    view_rect: Option<Rect>,
    camera: Option<OrbitCamera>,
    grabbed: bool,
    feet: Glide,
}

/// The local player's feet glide from the previous predicted tick to the newest over one tick, so the camera
/// moves smoothly at any frame rate (the prediction itself advances 30 times a second).
#[derive(Debug, Clone, Copy, Default)]
struct Glide {
    from: Point3<f32>,
    to: Point3<f32>,
    /// egui's clock when `to` arrived.
    since: f64,
}

impl Glide {
    fn at(&self, clock: f64, tick_s: f64) -> Point3<f32> {
        let t = ((clock - self.since) / tick_s.max(1e-3)).clamp(0.0, 1.0) as f32;
        self.from + (self.to - self.from) * t
    }

    fn update(&mut self, target: Point3<f32>, clock: f64, tick_s: f64) {
        if target == self.to {
            return;
        }
        // The first position (never glided from the origin) and long moves jump.
        self.from = if self.since == 0.0 || (target - self.to).norm() > SNAP_DISTANCE {
            target
        } else {
            self.at(clock, tick_s)
        };
        self.to = target;
        self.since = clock;
    }
}

impl ShooterScreen {
    /// Show and play `session`.
    pub fn new(session: ShooterSession) -> Self {
        Self {
            session,
            controls: Controls::default(),
            arena: None,
            tracers: Vec::new(),
            hit_marker: 0.0,
            hits_confirmed: 0,
            shots_fired: 0,
            remote_shots: 0,
            last_clock: None,
            view_rect: None,
            camera: None,
            grabbed: false,
            feet: Glide::default(),
        }
    }

    /// The session played.
    pub fn session(&self) -> &ShooterSession {
        &self.session
    }

    /// Where the view was drawn on the last frame.
    pub fn view_rect(&self) -> Option<Rect> {
        self.view_rect
    }

    /// The first-person camera of the last frame.
    pub fn camera(&self) -> Option<&OrbitCamera> {
        self.camera.as_ref()
    }

    /// The local player's view yaw and pitch, radians, as the mouse set them.
    pub fn view_angles(&self) -> (f32, f32) {
        self.controls.view_angles()
    }

    /// Hits the server confirmed for the local player since the screen opened.
    pub fn hits_confirmed(&self) -> u64 {
        self.hits_confirmed
    }

    /// Other players' shots the server reported since the screen opened.
    pub fn remote_shots(&self) -> u64 {
        self.remote_shots
    }

    /// Tracers showing now.
    pub fn tracers(&self) -> &[Tracer] {
        &self.tracers
    }

    /// Shots the local player fired (predicted) since the screen opened.
    pub fn shots_fired(&self) -> u64 {
        self.shots_fired
    }

    /// Whether the hit marker is showing.
    pub fn hit_marker_showing(&self) -> bool {
        self.hit_marker > 0.0
    }

    /// True once the match is being played and the view shows what a screenshot should: another living player,
    /// a physics cube and another player's tracer.
    pub fn shows_an_opponent(&self) -> bool {
        let (Some(rect), Some(camera)) = (self.view_rect, &self.camera) else {
            return false;
        };
        let inside = |p: &Point3<f32>| {
            camera
                .project(p, rect)
                .is_some_and(|p| rect.shrink(40.0).contains(p.screen) && p.depth < 25.0)
        };
        let client = self.session.client();
        let now = self.session.now();
        let opponent = client
            .remote_poses(now)
            .iter()
            .any(|(_, p)| p.alive && inside(&p.position));
        let cube = client.cube_poses(now).iter().any(|c| inside(&c.center));
        let tracer = self
            .tracers
            .iter()
            .any(|t| !t.own && (inside(&t.from) || inside(&t.to)));
        opponent && cube && tracer
    }

    /// Turn the view towards the nearest living opponent in line of sight, as a bot aims (at the chest); true
    /// if one was found. The `--screenshot` job directs the camera with it, so the picture it waits for does not
    /// hang on where bots happen to wander.
    pub fn face_nearest_opponent(&mut self) -> bool {
        let client = self.session.client();
        let (Some(me), Some(data)) = (client.local_state(), client.match_data()) else {
            return false;
        };
        let Some((_, chest)) = client.nearest_opponent_in_sight(self.session.now()) else {
            return false;
        };
        let (yaw, pitch) = units::aim_at(&me.eye(&data.rules), &chest);
        self.controls.look(yaw, pitch);
        true
    }

    /// Run the session for this frame and draw the screen; returns how it closed, if it did.
    pub fn show(&mut self, ui: &mut Ui) -> Option<ShooterExit> {
        let clock = ui.input(|i| i.time);
        let dt = self.last_clock.map_or(0.0, |t| (clock - t).max(0.0) as f32);
        self.last_clock = Some(clock);
        self.step(ui, dt);
        let client = self.session.client();
        if let (Some(state), Some(data)) = (client.local_state(), client.match_data()) {
            let tick_s = data.rules.tick_duration().as_secs_f64();
            self.feet.update(state.position(), clock, tick_s);
        }
        if let ShooterStatus::Ended(reason) = self.session.status() {
            self.release_pointer(ui);
            return Some(ShooterExit::Ended(reason));
        }
        ui.ctx().request_repaint();

        Panel::top("shooter_title").show(ui, |ui| self.title_bar(ui));
        let mut leave = false;
        Panel::right("shooter_side")
            .default_size(260.0)
            .show(ui, |ui| leave = self.side_panel(ui));
        CentralPanel::no_frame().show(ui, |ui| self.view(ui));
        if leave {
            self.session.leave();
            self.release_pointer(ui);
            return Some(ShooterExit::Left);
        }
        None
    }

    /// Input in, client run, events handled, effects aged.
    fn step(&mut self, ui: &Ui, dt: f32) {
        let client = self.session.client();
        if let Some(state) = client.local_state() {
            self.controls.aim_from(state.motion.yaw, state.motion.pitch);
        }
        let tick = client.tick();
        let rect = self.view_rect;
        let input = ui.input(|i| {
            let inside = |p: Option<egui::Pos2>| p.zip(rect).is_some_and(|(p, r)| r.contains(p));
            let hovered = inside(i.pointer.hover_pos());
            let pressed_here = inside(i.pointer.press_origin());
            let pointer = PointerOnView {
                hovered,
                primary_pressed: i.pointer.button_pressed(PointerButton::Primary) && pressed_here,
                primary_down: i.pointer.button_down(PointerButton::Primary) && pressed_here,
                secondary_drag: i.pointer.button_down(PointerButton::Secondary) && pressed_here,
            };
            self.controls.input(i, pointer, tick)
        });
        let events = self.session.update(input).to_vec();
        self.controls.ticked(self.session.client().tick());
        for event in events {
            match event {
                ClientEvent::Shot(shot) => {
                    self.shots_fired += 1;
                    let geometry = self.session.client().geometry();
                    let distance = geometry
                        .and_then(|g| {
                            g.cast_ray(&shot.ray.origin, &shot.ray.direction, shot.ray.range)
                        })
                        .unwrap_or(shot.ray.range);
                    let forward = shot.ray.direction;
                    let right = forward.cross(&nalgebra::Vector3::y()).normalize();
                    let from = shot.ray.origin + forward * MUZZLE.0 + right * MUZZLE.1
                        - nalgebra::Vector3::y() * MUZZLE.2;
                    self.tracers.push(Tracer {
                        from,
                        to: shot.ray.origin + forward * distance,
                        life: TRACER_SECONDS,
                        color: arena_view::OWN_TRACER,
                        own: true,
                    });
                }
                ClientEvent::RemoteShot { shot, .. } => {
                    self.remote_shots += 1;
                    self.tracers.push(Tracer {
                        from: shot.origin() + shot.direction() * MUZZLE.0,
                        to: shot.end(),
                        life: TRACER_SECONDS,
                        color: player_color(shot.shooter.0),
                        own: false,
                    });
                }
                ClientEvent::HitConfirmed(n) => {
                    self.hits_confirmed += u64::from(n);
                    self.hit_marker = HIT_MARKER_SECONDS;
                }
                _ => {}
            }
        }
        self.hit_marker = (self.hit_marker - dt).max(0.0);
        for t in &mut self.tracers {
            t.life -= dt;
        }
        self.tracers.retain(|t| t.life > 0.0);
        if self.arena.is_none()
            && let Some(data) = self.session.client().match_data()
        {
            self.arena = Some(Arena {
                solids: arena_view::arena_solids(&data.map),
                floor_half: arena_view::floor_half(&data.map),
            });
        }
        if self.controls.captured() != self.grabbed {
            self.grabbed = self.controls.captured();
            let (grab, visible) = if self.grabbed {
                (CursorGrab::Confined, false)
            } else {
                (CursorGrab::None, true)
            };
            ui.ctx()
                .send_viewport_cmd(ViewportCommand::CursorGrab(grab));
            ui.ctx()
                .send_viewport_cmd(ViewportCommand::CursorVisible(visible));
        }
    }

    fn release_pointer(&mut self, ui: &Ui) {
        self.controls.release();
        if self.grabbed {
            self.grabbed = false;
            ui.ctx()
                .send_viewport_cmd(ViewportCommand::CursorGrab(CursorGrab::None));
            ui.ctx()
                .send_viewport_cmd(ViewportCommand::CursorVisible(true));
        }
    }

    /// The local player's health and ammo, once playing.
    fn vitals(&self) -> Option<Vitals> {
        let client = self.session.client();
        let (state, data) = (client.local_state()?, client.match_data()?);
        let rules = &data.rules;
        Some(Vitals {
            health: state.vitals.health,
            max_health: rules.vitals.max_health,
            ammo: state.weapon.ammo,
            magazine: rules.weapon.magazine,
            reloading: state.weapon.reload_remaining > 0,
            respawn_s: (!state.alive())
                .then(|| f32::from(state.vitals.respawn_in) / rules.tick_rate_hz.max(1) as f32),
        })
    }

    fn phase_text(&self) -> String {
        let client = self.session.client();
        let (phase, left) = client.match_phase();
        let hz = client.match_data().map_or(30, |d| d.rules.tick_rate_hz);
        hud::phase_text(phase, left, hz)
    }

    fn name_of(&self, slot: u8) -> String {
        self.session
            .client()
            .roster()
            .names
            .iter()
            .find(|(s, _)| *s == slot)
            .map_or_else(|| format!("player {slot}"), |(_, n)| n.clone())
    }

    fn title_bar(&self, ui: &mut Ui) {
        ui.horizontal(|ui| {
            let s = &self.session;
            let place = if s.is_local_match() {
                format!(
                    "Dedicated server · local match on port {}",
                    s.server().port()
                )
            } else {
                format!("Dedicated server · {}", s.server())
            };
            ui.label(RichText::new(place).strong());
            match s.status() {
                ShooterStatus::Connecting => {
                    ui.label(format!("Connecting to {}…", s.server()));
                }
                ShooterStatus::Playing | ShooterStatus::Ended(_) => {
                    ui.separator();
                    ui.label(self.phase_text());
                    if let Some(v) = self.vitals() {
                        ui.separator();
                        ui.label(hud::vitals_text(&v));
                    }
                }
            }
        });
    }

    /// The side panel; returns true when Leave was pressed.
    fn side_panel(&self, ui: &mut Ui) -> bool {
        let client = self.session.client();
        let local = client.slot();
        ui.heading("Scoreboard");
        let mut scores = client.scores();
        scores.sort_by(|a, b| b.1.kills.cmp(&a.1.kills).then(a.1.deaths.cmp(&b.1.deaths)));
        Grid::new("scoreboard").striped(true).show(ui, |ui| {
            ui.label("player");
            ui.label("kills");
            ui.label("deaths");
            ui.end_row();
            for (slot, line) in &scores {
                let mut name = self.name_of(slot.0);
                if Some(*slot) == local {
                    name.push_str(" (you)");
                }
                ui.colored_label(player_color(slot.0), name);
                ui.label(line.kills.to_string());
                ui.label(line.deaths.to_string());
                ui.end_row();
            }
        });
        ui.label(format!("{} players in the match", scores.len()));
        ui.separator();
        ui.label(self.phase_text());
        if let Some(results) = client.results() {
            let winner = results
                .winner
                .map_or_else(|| "nobody".to_owned(), |w| self.name_of(w));
            ui.label(RichText::new(format!("Results: {winner} wins")).strong());
        }
        ui.label(format!(
            "Shots {} · hits confirmed {}",
            self.shots_fired, self.hits_confirmed
        ));
        let stats = client.stats();
        ui.label(format!(
            "RTT {:.0} ms · mispredictions {}",
            stats.rtt_s * 1000.0,
            stats.prediction.mispredictions
        ));
        if self.session.bots() > 0 {
            ui.label(format!("{} bots added by this viewer", self.session.bots()));
        }
        ui.separator();
        ui.label(
            "Click the view to capture the mouse (Esc releases it) or drag with the right button to look. \
             W/A/S/D move, left click fires, R reloads, Space jumps.",
        );
        ui.button("Leave").clicked()
    }

    /// The first-person view and the HUD over it.
    fn view(&mut self, ui: &mut Ui) {
        let (rect, _response) =
            ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        self.view_rect = Some(rect);
        let painter = ui.painter_at(rect);
        let client = self.session.client();
        let (Some(state), Some(data), Some(arena)) = (
            client.local_state(),
            client.match_data(),
            self.arena.as_ref(),
        ) else {
            painter.rect_filled(rect, 0.0, Color32::from_rgb(28, 32, 40));
            hud::paint_banner(
                &painter,
                rect,
                &format!("Connecting to {}…", self.session.server()),
            );
            return;
        };
        let body = &data.rules.body;
        let (yaw, pitch) = self.controls.view_angles();
        let clock = ui.input(|i| i.time);
        let feet = self
            .feet
            .at(clock, data.rules.tick_duration().as_secs_f64());
        let feet = if state.alive() {
            feet
        } else {
            state.position()
        };
        let eye = arena_view::eye_of(&feet, body);
        let camera = arena_view::first_person_camera(&eye, &arena_view::direction_of(yaw, pitch));
        let mut solids = arena.solids.clone();
        solids.extend(arena_view::cube_solids(
            &data.map,
            &client.cube_poses(self.session.now()),
        ));
        for (slot, pose) in client.remote_poses(self.session.now()) {
            if Some(slot) != client.slot() {
                solids.extend(arena_view::player_solids(slot, &pose, body));
            }
        }
        arena_view::paint(
            &painter,
            rect,
            &camera,
            arena.floor_half,
            &solids,
            &self.tracers,
        );
        hud::paint_crosshair(&painter, rect, self.hit_marker);
        if let Some(v) = self.vitals() {
            hud::paint_vitals(&painter, rect, &v);
        }
        let banner = match client.results() {
            Some(r) => format!(
                "Match over: {} wins",
                r.winner
                    .map_or_else(|| "nobody".to_owned(), |w| self.name_of(w))
            ),
            None => self.phase_text(),
        };
        hud::paint_banner(&painter, rect, &banner);
        let feed: Vec<(String, Color32)> = client
            .kill_feed()
            .map(|k| {
                let victim = self.name_of(k.victim.0);
                match k.killer {
                    Some(killer) => (
                        format!("{} killed {victim}", self.name_of(killer.0)),
                        player_color(killer.0),
                    ),
                    None => (format!("{victim} fell"), Color32::LIGHT_GRAY),
                }
            })
            .collect();
        hud::paint_kill_feed(&painter, rect, &feed);
        self.camera = Some(camera);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_camera_glides_over_one_tick_and_jumps_on_respawn() {
        let mut g = Glide::default();
        let tick = 1.0 / 30.0;
        g.update(Point3::new(5.0, 0.0, 5.0), 1.0, tick);
        assert_eq!(
            g.at(1.0, tick),
            Point3::new(5.0, 0.0, 5.0),
            "the first position jumps"
        );
        g.update(Point3::new(5.2, 0.0, 5.0), 2.0, tick);
        let half = g.at(2.0 + tick / 2.0, tick);
        assert!((half.x - 5.1).abs() < 1e-4, "{half:?}");
        assert_eq!(g.at(3.0, tick), Point3::new(5.2, 0.0, 5.0));
        g.update(Point3::new(-10.0, 0.0, 0.0), 4.0, tick);
        assert_eq!(
            g.at(4.0, tick),
            Point3::new(-10.0, 0.0, 0.0),
            "a respawn jumps"
        );
    }
}
