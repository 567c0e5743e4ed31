//! The `physync-guest` command line: arguments, the guest's run loop over UDP with a bot, and its summary.
//!
//! Kept out of `main` so another mode (the shooter client) can be added beside the peer guest's.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use physync_engine::connection::{ClientPhase, CloseReason, ConnectionStats, Endpoint};
use physync_engine::digest::{DigestCounters, digest_hex};
use physync_engine::session::controls::PlayerControls;
use physync_engine::session::udp::{bind_peer_guest, pump_udp, run_udp};
use physync_engine::transport::{DriverConfig, LaminarDriver, TransportError};
use physync_engine::world::avatar::Hand;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::bots::{Bot, BotKind};
use crate::peer::{EndReason, GuestConfig, GuestCounters, GuestDrops, GuestLinkReport, PeerGuest};

/// Shortest time the guest keeps pumping after saying goodbye.
const LINGER: Duration = Duration::from_millis(300);
/// Longest: past this a leave the host never heard is left to its timeout.
const MAX_LINGER: Duration = Duration::from_secs(2);

/// How long to linger after leaving on a link with round trip `rtt`: four round trips, so the leave, repeated
/// every half round trip ([`leave_repeat`]), reaches the host through a few percent of loss (laminar resends a
/// lost reliable message only once 32 newer ones are acknowledged, which a guest that is leaving never sends).
pub fn leave_linger(rtt: Option<Duration>) -> Duration {
    rtt.map_or(LINGER, |r| (4 * r).clamp(LINGER, MAX_LINGER))
}

/// How often the leave is repeated while lingering: every half round trip, at most every 20 ms.
pub fn leave_repeat(rtt: Option<Duration>) -> Duration {
    rtt.map_or(Duration::from_millis(50), |r| {
        (r / 2).max(Duration::from_millis(20))
    })
}

/// Arguments of the peer guest.
#[derive(Debug, Clone, Args)]
pub struct PeerGuestArgs {
    /// The host's UDP address.
    #[arg(long)]
    pub connect: SocketAddr,
    /// Local UDP address to bind (port 0 picks one).
    #[arg(long, default_value = "0.0.0.0:0")]
    pub bind: SocketAddr,
    /// The scripted player: builder, thrower or grabber.
    #[arg(long, default_value = "builder")]
    pub bot: BotKind,
    /// Seconds to play before leaving.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Seconds before leaving during which the bot lets go and stays still, so the world comes to rest and the
    /// digest printed at exit can be compared with the host's.
    #[arg(long, default_value_t = 0.0)]
    pub settle: f64,
    /// Seed of the bot and the join nonce (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// The join code the host shows, if it set one.
    #[arg(long)]
    pub join_code: Option<String>,
}

/// What the guest prints at exit.
#[derive(Debug, Clone, Serialize)]
pub struct GuestSummary {
    /// How the session ended.
    pub ended: String,
    /// The player slot the host gave, if it let us in.
    pub player: Option<u8>,
    /// Session seconds run.
    pub seconds: f64,
    /// The bot's actions (grabs, placements, throws, ...).
    pub bot: String,
    /// The link to the host at the end.
    pub link: Option<GuestLinkReport>,
    /// What the host's updates did.
    pub counters: Option<GuestCounters>,
    /// Datagrams dropped.
    pub drops: GuestDrops,
    /// The connection layer: handshake and datagrams dropped by kind.
    pub connection: Option<ConnectionStats>,
    /// The world's digest at exit (16 hex digits), once joined: once everything rests, equal to the host's.
    pub digest: Option<String>,
    /// The desync detector: digest pages exchanged, and resting objects found disagreeing with the host.
    pub digests: DigestCounters,
}

/// Why the guest could not run.
pub type RunError = TransportError;

fn describe(reason: Option<EndReason>) -> String {
    match reason {
        None => "running".to_owned(),
        Some(EndReason::Rejected(r)) => format!("rejected: {r:?}"),
        Some(r) => format!("{r:?}"),
    }
}

