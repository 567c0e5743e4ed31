//! A scripted bot joining a session from inside the viewer: a physync-guest [`PeerGuest`] core with a
//! [`Bot`] on its own UDP socket, pumped by the session that added it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use physync_engine::session::udp::{bind_peer_guest, pump_udp};
use physync_engine::transport::{DriverConfig, LaminarDriver, TransportError};
use physync_guest::bots::{Bot, BotKind};
use physync_guest::peer::EndReason;
use physync_guest::{GuestConfig, PeerGuest};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::session::PlayerId;

/// One bot guest: its core, its socket and its script.
pub struct BotGuest {
    core: PeerGuest,
    driver: LaminarDriver,
    bot: Bot,
}

impl BotGuest {
    /// Binds a socket (on the loopback interface when the host is local) and starts joining `host`.
    pub fn start(kind: BotKind, host: SocketAddr, seed: u64) -> Result<Self, TransportError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let bind: SocketAddr = match (host.ip().is_loopback(), host.is_ipv4()) {
            (true, true) => (Ipv4Addr::LOCALHOST, 0).into(),
            (true, false) => (Ipv6Addr::LOCALHOST, 0).into(),
            (false, true) => (Ipv4Addr::UNSPECIFIED, 0).into(),
            (false, false) => (Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let config = DriverConfig {
            seed: rng.random(),
            ..DriverConfig::default()
        };
        let driver = bind_peer_guest(bind, config, host, None)?;
        Ok(Self {
            core: PeerGuest::new(GuestConfig::new(host, rng.random())),
            driver,
            bot: Bot::new(kind, rng.random()),
        })
    }

    /// One turn of its UDP loop; the bot acts before each of the core's steps.
    pub fn pump(&mut self) -> Result<(), TransportError> {
        let bot = &mut self.bot;
        pump_udp(&mut self.driver, &mut self.core, |now, guest| {
            if let Some(session) = guest.session_mut() {
                bot.act(now, session);
            }
        })
        .map(drop)
    }

    /// Which bot it is.
    pub fn kind(&self) -> BotKind {
        self.bot.kind()
    }

    /// Its player index, once the host let it in (already while it downloads the scene, so it shows as a bot from
    /// the moment the host counts it).
    pub fn player(&self) -> Option<PlayerId> {
        self.core.player()
    }

    /// Why its session ended, once it has.
    pub fn end_reason(&self) -> Option<EndReason> {
        self.core.end_reason()
    }

    /// Says goodbye to the host; the caller keeps pumping a moment so the message leaves.
    pub fn leave(&mut self) {
        self.core.leave();
    }

    /// Says the goodbye again, as [`PeerGuest::repeat_leave`] does, while the caller lingers.
    pub fn repeat_leave(&mut self) {
        self.core.repeat_leave();
    }
}
