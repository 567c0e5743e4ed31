//! A peer session over real UDP on 127.0.0.1: the host and two guests as separate laminar sockets, pumped in one
//! thread; they join, play with bots, and leave. Every wait is a bounded pump loop on a condition.

use std::time::{Duration, Instant};

use physync_engine::session::udp::pump_udp;
use physync_engine::transport::{DriverConfig, LaminarDriver};
use physync_engine::world::scene::SceneKind;
use physync_guest::bots::{Bot, BotKind};
use physync_guest::peer::{EndReason, GuestPhase};
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};

struct Peers {
    host: (LaminarDriver, PeerHost),
    guests: Vec<(LaminarDriver, PeerGuest, Bot)>,
}

impl Peers {
    /// Pumps every socket and core once; returns the shortest wait any of them asked for.
    fn pump(&mut self, play: bool) -> Duration {
        let (d, h) = &mut self.host;
        let mut wait = pump_udp(d, h, |_, _| {}).unwrap();
        for (d, g, bot) in &mut self.guests {
            let w = pump_udp(d, g, |now, g| {
                if play && let Some(s) = g.session_mut() {
                    bot.act(now, s);
                }
            })
            .unwrap();
            wait = wait.min(w);
        }
        wait
    }

    /// Pumps until `done` holds, for at most `limit` of wall time; returns whether it held.
    fn pump_until(&mut self, limit: Duration, play: bool, done: impl Fn(&Self) -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if done(self) {
                return true;
            }
            let wait = self.pump(play);
            std::thread::sleep(wait.min(Duration::from_millis(1)));
        }
        done(self)
    }
}

#[test]
fn host_and_two_guests_join_play_and_leave_over_udp() {
    let config = DriverConfig::default();
    let host_driver = LaminarDriver::bind("127.0.0.1:0", config).unwrap();
    let host_addr = host_driver.local_addr();
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
    let guests = [(BotKind::Thrower, 1u64), (BotKind::Grabber, 2)]
        .into_iter()
        .map(|(kind, seed)| {
            let d = LaminarDriver::bind("127.0.0.1:0", config).unwrap();
            (
                d,
                PeerGuest::new(GuestConfig::new(host_addr, seed)),
                Bot::new(kind, seed),
            )
        })
        .collect();
    let mut peers = Peers {
        host: (host_driver, host),
        guests,
    };

    let joined = peers.pump_until(Duration::from_secs(10), false, |p| {
        p.host.1.players().len() == 3 && p.guests.iter().all(|g| g.1.phase() == GuestPhase::Joined)
    });
    assert!(joined, "guests did not join");

    // Play until the thrower has thrown and every guest has heard the host's state (bounded).
    let played = peers.pump_until(Duration::from_secs(15), true, |p| {
        p.guests[0].2.actions().thrown >= 1
            && p.guests[1].2.actions().grabs >= 1
            && p.guests
                .iter()
                .all(|g| g.1.session().is_some_and(|s| s.counters().accepted > 100))
    });
    assert!(
        played,
        "no play: {:?}",
        peers
            .guests
            .iter()
            .map(|g| g.2.actions())
            .collect::<Vec<_>>()
    );
    assert!(peers.host.1.counters().authority_transfers >= 1);
    for r in peers.host.1.guest_reports() {
        assert!(r.packets_received > 10, "{r:?}");
        assert!(r.rtt_ms.is_some(), "{r:?}");
    }

    for (_, g, _) in &mut peers.guests {
        g.leave();
        assert_eq!(g.end_reason(), Some(EndReason::Left));
    }
    let left = peers.pump_until(Duration::from_secs(10), false, |p| {
        p.host.1.counters().leaves == 2
    });
    assert!(left, "host saw {:?}", peers.host.1.counters());
    assert_eq!(peers.host.1.players().len(), 1);
    assert_eq!(peers.host.1.counters().drops.total(), 0);
}
