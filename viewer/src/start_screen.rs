//! The start screen: host a session, join one, or play on a dedicated server; bad input is explained in place.

use egui::{Color32, ComboBox, DragValue, Frame, RichText, TextEdit, Ui};

use crate::input::{check_port_free, parse_address, parse_port};
use crate::launcher::{HostConfig, JoinConfig};
use crate::shooter::form::{DedicatedConfig, DedicatedForm};
use physync_engine::connection::new_join_code;
use physync_engine::world::avatar::MAX_PLAYERS;
use physync_engine::world::scene::SceneKind;
use physync_engine::world::scene_file::load_scene;

/// Colour of error messages.
pub const ERROR_COLOR: Color32 = Color32::from_rgb(255, 110, 100);

/// What the person asked for on the start screen, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum StartAction {
    /// Host a session.
    Host(HostConfig),
    /// Join a session.
    Join(JoinConfig),
    /// Play the dedicated-server shooter.
    Dedicated(DedicatedConfig),
}

/// The start screen's form state and its messages.
#[derive(Debug, Clone)]
pub struct StartScreen {
    /// Text of the listen-port field.
    pub host_port: String,
    /// The scene to host.
    pub scene: SceneKind,
    /// Text of the scene-file field: a RON scene file hosted instead of the named scene when not empty.
    pub scene_file: String,
    /// Maximum number of players, host included.
    pub max_players: u8,
    /// Text of the Host form's join-code field: the code guests must give, or empty for an open session.
    pub host_join_code: String,
    /// Text of the join-address field.
    pub join_address: String,
    /// Text of the join-code field: the code the host shows, or empty when it asks for none.
    pub join_code: String,
    /// Error under the Host form.
    pub host_error: Option<String>,
    /// Error under the Join form.
    pub join_error: Option<String>,
    /// A notice at the top (for example why the last session ended).
    pub notice: Option<String>,
    /// The Dedicated server section.
    pub dedicated: Box<DedicatedForm>,
}

impl Default for StartScreen {
    fn default() -> Self {
        Self {
            host_port: "40000".into(),
            scene: SceneKind::Table,
            scene_file: String::new(),
            max_players: 4,
            host_join_code: String::new(),
            join_address: "127.0.0.1:40000".into(),
            join_code: String::new(),
            host_error: None,
            join_error: None,
            notice: None,
            dedicated: Box::default(),
        }
    }
}

/// Width of the centred form column, points.
const FORM_WIDTH: f32 = 460.0;

/// A framed section of the form, as wide as the column.
fn section(ui: &mut Ui, add_contents: impl FnOnce(&mut Ui)) {
    Frame::group(ui.style()).show(ui, |ui| {
        ui.set_width(ui.available_width());
        add_contents(ui);
    });
    ui.add_space(8.0);
}

/// A labelled join-code text field, empty meaning no code.
fn code_field(ui: &mut Ui, label: &str, text: &mut String) {
    let label = ui.label(label);
    ui.add(
        TextEdit::singleline(text)
            .hint_text("none")
            .desired_width(120.0),
    )
    .labelled_by(label.id);
}

/// A join-code field's text without surrounding blanks; `None` when nothing is left.
fn trimmed_code(text: &str) -> Option<String> {
    let code = text.trim();
    (!code.is_empty()).then(|| code.to_owned())
}

/// Smallest and largest session size offered (the VR sample's sessions had 4 players, the cores' limit).
const PLAYER_RANGE: std::ops::RangeInclusive<u8> = 2..=MAX_PLAYERS as u8;

impl StartScreen {
    /// Validate the Host form.
    pub fn host_action(&self) -> Result<StartAction, String> {
        let port = parse_port(&self.host_port).map_err(|e| e.to_string())?;
        check_port_free(port).map_err(|e| e.to_string())?;
        let scene = match self.scene_file.trim() {
            "" => self.scene.spec(),
            path => load_scene(std::path::Path::new(path)).map_err(|e| e.to_string())?,
        };
        Ok(StartAction::Host(HostConfig {
            port,
            scene,
            max_players: self.max_players,
            join_code: trimmed_code(&self.host_join_code),
        }))
    }

