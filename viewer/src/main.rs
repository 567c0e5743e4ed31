//! `physync-viewer`: opens the start screen, or with `--screenshot` renders one frame to a PNG and exits;
//! `--dedicated` plays the shooter in a local dedicated-server match with bots straight away.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use physync_viewer::app::{ScreenshotOutcome, ViewerApp};
use physync_viewer::offline_preview::OfflinePreview;
use physync_viewer::scene_choice::SceneChoice;
use physync_viewer::shooter::form::{DedicatedConfig, DedicatedTarget};

/// The physync viewer.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Render the offline preview of `--scene` to this PNG file and exit.
    #[arg(long, value_name = "PNG")]
    screenshot: Option<PathBuf>,
    /// The scene shown by `--screenshot`.
    #[arg(long, value_enum, default_value_t = SceneChoice::Table)]
    scene: SceneChoice,
    /// Play the shooter in a local dedicated-server match (on a free port) instead; with `--screenshot`, the
    /// frame is taken once an opponent stands in view.
    #[arg(long)]
    dedicated: bool,
    /// Bots in the `--dedicated` match.
    #[arg(long, default_value_t = 3)]
    bots: u8,
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
    let app = if cli.dedicated {
        let config = DedicatedConfig {
            target: DedicatedTarget::Local { port: 0 },
            passphrase: "physync-dev".into(),
            name: "viewer".into(),
            bots: cli.bots,
        };
        match ViewerApp::with_dedicated(&config) {
            Ok(app) => app,
            Err(e) => {
                eprintln!("physync-viewer: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else if cli.screenshot.is_some() {
        ViewerApp::with_session(Box::new(OfflinePreview::new(cli.scene)))
    } else {
        ViewerApp::new(None)
    };
    let app = match cli.screenshot {
        Some(path) => app.take_screenshot(path, Arc::clone(&outcome)),
        None => app,
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
