//! The session screen: the 3D view in the centre, players, authority counts, bots, link conditioner and Leave
//! on the side, live network plots below. Mouse input on the view becomes grab/move/throw requests.

use std::time::Duration;

use egui::{Panel, PointerButton, Pos2, Rect, RichText, ScrollArea, Sense, Slider, Ui};
use nalgebra::{Point3, Vector3};

use crate::camera::OrbitCamera;
use crate::network_panel::{NetworkHistory, show_authority_counts};
use crate::palette::player_color;
use crate::picking::{ThrowTracker, pick_nearest, ray_plane};
use crate::render3d::{self, Scene};
use crate::session::{
    BodyId, BotKind, ConditionerSettings, SessionHandle, SessionKind, SessionStatus,
};
use crate::start_screen::ERROR_COLOR;

/// A cube being dragged by the local player.
#[derive(Debug, Clone, Copy)]
struct Drag {
    /// Offset from the point under the cursor to the cube's centre, kept through the drag.
    offset: Vector3<f32>,
    /// A point of the plane the cube moves on (through the grab point, facing the camera).
    plane_point: Point3<f32>,
    /// That plane's normal.
    plane_normal: Vector3<f32>,
}

/// Why the session screen closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionExit {
    /// The person pressed Leave.
    Left,
    /// The session ended by itself, with the reason.
    Ended(String),
}

/// The session screen and the session it shows.
pub struct SessionScreen {
    handle: Box<dyn SessionHandle>,
    camera: OrbitCamera,
    drag: Option<Drag>,
    throw: ThrowTracker,
    hovered: Option<BodyId>,
    conditioner: ConditionerSettings,
    message: Option<String>,
    history: NetworkHistory,
    view_rect: Option<Rect>,
    /// egui's clock (seconds) when the screen was first drawn: session time counts from there.
    opened_at: Option<f64>,
    /// Whether the camera and floor were fitted to the scene (once, when its bodies first arrive).
    framed: bool,
    /// Half the side of the floor drawn, metres: reaches past every body and avatar of the first frame.
    floor_half: f32,
}

impl SessionScreen {
    /// Show `handle`.
    pub fn new(handle: Box<dyn SessionHandle>) -> Self {
        Self {
            handle,
            camera: OrbitCamera::default(),
            drag: None,
            throw: ThrowTracker::default(),
            hovered: None,
            conditioner: ConditionerSettings::default(),
            message: None,
            history: NetworkHistory::default(),
            view_rect: None,
            opened_at: None,
            framed: false,
            floor_half: render3d::MIN_FLOOR_HALF,
        }
    }

    /// The session shown.
    pub fn handle(&self) -> &dyn SessionHandle {
        self.handle.as_ref()
    }

    /// The camera the 3D view is seen through.
    pub fn camera(&self) -> &OrbitCamera {
        &self.camera
    }

    /// Where the 3D view was drawn on the last frame, in egui points.
    pub fn view_rect(&self) -> Option<Rect> {
        self.view_rect
    }