    /// Validate the Join form.
    pub fn join_action(&self) -> Result<StartAction, String> {
        let address = parse_address(&self.join_address).map_err(|e| e.to_string())?;
        Ok(StartAction::Join(JoinConfig {
            address,
            join_code: trimmed_code(&self.join_code),
        }))
    }

    /// Draw the screen; returns the validated action when a button was pressed with good input.
    pub fn show(&mut self, ui: &mut Ui) -> Option<StartAction> {
        let width = FORM_WIDTH.min(ui.available_width());
        let margin = (ui.available_width() - width) / 2.0;
        ui.horizontal_top(|ui| {
            ui.add_space(margin);
            ui.vertical(|ui| {
                ui.set_width(width);
                self.form(ui)
            })
            .inner
        })
        .inner
    }

    /// The form column.
    fn form(&mut self, ui: &mut Ui) -> Option<StartAction> {
        let mut action = None;
        ui.vertical_centered(|ui| {
            ui.add_space(16.0);
            ui.heading("physync");
            ui.label("Rigid-body physics kept in sync between players over UDP.");
        });
        if let Some(notice) = &self.notice {
            ui.separator();
            ui.label(RichText::new(notice).strong());
        }
        ui.separator();

        section(ui, |ui| {
            ui.heading("Host");
            ui.horizontal(|ui| {
                let label = ui.label("Listen port");
                ui.add(TextEdit::singleline(&mut self.host_port).desired_width(80.0))
                    .labelled_by(label.id);
            });
            ComboBox::from_label("Scene")
                .selected_text(self.scene.name())
                .show_ui(ui, |ui| {
                    for scene in SceneKind::ALL {
                        ui.selectable_value(&mut self.scene, scene, scene.name());
                    }
                });
            ui.horizontal(|ui| {
                let label = ui.label("Scene file");
                ui.add(
                    TextEdit::singleline(&mut self.scene_file)
                        .hint_text("examples/scenes/playground.ron")
                        .desired_width(260.0),
                )
                .labelled_by(label.id);
            });
            ui.horizontal(|ui| {
                let label = ui.label("Max players");
                ui.add(DragValue::new(&mut self.max_players).range(PLAYER_RANGE))
                    .labelled_by(label.id);
            });
            ui.horizontal(|ui| {
                code_field(ui, "Require join code", &mut self.host_join_code);
                if ui.button("New code").clicked() {
                    self.host_join_code = new_join_code();
                }
            });
            if ui.button("Host").clicked() {
                match self.host_action() {
                    Ok(a) => action = Some(a),
                    Err(e) => self.host_error = Some(e),
                }
            }
            if let Some(e) = &self.host_error {
                ui.colored_label(ERROR_COLOR, e);
            }
        });

        section(ui, |ui| {
            ui.heading("Join");
            ui.horizontal(|ui| {
                let label = ui.label("Host address");
                ui.add(TextEdit::singleline(&mut self.join_address).desired_width(200.0))
                    .labelled_by(label.id);
            });
            ui.horizontal(|ui| code_field(ui, "Join code", &mut self.join_code));
            if ui.button("Join").clicked() {
                match self.join_action() {
                    Ok(a) => action = Some(a),
                    Err(e) => self.join_error = Some(e),
                }
            }
            if let Some(e) = &self.join_error {
                ui.colored_label(ERROR_COLOR, e);
            }
        });

        section(ui, |ui| {
            if let Some(config) = self.dedicated.show(ui) {
                action = Some(StartAction::Dedicated(config));
            }
        });
        if action.is_some() {
            self.host_error = None;
            self.join_error = None;
            self.notice = None;
        }
        action
    }
}
