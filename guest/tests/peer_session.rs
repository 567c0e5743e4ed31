//! Whole peer-hosted sessions on the in-memory network: one host, guests running bots, a bad link; then the
//! session settles and every guest must agree with the host.

use std::time::Duration;

use physync_engine::session::sim::host_addr;
use physync_engine::session::{SessionSim, divergence};
use physync_engine::transport::LinkConfig;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_guest::bots::{Bot, BotKind};
use physync_guest::peer::GuestPhase;
use physync_guest::{GuestConfig, PeerGuest};
use physync_host::{HostConfig, PeerHost};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Sim = SessionSim<PeerHost, PeerGuest>;

/// Half a position quantum (1/512 m) per axis, over three axes: the most two peers holding the same quantized
/// state can disagree by.
const QUANTIZATION_M: f32 = 0.003;

fn bad_link() -> LinkConfig {
    LinkConfig::from_rtt(
        Duration::from_millis(250),
        Duration::from_millis(50),
        0.05,
        0.01,
    )
}

fn session(seed: u64, guests: usize) -> Sim {
    let host = PeerHost::new(HostConfig::new(SceneKind::Table)).unwrap();
    let mut sim = SessionSim::new(host, bad_link(), seed).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for _ in 0..guests {
        let guest = PeerGuest::new(GuestConfig::new(host_addr(), rng.random()));
        sim.add_guest(guest).unwrap();
    }
    sim
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Runs the guests' bots (guest `i` runs `bots[i]`) until `until`.
fn run_bots(sim: &mut Sim, bots: &mut [Bot], until: Duration) {
    sim.run_until(
        until,
        |_, _| {},
        |i, now, guest| {
            if let (Some(bot), Some(s)) = (bots.get_mut(i), guest.session_mut()) {
                bot.act(now, s);
            }
        },
    )
    .unwrap();
}

/// Every guest's hands open: the end of all input.
fn release_all(sim: &mut Sim) {
    let indices: Vec<usize> = sim.guests().map(|(i, _)| i).collect();
    for i in indices {
        if let Some(s) = sim.guest_mut(i).and_then(|g| g.session_mut()) {
            for hand in Hand::BOTH {
                physync_engine::session::PlayerControls::release(s, hand);
            }
        }
    }
}

fn assert_converged(sim: &Sim) {
    let host = sim.host().world();
    for (i, guest) in sim.guests() {
        assert_eq!(guest.phase(), GuestPhase::Joined, "guest {i}");
        let d = divergence(host, guest.world().unwrap());
        assert!(
            d.max_position_m <= QUANTIZATION_M,
            "guest {i} diverges: {d:?}"
        );
        assert!(d.max_rotation_rad < 0.01, "guest {i} diverges: {d:?}");
        assert_eq!(d.holder_mismatches, 0, "guest {i}: {d:?}");
    }
}

#[test]
fn three_bots_under_loss_converge_after_settling() {
    let mut sim = session(11, 3);
    let mut bots: Vec<Bot> = BotKind::ALL
        .iter()
        .enumerate()
        .map(|(i, &k)| Bot::new(k, 100 + i as u64))
        .collect();
    run_bots(&mut sim, &mut bots, secs(60.0));
    release_all(&mut sim);
    sim.run_idle_until(secs(65.0)).unwrap();
    for (i, bot) in bots.iter().enumerate() {
        let a = bot.actions();
        assert!(
            a.grabs >= 5,
            "bot {i} ({:?}) barely played: {a:?}",
            bot.kind()
        );
    }
    assert!(bots[0].actions().placed >= 5);
    assert!(bots[1].actions().thrown >= 5);
    let c = sim.host().counters();
    assert!(c.authority_transfers > 20, "{c:?}");
    assert_eq!(c.drops.total(), 0, "{c:?}");
    assert_eq!(c.bad_updates.total(), 0, "{c:?}");
    assert_converged(&sim);
}
