//! The eframe application: the start screen or a session screen, and the `--screenshot` job.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use egui::{CentralPanel, ColorImage, Ui, ViewportCommand};

use crate::launcher::{LaunchError, SessionLauncher};
use crate::offline_preview::OfflinePreview;
use crate::screenshot_check::inspect;
use crate::session::SessionHandle;
use crate::session_screen::{SessionExit, SessionScreen};
use crate::shooter::form::DedicatedConfig;
use crate::shooter::screen::{ShooterExit, ShooterScreen};
use crate::shooter::session::{ShooterLaunchError, ShooterSession};
use crate::start_screen::{StartAction, StartScreen};

/// Which screen is up.
enum Screen {
    Start(StartScreen),
    Session(Box<SessionScreen>),
    Shooter(Box<ShooterScreen>),
}

/// Frames drawn before the screenshot is requested, so layout and fonts have settled.
const SCREENSHOT_AFTER_FRAMES: u32 = 5;
/// Frames after which a screenshot that never arrived counts as failed.
const SCREENSHOT_GIVE_UP_FRAMES: u32 = 600;

/// The outcome of a `--screenshot` run (a summary of the frame, or what is wrong with it), read by `main`
/// after the window closed.
pub type ScreenshotOutcome = Arc<Mutex<Option<Result<String, String>>>>;

/// Takes one screenshot of the window, writes it as PNG and closes the window.
struct ScreenshotJob {
    path: PathBuf,
    frames: u32,
    requested: bool,
    image: Arc<Mutex<Option<Arc<ColorImage>>>>,
    outcome: ScreenshotOutcome,
}

/// The physync viewer application.
pub struct ViewerApp {
    screen: Screen,
    /// The start form as it was when the last session started, shown again when it ends.
    last_form: StartScreen,
    launcher: Option<Box<dyn SessionLauncher>>,
    screenshot: Option<ScreenshotJob>,
}

impl ViewerApp {
    /// The app on its start screen. Without a launcher, Host and Join explain that they are not available.
    pub fn new(launcher: Option<Box<dyn SessionLauncher>>) -> Self {
        Self {
            screen: Screen::Start(StartScreen::default()),
            last_form: StartScreen::default(),
            launcher,
            screenshot: None,
        }
    }

    /// The app showing `session` straight away (its start form is the default one).
    pub fn with_session(session: Box<dyn SessionHandle>) -> Self {
        let mut app = Self::new(None);
        app.screen = Screen::Session(Box::new(SessionScreen::new(session)));
        app
    }

    /// Once a few frames are drawn, write the window to the PNG at `path`, check the frame
    /// ([`crate::screenshot_check`]) and close the window; the result lands in `outcome`.
    pub fn take_screenshot(mut self, path: PathBuf, outcome: ScreenshotOutcome) -> Self {
        self.screenshot = Some(ScreenshotJob {
            path,
            frames: 0,
            requested: false,
            image: Arc::default(),
            outcome,
        });
        self
    }

    /// The app playing the dedicated-server shooter as `config` asks, straight away.
    pub fn with_dedicated(config: &DedicatedConfig) -> Result<Self, ShooterLaunchError> {
        let mut app = Self::new(None);
        app.screen = Screen::Shooter(Box::new(ShooterScreen::new(ShooterSession::start(config)?)));
        Ok(app)
    }

    /// The start screen, when it is up.
    pub fn start_screen(&self) -> Option<&StartScreen> {
        match &self.screen {
            Screen::Start(s) => Some(s),
            _ => None,
        }
    }

    /// The session screen, when it is up.
    pub fn session_screen(&self) -> Option<&SessionScreen> {
        match &self.screen {
            Screen::Session(s) => Some(s),
            _ => None,
        }
    }

    /// The shooter screen, when it is up.
    pub fn shooter_screen(&self) -> Option<&ShooterScreen> {
        match &self.screen {
            Screen::Shooter(s) => Some(s),
            _ => None,
        }
    }

    /// Draw the current screen and switch screens as asked.
    pub fn show(&mut self, ui: &mut Ui) {
        let next = match &mut self.screen {
            Screen::Start(start) => {
                let action = CentralPanel::default().show(ui, |ui| start.show(ui)).inner;
                action.and_then(|a| self.launch(a))
            }
            Screen::Session(session) => session.show(ui).map(|exit| {
                let mut start = self.last_form.clone();
                if let SessionExit::Ended(reason) = exit {
                    start.notice = Some(format!("The session ended: {reason}"));
                }
                Screen::Start(start)
            }),
            Screen::Shooter(shooter) => shooter.show(ui).map(|exit| {
                let mut start = self.last_form.clone();
                if let ShooterExit::Ended(reason) = exit {
                    start.notice = Some(format!("The dedicated-server session ended: {reason}"));
                }
                Screen::Start(start)
            }),
        };
        if let Some(next) = next {
            self.screen = next;
        }
    }