    /// The last message shown to the person (a refused grab, bot or conditioner change).
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }

    /// Pump the session and draw the screen; returns how it closed, if it did.
    pub fn show(&mut self, ui: &mut Ui) -> Option<SessionExit> {
        let clock = ui.input(|i| i.time);
        let opened_at = *self.opened_at.get_or_insert(clock);
        let now = Duration::from_secs_f64((clock - opened_at).max(0.0));
        self.handle.update();
        if let Some(notice) = self.handle.take_notice() {
            self.message = Some(notice);
        }
        if let SessionStatus::Ended(reason) = self.handle.status() {
            return Some(SessionExit::Ended(reason));
        }
        if !self.framed && !self.handle.bodies().is_empty() {
            let bodies = self.handle.bodies().iter().map(|b| b.position);
            let heads = self
                .handle
                .avatars()
                .iter()
                .map(|a| Point3::from(a.head.translation.vector));
            let (radius, extent) = bodies.clone().fold((0.0f32, 0.0f32), |(r, e), p| {
                (r.max(p.x.hypot(p.z)), e.max(p.x.abs()).max(p.z.abs()))
            });
            let extent = heads.fold(extent, |e, p| e.max(p.x.abs()).max(p.z.abs()));
            self.camera.fit(radius);
            self.floor_half = (extent + 1.5).ceil().max(render3d::MIN_FLOOR_HALF);
            self.framed = true;
        }
        self.history.record(now, &self.handle.link_stats());
        ui.ctx().request_repaint();

        Panel::top("session_title").show(ui, |ui| {
            ui.label(RichText::new(self.handle.title()).strong());
            if self.handle.status() == SessionStatus::Connecting {
                ui.label(match self.handle.kind() {
                    SessionKind::Guest => "Connecting… waiting for the host to let this viewer in.",
                    SessionKind::Host => "Starting…",
                });
            }
        });
        let mut exit = None;
        Panel::right("session_side")
            .default_size(260.0)
            .show(ui, |ui| {
                ScrollArea::vertical().show(ui, |ui| {
                    if self.side_panel(ui) {
                        self.handle.leave();
                        exit = Some(SessionExit::Left);
                    }
                });
            });
        Panel::bottom("network")
            .resizable(true)
            .default_size(220.0)
            .show(ui, |ui| {
                ScrollArea::vertical().show(ui, |ui| {
                    ui.heading("Network (last 30 s)");
                    self.history.show(ui, now);
                });
            });
        egui::CentralPanel::no_frame().show(ui, |ui| self.view_3d(ui, now));
        exit
    }

    /// The side panel; returns true when Leave was pressed.
    fn side_panel(&mut self, ui: &mut Ui) -> bool {
        ui.heading("Players");
        for p in self.handle.players() {
            let mut text = format!("{} · {}", p.id, p.name);
            if let Some(bot) = p.bot {
                text.push_str(&format!(" (bot: {})", bot.name()));
            }
            if p.is_local {
                text.push_str(" (you)");
            }
            ui.colored_label(player_color(p.id), text);
        }
        ui.separator();
        ui.heading("Cubes by authority");
        show_authority_counts(ui, self.handle.bodies());
        ui.separator();
        ui.heading("Add a bot");
        ui.horizontal(|ui| {
            for kind in BotKind::ALL {
                if ui.button(kind.name()).clicked() {
                    self.message = self.handle.add_bot(kind).err().map(|e| e.to_string());
                }
            }
        });
        ui.separator();
        ui.heading("Link conditioner");
        ui.label("Applied to everything this peer sends.");
        let before = self.conditioner;
        let c = &mut self.conditioner;
        ui.add(Slider::new(&mut c.latency_ms, 0..=500).text("latency ms"));
        ui.add(Slider::new(&mut c.jitter_ms, 0..=200).text("jitter ms"));
        ui.add(Slider::new(&mut c.loss_percent, 0.0..=50.0).text("loss %"));
        ui.add(Slider::new(&mut c.duplicate_percent, 0.0..=50.0).text("duplication %"));
        if self.conditioner != before {
            self.message = self
                .handle
                .apply_conditioner(self.conditioner)
                .err()
                .map(|e| e.to_string());
        }
        if let Some(m) = &self.message {
            ui.colored_label(ERROR_COLOR, m);
        }
        ui.separator();
        ui.label("Drag a cube to move it, release to throw. Right-drag or Shift+drag turns the camera; scroll zooms.");
        ui.button("Leave").clicked()
    }

    /// The 3D view and its mouse handling.
    fn view_3d(&mut self, ui: &mut Ui, now: Duration) {
        let (rect, response) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        self.view_rect = Some(rect);
        let shift = ui.input(|i| i.modifiers.shift);

        if response.drag_started_by(PointerButton::Primary) && !shift {
            let origin = ui.input(|i| i.pointer.press_origin());
            if let Some(origin) = origin {
                self.start_drag(origin, rect, now);
            }
        }
        if let Some(drag) = self.drag {
            if response.drag_stopped() || !response.dragged() {
                self.handle.release(self.throw.velocity());
                self.drag = None;
                self.throw.clear();
            } else if let Some(pos) = response.interact_pointer_pos() {
                let ray = self.camera.ray_through(pos, rect);
                if let Some(hit) = ray_plane(&ray, &drag.plane_point, &drag.plane_normal) {
                    let target = hit + drag.offset;
                    self.handle.move_held(target);
                    self.throw.record(now, target);
                }
            }
        } else if response.dragged_by(PointerButton::Secondary)
            || response.dragged_by(PointerButton::Primary)
        {
            self.camera.orbit(response.drag_delta());
        }
        if response.hovered() {
            let scroll = ui.input(|i| i.smooth_scroll_delta.y);
            if scroll != 0.0 {
                self.camera.zoom(scroll);
            }
        }
        self.hovered = response
            .hover_pos()
            .and_then(|p| self.pick(p, rect))
            .map(|(id, _)| id);

        let scene = Scene {
            bodies: self.handle.bodies(),
            avatars: self.handle.avatars(),
            hovered: self.hovered,
            floor_half: self.floor_half,
            level: self.handle.level(),
        };
        render3d::paint(&ui.painter_at(rect), rect, &self.camera, &scene);
    }

    fn pick(&self, screen: Pos2, rect: Rect) -> Option<(BodyId, f32)> {
        pick_nearest(&self.camera.ray_through(screen, rect), self.handle.bodies())
    }

    /// Grab the cube under `screen`, if any; a press on empty space leaves the drag to the camera.
    fn start_drag(&mut self, screen: Pos2, rect: Rect, now: Duration) {
        let ray = self.camera.ray_through(screen, rect);
        let Some((id, t)) = pick_nearest(&ray, self.handle.bodies()) else {
            return;
        };
        let Some(center) = self
            .handle
            .bodies()
            .iter()
            .find(|b| b.id == id)
            .map(|b| b.position)
        else {
            return;
        };
        match self.handle.grab(id) {
            Ok(()) => {
                let hit = ray.at(t);
                self.drag = Some(Drag {
                    offset: center - hit,
                    plane_point: hit,
                    plane_normal: -self.camera.forward(),
                });
                self.throw.clear();
                self.throw.record(now, center);
                self.message = None;
            }
            Err(e) => self.message = Some(e.to_string()),
        }
    }
}
