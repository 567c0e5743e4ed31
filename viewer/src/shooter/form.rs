//! The start screen's "Dedicated server" section: start a local match (with bots) or connect to a server by
//! address, with the shared passphrase the connect token is issued from.

use std::net::SocketAddr;

use egui::{DragValue, TextEdit, Ui};

use crate::input::{check_port_free, parse_address, parse_port};
use crate::start_screen::ERROR_COLOR;

/// Most bots the form offers (a match holds 10 players by default, the local one included).
pub const MAX_BOTS: u8 = 9;

/// Where the shooter client connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedicatedTarget {
    /// Start a match in this process listening on `port` (all interfaces) and join it over 127.0.0.1.
    Local {
        /// The UDP port the match listens on (checked free when the form was submitted).
        port: u16,
    },
    /// Join a match already running at `address`.
    Remote {
        /// The match's address.
        address: SocketAddr,
    },
}

/// A validated request to play the shooter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedicatedConfig {
    /// Local match or remote server.
    pub target: DedicatedTarget,
    /// Passphrase the server's token secret derives from (the server's `--secret`).
    pub passphrase: String,
    /// The player's name (it keys the slot for reconnects).
    pub name: String,
    /// Headless bots to add to the match.
    pub bots: u8,
}

/// The form's fields and its error line.
#[derive(Debug, Clone)]
pub struct DedicatedForm {
    /// Text of the local match's port field.
    pub port: String,
    /// Text of the remote server's address field.
    pub address: String,
    /// Shared passphrase.
    pub passphrase: String,
    /// Player name.
    pub name: String,
    /// Bots to add.
    pub bots: u8,
    /// Error under the form.
    pub error: Option<String>,
}

impl Default for DedicatedForm {
    fn default() -> Self {
        Self {
            port: "40100".into(),
            address: "127.0.0.1:40000".into(),
            passphrase: "physync-dev".into(),
            name: "player".into(),
            bots: 3,
            error: None,
        }
    }
}

impl DedicatedForm {
    /// Validate the form for a local match.
    pub fn local_config(&self) -> Result<DedicatedConfig, String> {
        let port = parse_port(&self.port).map_err(|e| e.to_string())?;
        check_port_free(port).map_err(|e| e.to_string())?;
        self.config(DedicatedTarget::Local { port })
    }

    /// Validate the form for a remote server.
    pub fn remote_config(&self) -> Result<DedicatedConfig, String> {
        let address = parse_address(&self.address).map_err(|e| e.to_string())?;
        self.config(DedicatedTarget::Remote { address })
    }

    fn config(&self, target: DedicatedTarget) -> Result<DedicatedConfig, String> {
        let name = self.name.trim();
        if name.is_empty() || name.len() > physync_engine::shooter_net::token::MAX_NAME_BYTES {
            return Err("enter a player name of 1 to 16 bytes".into());
        }
        Ok(DedicatedConfig {
            target,
            passphrase: self.passphrase.clone(),
            name: name.to_owned(),
            bots: self.bots.min(MAX_BOTS),
        })
    }

    /// Draw the section; returns the validated request when a button was pressed with good input.
    pub fn show(&mut self, ui: &mut Ui) -> Option<DedicatedConfig> {
        let mut result = None;
        ui.heading("Dedicated server");
        ui.label("The competitive shooter: an authoritative server, you play first person.");
        ui.horizontal(|ui| {
            let label = ui.label("Player name");
            ui.add(TextEdit::singleline(&mut self.name).desired_width(120.0))
                .labelled_by(label.id);
        });
        ui.horizontal(|ui| {
            let label = ui.label("Passphrase");
            ui.add(TextEdit::singleline(&mut self.passphrase).desired_width(160.0))
                .labelled_by(label.id);
        });
        ui.horizontal(|ui| {
            let label = ui.label("Bots");
            ui.add(DragValue::new(&mut self.bots).range(0..=MAX_BOTS))
                .labelled_by(label.id);
        });
        ui.horizontal(|ui| {
            let label = ui.label("Server port");
            ui.add(TextEdit::singleline(&mut self.port).desired_width(80.0))
                .labelled_by(label.id);
            if ui.button("Start dedicated server").clicked() {
                result = Some(self.local_config());
            }
        });
        ui.horizontal(|ui| {
            let label = ui.label("Server address");
            ui.add(TextEdit::singleline(&mut self.address).desired_width(160.0))
                .labelled_by(label.id);
            if ui.button("Connect").clicked() {
                result = Some(self.remote_config());
            }
        });
        match result {
            Some(Ok(config)) => {
                self.error = None;
                return Some(config);
            }
            Some(Err(e)) => self.error = Some(e),
            None => {}
        }
        if let Some(e) = &self.error {
            ui.colored_label(ERROR_COLOR, e);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_validates_address_port_and_name() {
        let mut form = DedicatedForm {
            address: "nowhere".into(),
            ..DedicatedForm::default()
        };
        assert!(
            form.remote_config()
                .unwrap_err()
                .contains("is not an address")
        );
        form.address = "127.0.0.1:4000".into();
        let config = form.remote_config().unwrap();
        assert_eq!(
            config.target,
            DedicatedTarget::Remote {
                address: "127.0.0.1:4000".parse().unwrap()
            }
        );
        form.port = "0".into();
        assert!(form.local_config().unwrap_err().contains("is not a port"));
        form.name = "a name far longer than sixteen".into();
        assert!(form.remote_config().unwrap_err().contains("player name"));
    }

    #[test]
    fn a_port_in_use_is_refused_for_a_local_match() {
        let held = std::net::UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        let form = DedicatedForm {
            port: port.to_string(),
            ..DedicatedForm::default()
        };
        assert!(form.local_config().unwrap_err().contains("cannot be used"));
    }
}
