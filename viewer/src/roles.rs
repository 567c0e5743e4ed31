//! What a [`crate::live::LiveSession`] needs from the core it drives, implemented for physync-host's
//! [`PeerHost`] and physync-guest's [`PeerGuest`]: their worlds, their local-input interface, their players,
//! their link figures and how their session stands. Nothing here decides anything; it only reads the cores.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use physync_engine::session::{PlayerControls, RejectReason, SessionCore};
use physync_engine::world::World;
use physync_engine::world::authority::DEFAULT_AUTHORITY;
use physync_engine::world::scene::SceneSpec;
use physync_guest::PeerGuest;
use physync_guest::peer::{EndReason, GuestPhase};
use physync_host::PeerHost;

use crate::session::{PlayerId, SessionKind, SessionStatus};

/// One link's figures as the core counts them (totals, not rates).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkFigures {
    /// The player at the other end.
    pub peer: PlayerId,
    /// Kilobits per second sent over the last full second.
    pub kbps_up: f64,
    /// Kilobits per second received over the last full second.
    pub kbps_down: f64,
    /// Smoothed round trip, once measured.
    pub rtt_ms: Option<f64>,
    /// Smoothed fraction of state packets lost.
    pub loss: f64,
    /// How far behind the fastest arrival the peer's frames play (the jitter buffer's delay).
    pub playout_ms: f64,
    /// Authority conflicts resolved so far.
    pub conflicts: u64,
    /// Corrections so far.
    pub corrections: u64,
}

/// A session core the viewer can drive and read.
pub trait Role: SessionCore {
    /// Host or guest.
    const KIND: SessionKind;
    /// The local world, once there is one (a guest builds it when the host accepts).
    fn world(&self) -> Option<&World>;
    /// The local player's input interface, while in the session.
    fn controls(&mut self) -> Option<&mut dyn PlayerControls>;
    /// The local player's index, once known.
    fn local_player(&self) -> Option<PlayerId>;
    /// The players in the session.
    fn player_ids(&self) -> Vec<PlayerId>;
    /// How many players the session admits, once known.
    fn max_players(&self) -> Option<u8>;
    /// The scene, once known.
    fn scene(&self) -> Option<&SceneSpec>;
    /// One entry per link.
    fn link_figures(&self) -> Vec<LinkFigures>;
    /// Whether the session runs.
    fn status(&self) -> SessionStatus;
    /// Leave the session (the core queues the goodbye).
    fn leave(&mut self);
    /// Says the goodbye again while the session lingers after [`Role::leave`], so it reaches the other side through
    /// loss. Only a guest has one to repeat.
    fn repeat_leave(&mut self) {}
    /// The address a bot started by this viewer joins, given this peer's socket address.
    fn bot_target(&self, local: SocketAddr) -> SocketAddr;
}

impl Role for PeerHost {
    const KIND: SessionKind = SessionKind::Host;

    fn world(&self) -> Option<&World> {
        Some(PeerHost::world(self))
    }

    fn controls(&mut self) -> Option<&mut dyn PlayerControls> {
        Some(self)
    }

    fn local_player(&self) -> Option<PlayerId> {
        Some(DEFAULT_AUTHORITY)
    }

    fn player_ids(&self) -> Vec<PlayerId> {
        self.players().iter().map(|p| p.player).collect()
    }

    fn max_players(&self) -> Option<u8> {
        Some(self.config().max_players)
    }

    fn scene(&self) -> Option<&SceneSpec> {
        Some(&self.config().scene)
    }

    fn link_figures(&self) -> Vec<LinkFigures> {
        self.guest_reports()
            .iter()
            .map(|r| LinkFigures {
                peer: r.player,
                kbps_up: r.kbps_up,
                kbps_down: r.kbps_down,
                rtt_ms: r.rtt_ms,
                loss: r.loss,
                playout_ms: r.playout_ms,
                conflicts: r.conflicts,
                corrections: r.corrections,
            })
            .collect()
    }

    fn status(&self) -> SessionStatus {
        if self.has_ended() {
            SessionStatus::Ended("you closed the session".into())
        } else {
            SessionStatus::Running
        }
    }

    fn leave(&mut self) {
        PeerHost::leave(self);
    }

    fn bot_target(&self, local: SocketAddr) -> SocketAddr {
        let ip = match local {
            SocketAddr::V4(a) if a.ip().is_unspecified() => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(a) if a.ip().is_unspecified() => Ipv6Addr::LOCALHOST.into(),
            other => other.ip(),
        };
        SocketAddr::new(ip, local.port())
    }
}

impl Role for PeerGuest {
    const KIND: SessionKind = SessionKind::Guest;

    fn world(&self) -> Option<&World> {
        PeerGuest::world(self)
    }

    fn controls(&mut self) -> Option<&mut dyn PlayerControls> {
        self.session_mut().map(|s| s as &mut dyn PlayerControls)
    }

    fn local_player(&self) -> Option<PlayerId> {
        self.session().map(PlayerControls::player)
    }

    fn player_ids(&self) -> Vec<PlayerId> {
        self.session().map(|s| s.players()).unwrap_or_default()
    }

    fn max_players(&self) -> Option<u8> {
        self.session().map(|s| s.setup().max_players)
    }

