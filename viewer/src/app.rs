//! The eframe application: the start screen, a session screen or the shooter screen, and the `--screenshot` job.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use egui::{CentralPanel, ColorImage, Ui, ViewportCommand};

use crate::launcher::SessionLauncher;
use crate::screenshot_check::inspect;
use crate::session::{BodyView, SessionHandle};
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
/// Seconds after which a screenshot that never came right counts as failed.
const SCREENSHOT_GIVE_UP: Duration = Duration::from_secs(120);
/// Frames a fresh attempt waits after a captured frame failed its check (a cube in flight hid a colour).
const SCREENSHOT_RETRY_FRAMES: u32 = 20;

/// When a `--screenshot` run takes its picture.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScreenshotPlan {
    /// Let the session run this long first.
    pub settle: Duration,
    /// Wait until at least this many players other than the host have authority over some cube.
    pub min_authorities: usize,
}

/// The outcome of a `--screenshot` run (a summary of the frame, or what is wrong with it), read by `main`
/// after the window closed.
pub type ScreenshotOutcome = Arc<Mutex<Option<Result<String, String>>>>;

/// Takes one screenshot of the window, writes it as PNG and closes the window.
struct ScreenshotJob {
    path: PathBuf,
    plan: ScreenshotPlan,
    started: Option<f64>,
    frames: u32,
    /// The frame from which a capture may be requested.
    next_try: u32,
    /// The bodies as drawn in the frame whose capture was requested.
    requested: Option<Vec<BodyView>>,
    last_problem: Option<String>,
    image: Arc<Mutex<Option<Arc<ColorImage>>>>,
    outcome: ScreenshotOutcome,
}

/// The physync viewer application.
pub struct ViewerApp {
    screen: Screen,
    /// The start form as it was when the last session started, shown again when it ends.
    last_form: StartScreen,
    launcher: Box<dyn SessionLauncher>,
    screenshot: Option<ScreenshotJob>,
}

impl ViewerApp {
    /// The app on its start screen; Host and Join go through `launcher`.
    pub fn new(launcher: Box<dyn SessionLauncher>) -> Self {
        Self {
            screen: Screen::Start(StartScreen::default()),
            last_form: StartScreen::default(),
            launcher,
            screenshot: None,
        }
    }

    /// The app showing `session` straight away (its start form is the default one).
    pub fn with_session(
        launcher: Box<dyn SessionLauncher>,
        session: Box<dyn SessionHandle>,
    ) -> Self {
        let mut app = Self::new(launcher);
        app.screen = Screen::Session(Box::new(SessionScreen::new(session)));
        app
    }

    /// Once `plan` is met, write the window to the PNG at `path`, check the frame
    /// ([`crate::screenshot_check`]; a frame that fails is taken again, up to a time limit) and close the
    /// window; the result lands in `outcome`.
    pub fn take_screenshot(
        mut self,
        path: PathBuf,
        plan: ScreenshotPlan,
        outcome: ScreenshotOutcome,
    ) -> Self {
        self.screenshot = Some(ScreenshotJob {
            path,
            plan,
            started: None,
            frames: 0,
            next_try: SCREENSHOT_AFTER_FRAMES,
            requested: None,
            last_problem: None,
            image: Arc::default(),
            outcome,
        });
        self
    }

    /// The app playing the dedicated-server shooter as `config` asks, straight away.
    pub fn with_dedicated(
        launcher: Box<dyn SessionLauncher>,
        config: &DedicatedConfig,
    ) -> Result<Self, ShooterLaunchError> {
        let mut app = Self::new(launcher);
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
        let result = match &action {
            StartAction::Dedicated(config) => ShooterSession::start(config)
                .map(|session| Screen::Shooter(Box::new(ShooterScreen::new(session))))
                .map_err(|e| e.to_string()),
            StartAction::Host(config) => self
                .launcher
                .host(config)
                .map(session_screen)
                .map_err(|e| e.to_string()),
            StartAction::Join(config) => self
                .launcher
                .join(config)
                .map(session_screen)
                .map_err(|e| e.to_string()),
        };
        match result {
            Ok(screen) => Some(screen),
            Err(e) => {
                if let Screen::Start(start) = &mut self.screen {
                    match action {
                        StartAction::Join(_) => start.join_error = Some(e),
                        StartAction::Host(_) => start.host_error = Some(e),
                        StartAction::Dedicated(_) => start.dedicated.error = Some(e),
                    }
                }
                None
            }
        }
    }

    /// The bodies on screen now (none on the start screen).
    fn bodies_shown(&self) -> Vec<BodyView> {
        match &self.screen {
            Screen::Session(session) => session.handle().bodies().to_vec(),
            Screen::Start(_) | Screen::Shooter(_) => Vec::new(),
        }
    }

    /// Advance the screenshot job by one frame.
    fn screenshot_frame(&mut self, ui: &Ui) {
        let bodies = self.bodies_shown();
        let Some(job) = &mut self.screenshot else {
            return;
        };
        // The shooter's picture waits for an opponent in view: turn the view to one rather than hope.
        if let Screen::Shooter(shooter) = &mut self.screen
            && job.requested.is_none()
        {
            shooter.face_nearest_opponent();
        }
        job.frames += 1;
        ui.ctx().request_repaint();
        let clock = ui.input(|i| i.time);
        let elapsed = Duration::from_secs_f64((clock - *job.started.get_or_insert(clock)).max(0.0));
        let captured = job
            .image
            .lock()
            .map(|mut slot| slot.take())
            .unwrap_or_default();
        let result = if let Some(image) = captured {
            let drawn = job.requested.take().unwrap_or_default();
            let report = inspect(&image, &drawn);
            let summary = format!(
                "wrote {} ({}x{}, {} colours, pixels by authority {:?})",
                job.path.display(),
                image.size[0],
                image.size[1],
                report.distinct_colors,
                report.authority_pixels
            );
            match report.problems().as_slice() {
                [] => Some(write_png(&image, &job.path).map(|()| summary)),
                problems => {
                    job.last_problem = Some(format!("{summary}: {}", problems.join("; ")));
                    job.next_try = job.frames + SCREENSHOT_RETRY_FRAMES;
                    None
                }
            }
        } else if elapsed > SCREENSHOT_GIVE_UP {
            let why = job
                .last_problem
                .take()
                .unwrap_or_else(|| "the session never showed the cubes asked for".into());
            Some(Err(format!(
                "no good screenshot within {} s: {why}",
                SCREENSHOT_GIVE_UP.as_secs()
            )))
        } else {
            let authorities: BTreeSet<_> = bodies.iter().filter_map(|b| b.authority).collect();
            // The shooter's frame is worth taking once an opponent stands in view.
            let scene_ready = match &self.screen {
                Screen::Shooter(shooter) => shooter.shows_an_opponent(),
                Screen::Start(_) | Screen::Session(_) => true,
            };
            let ready = job.frames >= job.next_try
                && elapsed >= job.plan.settle
                && authorities.len() >= job.plan.min_authorities
                && scene_ready;
            if ready && job.requested.is_none() {
                job.requested = Some(bodies);
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

/// The session screen showing a launched session.
fn session_screen(handle: Box<dyn SessionHandle>) -> Screen {
    Screen::Session(Box::new(SessionScreen::new(handle)))
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
