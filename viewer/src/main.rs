//! `physync-viewer`: opens the start screen. With `--screenshot` it hosts a real session of `--scene` with
//! three bot guests, lets it run, renders the window to a PNG, checks the frame and exits (with
//! `--start-screen`, it takes the start screen instead). `--dedicated` plays the shooter in a local
//! dedicated-server match with bots straight away (with `--screenshot`, its first-person frame is taken).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use physync_engine::world::scene::SceneKind;
use physync_engine::world::scene_file::load_scene;
use physync_viewer::app::{ScreenshotOutcome, ScreenshotPlan, ViewerApp};
use physync_viewer::launcher::{CoreLauncher, HostConfig, SessionLauncher};
use physync_viewer::session::BotKind;
use physync_viewer::shooter::form::{DedicatedConfig, DedicatedTarget};

/// The physync viewer.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Host a `--scene` session with a builder, a thrower and a grabber bot, let it run, write the window to
    /// this PNG file and exit.
    #[arg(long, value_name = "PNG")]
    screenshot: Option<PathBuf>,
    /// The scene `--screenshot` hosts: table, katamari or tower.
    #[arg(long, default_value = "table")]
    scene: SceneKind,
    /// A scene file (RON) `--screenshot` hosts instead of `--scene`.
    #[arg(long, value_name = "RON", conflicts_with = "scene")]
    scene_file: Option<PathBuf>,
    /// With `--screenshot`: take the start screen instead of a session.
    #[arg(long)]
    start_screen: bool,
    /// Seconds the `--screenshot` session runs before the picture is taken (a `--dedicated` frame is taken
    /// as soon as an opponent stands in view instead).
    #[arg(long, default_value_t = 3.0)]
    settle: f64,
    /// Play the shooter in a local dedicated-server match (on a free port) instead; with `--screenshot`, the
    /// frame is taken once an opponent stands in view.
    #[arg(long)]
    dedicated: bool,
    /// Bots in the `--dedicated` match.
    #[arg(long, default_value_t = 3)]
    bots: u8,
}

/// Players other than the host that must have authority over some cube in a session screenshot.
const SCREENSHOT_AUTHORITIES: usize = 2;

/// The app a `--dedicated` run plays: a local dedicated-server match with `--bots` bots.
fn dedicated_app(cli: &Cli) -> Result<ViewerApp, String> {
    let config = DedicatedConfig {
        target: DedicatedTarget::Local { port: 0 },
        passphrase: "physync-dev".into(),
        name: "viewer".into(),
        bots: cli.bots,
    };
    ViewerApp::with_dedicated(Box::new(CoreLauncher::from_clock()), &config)
        .map_err(|e| e.to_string())
}

/// The app `--screenshot` runs: a hosted session with bots, the start screen, or the `--dedicated` shooter.
fn screenshot_app(
    cli: &Cli,
    path: PathBuf,
    outcome: ScreenshotOutcome,
) -> Result<ViewerApp, String> {
    let mut launcher = CoreLauncher::from_clock();
    if cli.dedicated || cli.start_screen {
        let plan = ScreenshotPlan {
            settle: Duration::ZERO,
            min_authorities: 0,
        };
        let app = if cli.dedicated {
            dedicated_app(cli)?
        } else {
            ViewerApp::new(Box::new(launcher))
        };
        return Ok(app.take_screenshot(path, plan, outcome));
    }
    let scene = match &cli.scene_file {
        Some(file) => load_scene(file).map_err(|e| e.to_string())?,
        None => cli.scene.spec(),
    };
    let mut session = launcher
        .host(&HostConfig {
            port: 0,
            scene,
            max_players: 4,
            join_code: None,
        })
        .map_err(|e| e.to_string())?;
    for kind in BotKind::ALL {
        session.add_bot(kind).map_err(|e| e.to_string())?;
    }
    let plan = ScreenshotPlan {
        settle: Duration::from_secs_f64(cli.settle.max(0.0)),
        min_authorities: SCREENSHOT_AUTHORITIES,
    };
    Ok(ViewerApp::with_session(Box::new(launcher), session).take_screenshot(path, plan, outcome))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let cli = Cli::parse();
    let viewport = egui::ViewportBuilder::default()
        .with_inner_size([1280.0, 800.0])
        .with_title("physync");
    let options = eframe::NativeOptions {
        viewport,
        ..Default::default()
    };
    let outcome: ScreenshotOutcome = Arc::default();
    let wants_screenshot = cli.screenshot.is_some();
    let app = match cli.screenshot.clone() {
        Some(path) => screenshot_app(&cli, path, Arc::clone(&outcome)),
        None if cli.dedicated => dedicated_app(&cli),
        None => Ok(ViewerApp::new(Box::new(CoreLauncher::from_clock()))),
    };
    let app = match app {
        Ok(app) => app,
        Err(e) => {
            eprintln!("physync-viewer: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = eframe::run_native("physync", options, Box::new(|_| Ok(Box::new(app)))) {
        eprintln!("physync-viewer: {e}");
        return ExitCode::FAILURE;
    }
    match outcome.lock().ok().and_then(|mut o| o.take()) {
        Some(Ok(summary)) => {
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Some(Err(e)) => {
            eprintln!("physync-viewer: {e}");
            ExitCode::FAILURE
        }
        None if wants_screenshot => {
            eprintln!("physync-viewer: the window closed before the screenshot was taken");
            ExitCode::FAILURE
        }
        None => ExitCode::SUCCESS,
    }
}