    fn scene(&self) -> Option<&SceneSpec> {
        PeerGuest::world(self).map(|w| w.scene())
    }

    /// The guest's one link. It counts no arbitration of its own, so both figures are the host updates that
    /// took an object away from this guest's authority: a conflict it lost, corrected by the host.
    fn link_figures(&self) -> Vec<LinkFigures> {
        self.session()
            .map(|s| {
                let report = s.link_report(self.now());
                LinkFigures {
                    peer: DEFAULT_AUTHORITY,
                    kbps_up: report.kbps_up,
                    kbps_down: report.kbps_down,
                    rtt_ms: report.rtt_ms,
                    loss: report.loss,
                    playout_ms: report.playout_ms,
                    conflicts: s.counters().corrections,
                    corrections: s.counters().corrections,
                }
            })
            .into_iter()
            .collect()
    }

    fn status(&self) -> SessionStatus {
        match self.phase() {
            GuestPhase::Joining => SessionStatus::Connecting,
            GuestPhase::Joined => SessionStatus::Running,
            GuestPhase::Ended(reason) => SessionStatus::Ended(describe_end(self, reason)),
        }
    }

    fn leave(&mut self) {
        PeerGuest::leave(self);
    }

    fn repeat_leave(&mut self) {
        PeerGuest::repeat_leave(self);
    }

    fn bot_target(&self, _local: SocketAddr) -> SocketAddr {
        self.config().host
    }
}

/// The sentence the start screen shows when a guest's session ended.
fn describe_end(guest: &PeerGuest, reason: EndReason) -> String {
    let host = guest.config().host;
    let timeout = guest.config().timeout.as_secs_f64();
    match reason {
        EndReason::Timeout if guest.session().is_none() => {
            format!("the host at {host} did not answer within {timeout} s")
        }
        EndReason::Timeout => format!("the host at {host} stopped answering for {timeout} s"),
        EndReason::Rejected(RejectReason::Full) => format!("the session at {host} is full"),
        EndReason::Rejected(RejectReason::WrongVersion { host_version }) => format!(
            "version mismatch: the host at {host} speaks protocol version {host_version}, this viewer speaks {}",
            guest.config().version
        ),
        EndReason::Rejected(RejectReason::Banned) => {
            format!("the host at {host} refuses this address")
        }
        EndReason::HostLeft => "the host left the session".into(),
        EndReason::Left => "you left the session".into(),
        EndReason::BadScene(e) => format!("the scene from the host at {host} was refused: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use physync_engine::session::{
        ControlMessage, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION, encode_control,
    };
    use physync_engine::transport::Delivery;

    use super::*;

    const NONCE: u64 = 0x1234;

    fn host() -> SocketAddr {
        ([127, 0, 0, 1], 40000).into()
    }

    /// A guest that sent its join request and got `reason` back.
    fn refused(reason: RejectReason) -> PeerGuest {
        let mut guest = PeerGuest::new(physync_guest::GuestConfig::new(host(), NONCE));
        guest.handle_timeout(Duration::ZERO);
        assert_eq!(Role::status(&guest), SessionStatus::Connecting);
        let reject = encode_control(
            PEER_PROTOCOL_ID,
            &ControlMessage::Reject {
                nonce: NONCE,
                reason,
            },
        )
        .unwrap();
        guest.handle_datagram(
            Duration::from_millis(5),
            host(),
            Delivery::ReliableOrdered,
            &reject,
        );
        guest
    }

    #[test]
    fn refusals_are_explained() {
        assert_eq!(
            Role::status(&refused(RejectReason::Full)),
            SessionStatus::Ended("the session at 127.0.0.1:40000 is full".into())
        );
        let other = PEER_PROTOCOL_VERSION + 1;
        assert_eq!(
            Role::status(&refused(RejectReason::WrongVersion {
                host_version: other
            })),
            SessionStatus::Ended(format!(
                "version mismatch: the host at 127.0.0.1:40000 speaks protocol version {other}, \
                 this viewer speaks {PEER_PROTOCOL_VERSION}"
            ))
        );
        assert_eq!(
            Role::status(&refused(RejectReason::Banned)),
            SessionStatus::Ended("the host at 127.0.0.1:40000 refuses this address".into())
        );
    }

    #[test]
    fn a_silent_host_is_reported_after_the_timeout() {
        let mut guest = PeerGuest::new(physync_guest::GuestConfig::new(host(), NONCE));
        guest.handle_timeout(Duration::ZERO);
        guest.handle_timeout(Duration::from_secs(6));
        assert_eq!(
            Role::status(&guest),
            SessionStatus::Ended("the host at 127.0.0.1:40000 did not answer within 5 s".into())
        );
    }

    #[test]
    fn bots_of_a_host_listening_everywhere_join_through_loopback() {
        let host_core = PeerHost::new(physync_host::HostConfig::new(
            physync_engine::world::scene::SceneKind::Table.spec(),
        ))
        .unwrap();
        assert_eq!(
            host_core.bot_target(([0, 0, 0, 0], 40001).into()),
            SocketAddr::from(([127, 0, 0, 1], 40001))
        );
        assert_eq!(
            host_core.bot_target(([192, 168, 1, 5], 40001).into()),
            SocketAddr::from(([192, 168, 1, 5], 40001))
        );
    }
}