    /// Start what the start screen asked for, or put the reason it cannot start under the form.
    fn launch(&mut self, action: StartAction) -> Option<Screen> {
        if let Screen::Start(form) = &self.screen {
            self.last_form = form.clone();
        }
        let result = match (&action, self.launcher.as_mut()) {
            (StartAction::Preview(scene), _) => {
                return Some(Screen::Session(Box::new(SessionScreen::new(Box::new(
                    OfflinePreview::new(*scene),
                )))));
            }
            (StartAction::Dedicated(config), _) => {
                return match ShooterSession::start(config) {
                    Ok(session) => Some(Screen::Shooter(Box::new(ShooterScreen::new(session)))),
                    Err(e) => {
                        if let Screen::Start(start) = &mut self.screen {
                            start.dedicated.error = Some(e.to_string());
                        }
                        None
                    }
                };
            }
            (StartAction::Host(config), Some(l)) => l.host(config),
            (StartAction::Join(config), Some(l)) => l.join(config),
            (StartAction::Host(_), None) => Err(LaunchError::NotAvailable("hosting")),
            (StartAction::Join(_), None) => Err(LaunchError::NotAvailable("joining")),
        };
        match result {
            Ok(handle) => Some(Screen::Session(Box::new(SessionScreen::new(handle)))),
            Err(e) => {
                if let Screen::Start(start) = &mut self.screen {
                    match action {
                        StartAction::Join(_) => start.join_error = Some(e.to_string()),
                        _ => start.host_error = Some(e.to_string()),
                    }
                }
                None
            }
        }
    }

    /// Advance the screenshot job by one frame.
    fn screenshot_frame(&mut self, ui: &Ui) {
        let Some(job) = &mut self.screenshot else {
            return;
        };
        job.frames += 1;
        ui.ctx().request_repaint();
        let captured = job
            .image
            .lock()
            .map(|mut slot| slot.take())
            .unwrap_or_default();
        let result = if let Some(image) = captured {
            let bodies = match &self.screen {
                Screen::Session(session) => session.handle().bodies().to_vec(),
                Screen::Start(_) | Screen::Shooter(_) => Vec::new(),
            };
            Some(write_png(&image, &job.path).and_then(|()| {
                let report = inspect(&image, &bodies);
                let summary = format!(
                    "wrote {} ({}x{}, {} colours, pixels by authority {:?})",
                    job.path.display(),
                    image.size[0],
                    image.size[1],
                    report.distinct_colors,
                    report.authority_pixels
                );
                match report.problems().as_slice() {
                    [] => Ok(summary),
                    problems => Err(format!("{summary}: {}", problems.join("; "))),
                }
            }))
        } else if job.frames > SCREENSHOT_GIVE_UP_FRAMES {
            Some(Err(format!(
                "no screenshot arrived after {SCREENSHOT_GIVE_UP_FRAMES} frames"
            )))
        } else {
            // The shooter's frame is worth taking once an opponent stands in view.
            let ready = match &self.screen {
                Screen::Shooter(shooter) => shooter.shows_an_opponent(),
                Screen::Start(_) | Screen::Session(_) => true,
            };
            if job.frames >= SCREENSHOT_AFTER_FRAMES && ready && !job.requested {
                job.requested = true;
                let slot = Arc::clone(&job.image);
                let ctx = ui.ctx().clone();
                ui.ctx().request_screenshot(move |image| {
                    if let Ok(mut slot) = slot.lock() {
                        *slot = Some(image);
                    }
                    ctx.request_repaint();
                });
            }
            None
        };
        if let Some(result) = result {
            if let Ok(mut outcome) = job.outcome.lock() {
                *outcome = Some(result);
            }
            self.screenshot = None;
            ui.ctx().send_viewport_cmd(ViewportCommand::Close);
        }
    }
}

/// Write an egui image as an RGBA PNG.
fn write_png(image: &ColorImage, path: &std::path::Path) -> Result<(), String> {
    let [w, h] = image.size;
    let bytes: Vec<u8> = image
        .pixels
        .iter()
        .flat_map(|c| c.to_srgba_unmultiplied())
        .collect();
    image::save_buffer(
        path,
        &bytes,
        w as u32,
        h as u32,
        image::ExtendedColorType::Rgba8,
    )
    .map_err(|e| format!("could not write {}: {e}", path.display()))
}

impl eframe::App for ViewerApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        self.show(ui);
        self.screenshot_frame(ui);
    }
}
