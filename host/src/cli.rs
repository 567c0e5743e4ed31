//! The `physync-host` command line: arguments, the peer host's run loop over UDP, its status lines and summary.
//!
//! Kept out of `main` so another mode (the dedicated server) can be added beside the peer host's.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clap::Args;
use physync_engine::connection::{ConnectionStats, new_join_code};
use physync_engine::digest::{DigestCounters, digest_hex};
use physync_engine::session::udp::{bind_peer_host, linger, run_udp};
use physync_engine::transport::{DriverConfig, TransportError};
use std::path::PathBuf;

use physync_engine::world::scene::SceneKind;
use physync_engine::world::scene_file::{SceneFileError, load_scene};
use serde::Serialize;

use crate::peer::{GuestReport, HostConfig, HostCounters, HostError, PeerHost};

/// How long the host keeps pumping after telling guests it leaves.
const LINGER: Duration = Duration::from_millis(300);

/// Arguments of the peer host.
#[derive(Debug, Clone, Args)]
pub struct PeerHostArgs {
    /// UDP address to listen on.
    #[arg(long, default_value = "0.0.0.0:40000")]
    pub listen: SocketAddr,
    /// Scene: table, katamari or tower.
    #[arg(long, default_value = "table")]
    pub scene: SceneKind,
    /// A scene file (RON, see examples/scenes/) to host instead of a named scene; guests download it at join.
    #[arg(long, conflicts_with = "scene")]
    pub scene_file: Option<PathBuf>,
    /// Players admitted, the host included (2..=16).
    #[arg(long, default_value_t = 4)]
    pub players: u8,
    /// Stop after this many seconds (default: run until Ctrl-C).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// State packets per second to each guest.
    #[arg(long, default_value_t = 60)]
    pub send_hz: u32,
    /// Byte budget of each guest link, in kilobits per second.
    #[arg(long, default_value_t = 256)]
    pub budget_kbps: u32,
    /// Print the summary as one JSON object on stdout (status lines then go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Admit only guests that type this join code; `--join-code` alone makes up a fresh one and prints it.
    #[arg(long, num_args = 0..=1, default_missing_value = "new")]
    pub join_code: Option<String>,
}

impl PeerHostArgs {
    /// The join code the session runs with: the one given, a fresh one for `new`, or none.
    pub fn resolved_join_code(&self) -> Option<String> {
        match self.join_code.as_deref() {
            None => None,
            Some("new") => Some(new_join_code()),
            Some(code) => Some(code.to_owned()),
        }
    }

    /// The host configuration these arguments ask for; a scene file that does not load is an error.
    pub fn host_config(&self) -> Result<HostConfig, SceneFileError> {
        let scene = match &self.scene_file {
            Some(path) => load_scene(path)?,
            None => self.scene.spec(),
        };
        let mut config = HostConfig::new(scene);
        config.max_players = self.players;
        config.link.send_hz = self.send_hz;
        config.link.bytes_per_second = self.budget_kbps * 1000 / 8;
        Ok(config)
    }
}

/// Why the peer host could not run.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The configuration was refused.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The scene file did not load.
    #[error(transparent)]
    SceneFile(#[from] SceneFileError),
    /// The socket failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
}

/// What the host prints at exit.
#[derive(Debug, Clone, Serialize)]
pub struct HostSummary {
    /// Session seconds run.
    pub seconds: f64,
    /// The scene.
    pub scene: String,
    /// Players at the end, the host included.
    pub players: usize,
    /// Host upstream over all links, averaged from its first datagram (kbps).
    pub host_kbps_up_total: f64,
    /// Session-wide counters.
    pub counters: HostCounters,
    /// The guests still joined at the end.
    pub guests: Vec<GuestReport>,
    /// The connection layer: sessions set up and datagrams dropped by kind.
    pub connection: Option<ConnectionStats>,
    /// The world's digest at the end (16 hex digits): once everything rests, equal to every guest's in sync.
    pub digest: String,
    /// The desync detector: digest pages exchanged, and guests' resting objects found disagreeing.
    pub digests: DigestCounters,
}

impl HostSummary {
    /// The summary of `host` now.
    pub fn of(host: &PeerHost) -> Self {
        let guests = host.guest_reports();
        let (exchange, digest) = host.digest();
        Self {
            seconds: host.now().as_secs_f64(),
            scene: host.config().scene.name.clone(),
            players: host.players().len(),
            host_kbps_up_total: host.avg_kbps_up(),
            counters: *host.counters(),
            guests,
            connection: None,
            digest: digest_hex(digest),
            digests: *exchange.counters(),
        }
    }
}

/// One status line: players, then per link kbps both ways, round trip and loss, then conflicts and corrections.
pub fn status_line(host: &PeerHost) -> String {
    let mut line = format!(
        "t={:6.1}s players={} up {:.1} kbps",
        host.now().as_secs_f64(),
        host.players().len(),
        host.kbps_up()
    );
    for g in host.guest_reports() {
        let rtt = g
            .rtt_ms
            .map_or_else(|| "-".to_owned(), |r| format!("{r:.0}ms"));
        line.push_str(&format!(
            " | p{} up {:.1} down {:.1} kbps rtt {} loss {:.1}%",
            g.player,
            g.kbps_up,
            g.kbps_down,
            rtt,
            g.loss * 100.0
        ));
    }
    let c = host.counters();
    line.push_str(&format!(
        " | conflicts {} corrections {} bad {} dropped {}",
        c.conflicts,
        c.corrections,
        c.bad_updates.total(),
        c.drops.total()
    ));
    line
}

/// Set by the Ctrl-C handler.
static STOP: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
extern "C" fn on_interrupt(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Makes Ctrl-C (SIGINT) end the run loop cleanly so the summary is printed.
fn catch_interrupt() {
    #[cfg(unix)]
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_interrupt as *const () as libc::sighandler_t,
        );
    }
}

/// Runs a peer host over UDP until `--seconds` pass or Ctrl-C, printing a status line per second; returns the
/// summary (the caller prints it).
pub fn run_peer_host(args: &PeerHostArgs) -> Result<HostSummary, RunError> {
    let mut host = PeerHost::new(args.host_config()?)?;
    let join_code = args.resolved_join_code();
    let mut driver = bind_peer_host(args.listen, DriverConfig::default(), join_code.clone())?;
    tracing::info!(addr = %driver.local_addr(), scene = %args.scene, "hosting");
    if let Some(code) = &join_code {
        eprintln!("join code: {code}");
    }
    catch_interrupt();
    let until = args.seconds.map(Duration::from_secs_f64);
    let mut next_status = Duration::from_secs(1);
    run_udp(
        &mut driver,
        &mut host,
        |_, _| {},
        |now, host| {
            if now >= next_status {
                let line = status_line(host);
                if args.json {
                    eprintln!("{line}");
                } else {
                    println!("{line}");
                }
                next_status += Duration::from_secs(1);
            }
            !STOP.load(Ordering::SeqCst) && until.is_none_or(|u| now < u)
        },
    )?;
    let mut summary = HostSummary::of(&host);
    summary.connection = driver.connection_stats().copied();
    host.leave();
    linger(&mut driver, &mut host, LINGER)?;
    Ok(summary)
}