/// One status line (on stderr, once a second): phase, link traffic, round trip, loss, corrections.
pub fn status_line(guest: &PeerGuest) -> String {
    let now = guest.now();
    match guest.session() {
        Some(s) => {
            let r = s.link_report(now);
            let rtt = r
                .rtt_ms
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.0}ms"));
            format!(
                "t={:6.1}s player {} players {:?} | up {:.1} down {:.1} kbps rtt {} loss {:.1}% | corrections {}",
                now.as_secs_f64(),
                s.player(),
                s.players(),
                r.kbps_up,
                r.kbps_down,
                rtt,
                r.loss * 100.0,
                s.counters().corrections
            )
        }
        None => format!("t={:6.1}s {:?}", now.as_secs_f64(), guest.phase()),
    }
}

/// Joins the host over UDP and lets the bot play for `--seconds` (or until the session ends); returns the
/// summary and whether the session ended on our terms.
pub fn run_peer_guest(args: &PeerGuestArgs) -> Result<(GuestSummary, bool), RunError> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut guest = PeerGuest::new(GuestConfig::new(args.connect, rng.random()));
    let mut bot = Bot::new(args.bot, rng.random());
    let join_code = args.join_code.clone();
    let mut driver = bind_peer_guest(args.bind, DriverConfig::default(), args.connect, join_code)?;
    tracing::info!(local = %driver.local_addr(), host = %args.connect, bot = %args.bot, "joining");
    let until = Duration::from_secs_f64(args.seconds);
    let settle_from = Duration::from_secs_f64((args.seconds - args.settle).max(0.0));
    let mut next_status = Duration::from_secs(1);
    let handshake_failed = |driver: &LaminarDriver| {
        driver.connection().and_then(Endpoint::client_phase)
            == Some(ClientPhase::Closed(CloseReason::ConnectFailed))
    };
    loop {
        let wait = pump_udp(&mut driver, &mut guest, |now, g| {
            if let Some(s) = g.session_mut() {
                if now < settle_from {
                    bot.act(now, s);
                } else {
                    s.release(Hand::Left);
                    s.release(Hand::Right);
                }
            }
        })?;
        let now = driver.now();
        if now >= next_status {
            eprintln!("{}", status_line(&guest));
            next_status += Duration::from_secs(1);
        }
        if guest.end_reason().is_some() || now >= until || handshake_failed(&driver) {
            break;
        }
        std::thread::sleep(wait);
    }
    let handshake_failed = handshake_failed(&driver);
    let ours = guest.end_reason().is_none();
    if ours {
        let rtt = guest
            .session()
            .and_then(|s| s.link_report(guest.now()).rtt_ms)
            .map(|ms| Duration::from_secs_f64(ms / 1000.0));
        guest.leave();
        let until = driver.now() + leave_linger(rtt);
        let repeat = leave_repeat(rtt);
        let mut next_leave = driver.now() + repeat;
        run_udp(
            &mut driver,
            &mut guest,
            |_, _| {},
            |now, g| {
                if now >= next_leave {
                    g.repeat_leave();
                    next_leave = now + repeat;
                }
                now < until
            },
        )?;
    }
    let now = guest.now();
    let ended = if handshake_failed && guest.session().is_none() {
        "no answer to the handshake (no host there, or a wrong join code)".to_owned()
    } else {
        describe(guest.end_reason())
    };
    let summary = GuestSummary {
        ended,
        player: guest.session().map(|s| s.player()),
        seconds: now.as_secs_f64(),
        bot: format!("{:?}", bot.actions()),
        link: guest.session().map(|s| s.link_report(now)),
        counters: guest.session().map(|s| *s.counters()),
        drops: *guest.drops(),
        connection: driver.connection_stats().copied(),
        digest: guest.digest().1.map(digest_hex),
        digests: *guest.digest().0.counters(),
    };
    Ok((summary, ours && !handshake_failed))
}
