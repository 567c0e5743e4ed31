//! Whole peer-hosted sessions on the in-memory network: one host, guests running bots, a bad link; then the
//! session settles and every guest must agree with the host.

use std::time::Duration;

use physync_engine::session::sim::host_addr;
use physync_engine::session::{PlayerControls, SessionSim, divergence, objects_of};
use physync_engine::transport::LinkConfig;
use physync_engine::world::avatar::Hand;
use physync_engine::world::scene::SceneKind;
use physync_guest::bots::{Bot, BotKind, LongHaul};
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
    let host = PeerHost::new(HostConfig::new(SceneKind::Table.spec())).unwrap();
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
                PlayerControls::release(s, hand);
            }
        }
    }
}

fn assert_converged(sim: &Sim) {
    let host = sim.host().world();
    for (i, guest) in sim.guests() {
        assert_eq!(guest.phase(), GuestPhase::Joined, "guest {i}");
        let world = guest.world().unwrap();
        let d = divergence(host, world);
        assert_eq!(d.holder_mismatches, 0, "guest {i}: {d:?}");
        assert_eq!(d.authority_mismatches, 0, "guest {i}: {d:?}");
        assert!(d.max_rotation_rad < 0.01, "guest {i} diverges: {d:?}");
        for id in 0..host.object_count() as u16 {
            let gap = (host.physics_pose(id).translation.vector
                - world.physics_pose(id).translation.vector)
                .norm();
            // Every free object has settled (a held one moves with its hand).
            assert!(
                host.holder(id).is_some() || host.is_at_rest(id),
                "object {id} still moving on the host"
            );
            assert!(
                gap <= QUANTIZATION_M,
                "guest {i}, object {id}: {gap} m from the host"
            );
        }
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
    // The host is honest too: every datagram it sends decodes on every guest, late and duplicated ones included.
    for i in 0..3 {
        let d = sim.guest(i).unwrap().drops();
        assert_eq!(d.malformed, 0, "guest {i}: {d:?}");
    }
    for r in sim.host().guest_reports() {
        let rtt = r.rtt_ms.unwrap();
        assert!((200.0..400.0).contains(&rtt), "{r:?}");
        assert!(r.loss < 0.2, "{r:?}");
        assert!(r.packets_received > 3000, "{r:?}");
        assert!(r.authority_transfers > 0, "{r:?}");
        assert!(r.avg_kbps_up < 256.0, "{r:?}");
    }
    assert_converged(&sim);
}

/// The cube both grabbers go for: in the middle of the table.
const CONTESTED: u16 = 27;

/// Guests 0 and 1 move their right hands onto the same cube and grab it in the same frame.
fn contest(sim: &mut Sim) {
    for i in 0..2 {
        let s = sim.guest_mut(i).unwrap().session_mut().unwrap();
        let at = s.world().physics_pose(CONTESTED);
        PlayerControls::set_hand_pose(s, Hand::Right, at);
        PlayerControls::grab(s, Hand::Right, CONTESTED).unwrap();
    }
}

fn holders(sim: &Sim, id: u16) -> Vec<Option<u8>> {
    let mut h = vec![sim.host().world().holder(id).map(|h| h.player)];
    h.extend(
        sim.guests()
            .map(|(_, g)| g.world().unwrap().holder(id).map(|h| h.player)),
    );
    h
}

#[test]
fn two_grabbers_reaching_for_one_cube_end_with_one_owner() {
    let mut sim = session(5, 2);
    sim.run_idle_until(secs(3.0)).unwrap();
    contest(&mut sim);
    sim.run_idle_until(secs(8.0)).unwrap();
    let owners = holders(&sim, CONTESTED);
    assert!(owners[0].is_some(), "{owners:?}");
    assert!(owners.iter().all(|o| *o == owners[0]), "{owners:?}");
    for (_, g) in sim.guests() {
        let me = g.session().unwrap().player();
        let grip = g.world().unwrap().grip(me, Hand::Right);
        assert_eq!(grip.is_some(), owners[0] == Some(me), "player {me}");
    }
    assert_converged(&sim);
}

#[test]
fn the_winner_dropping_out_mid_grab_releases_the_cube_everywhere() {
    let mut sim = session(6, 3);
    sim.run_idle_until(secs(3.0)).unwrap();
    contest(&mut sim);
    sim.run_idle_until(secs(6.0)).unwrap();
    let winner = sim.host().world().holder(CONTESTED).unwrap().player;
    let index = sim
        .guests()
        .find(|(_, g)| g.session().unwrap().player() == winner)
        .map(|(i, _)| i)
        .unwrap();
    sim.remove_guest(index);
    // The host notices after its 5 s timeout; then the roster and the objects' new authority reach the others.
    sim.run_idle_until(secs(16.0)).unwrap();
    assert_eq!(sim.host().counters().timeouts, 1);
    assert_eq!(holders(&sim, CONTESTED), vec![None; 3]);
    assert!(objects_of(sim.host().world(), winner).is_empty());
    for (_, g) in sim.guests() {
        assert!(objects_of(g.world().unwrap(), winner).is_empty());
        assert!(!g.session().unwrap().players().contains(&winner));
    }
    assert_converged(&sim);
}

#[test]
fn a_guest_dropping_out_mid_grab_under_bot_play_leaves_nothing_behind() {
    let mut sim = session(12, 3);
    let mut bots: Vec<Bot> = BotKind::ALL
        .iter()
        .enumerate()
        .map(|(i, &k)| Bot::new(k, 200 + i as u64))
        .collect();
    run_bots(&mut sim, &mut bots, secs(30.0));
    // Wait (bounded) for the grabber (guest 2) to hold a cube, then pull its cable.
    let mut t = 30.0;
    while !sim
        .guest(2)
        .and_then(|g| g.session())
        .is_some_and(|s| bots[2].is_holding(s))
    {
        t += 0.05;
        assert!(t < 40.0, "the grabber never held a cube");
        run_bots(&mut sim, &mut bots, secs(t));
    }
    let departed = sim.guest(2).unwrap().session().unwrap().player();
    sim.remove_guest(2);
    run_bots(&mut sim, &mut bots[..2], secs(60.0));
    release_all(&mut sim);
    sim.run_idle_until(secs(65.0)).unwrap();
    assert_eq!(sim.host().counters().timeouts, 1);
    assert!(objects_of(sim.host().world(), departed).is_empty());
    for (_, g) in sim.guests() {
        assert!(objects_of(g.world().unwrap(), departed).is_empty());
    }
    assert_converged(&sim);
}

#[test]
fn remote_avatars_play_back_smoothly_behind_the_jitter_buffer() {
    let mut sim = session(8, 1);
    sim.run_idle_until(secs(2.0)).unwrap();
    // The host sweeps its right hand along x at 1 m/s; the guest records where it shows that hand.
    let start = sim.now();
    let hand_x = |t: Duration| (t.saturating_sub(start)).as_secs_f32() - 2.0;
    let mut shown: Vec<(Duration, f32)> = Vec::new();
    sim.run_until(
        secs(6.0),
        |now, host| {
            let pose = nalgebra::Isometry3::translation(hand_x(now), 1.2, -4.0);
            PlayerControls::set_hand_pose(host, Hand::Right, pose);
        },
        |_, now, guest| {
            if let Some(w) = guest.world() {
                shown.push((now, w.avatar_pose(0).hands[1].translation.x));
            }
        },
    )
    .unwrap();
    let moving: Vec<&(Duration, f32)> = shown.iter().filter(|(t, _)| *t > secs(3.5)).collect();
    assert!(moving.len() > 100);
    // Smooth: never steps back, never jumps more than the sweep covers in a couple of frames.
    for pair in moving.windows(2) {
        let step = pair[1].1 - pair[0].1;
        assert!(step > -0.002, "stepped back {step} at {:?}", pair[1].0);
        assert!(step < 0.05, "jumped {step} at {:?}", pair[1].0);
    }
    // Behind by the one-way delay (125 ms less the jitter the fastest packet got) plus the 100 ms buffer.
    // Steady: the 50 ms jitter of arrivals does not show in the lag.
    let lags: Vec<f32> = moving.iter().map(|&&(t, x)| hand_x(t) - x).collect();
    let (min, max) = lags
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    assert!(min > 0.15 && max < 0.25, "lag between {min} and {max} s");
    assert!(max - min < 0.03, "lag between {min} and {max} s");
}

/// Sequences skipped at once: as many packets lost in a row.
const SKIP: u16 = 12_000;

/// Skips `n` packet sequences on every link of the session, both ways (as if that many datagrams were lost).
fn skip_sequences(sim: &mut Sim, n: u16) {
    sim.host_mut().skip_link_sequences(n);
    let indices: Vec<usize> = sim.guests().map(|(i, _)| i).collect();
    for i in indices {
        if let Some(s) = sim.guest_mut(i).and_then(|g| g.session_mut()) {
            s.skip_link_sequences(n);
        }
    }
}

#[test]
fn objects_held_or_idle_across_the_sequence_space_sync_like_fresh_ones() {
    // A 30-minute session's sequence edges in 16 simulated seconds: every link's counter starts near the wrap
    // (four skips of 12,000), then moves 48,000 further while one cube stays in a hand and seven cubes, touched
    // once, lie idle: each goes unsent across the wrap and across half the sequence space, then moves again.
    let mut sim = session(21, 2);
    for t in [0.6, 0.7, 0.8, 0.9, 1.0] {
        // Packets flow between two skips, so each gap reads as newer on the other side.
        sim.run_idle_until(secs(t)).unwrap();
        if t < 1.0 {
            skip_sequences(&mut sim, SKIP);
        }
    }
    let held = 63;
    let idle: Vec<u16> = (56..63).collect();
    let mut script = LongHaul::new((0, held, secs(9.0)), (1, idle.clone(), secs(10.0)));
    let mut bots = [Bot::new(BotKind::Thrower, 5), Bot::new(BotKind::Builder, 6)];
    for bot in &mut bots {
        bot.avoid(&script.reserved());
    }
    for t in [4.0, 5.0, 6.0, 7.0, 16.0] {
        sim.run_until(
            secs(t),
            |_, _| {},
            |i, now, guest| {
                let Some(s) = guest.session_mut() else { return };
                bots[i].act(now, s);
                script.act(i, now, s);
            },
        )
        .unwrap();
        if t < 16.0 {
            skip_sequences(&mut sim, SKIP);
        }
    }
    assert!(
        script.held_for().is_some_and(|d| d >= secs(8.9)),
        "{:?}",
        script.held_for()
    );
    assert_eq!(
        script.touched(),
        idle.len(),
        "every idle cube touched again"
    );
    release_all(&mut sim);
    sim.run_idle_until(secs(22.0)).unwrap();
    assert_converged(&sim);
    let c = sim.host().counters();
    assert_eq!(c.drops.total(), 0, "host dropped datagrams: {c:?}");
    let forgot: u64 = sim
        .host()
        .guest_reports()
        .iter()
        .map(|r| r.stale_forgotten)
        .sum();
    assert!(
        forgot > 0,
        "the idle objects went stale on the host's links"
    );
    for (i, g) in sim.guests() {
        assert_eq!(g.drops().malformed, 0, "guest {i} dropped datagrams");
    }
}

#[test]
fn the_host_plays_guest_hands_back_smoothly_behind_its_jitter_buffer() {
    let mut sim = session(9, 1);
    sim.run_idle_until(secs(2.0)).unwrap();
    // The guest sweeps its right hand along x at 1 m/s; the host records where it shows that hand.
    let start = sim.now();
    let hand_x = |t: Duration| (t.saturating_sub(start)).as_secs_f32() - 2.0;
    let mut shown: Vec<(Duration, f32)> = Vec::new();
    sim.run_until(
        secs(6.0),
        |now, host| shown.push((now, host.world().avatar_pose(1).hands[1].translation.x)),
        |_, now, guest| {
            if let Some(s) = guest.session_mut() {
                let pose = nalgebra::Isometry3::translation(hand_x(now), 1.2, 4.0);
                PlayerControls::set_hand_pose(s, Hand::Right, pose);
            }
        },
    )
    .unwrap();
    let moving: Vec<&(Duration, f32)> = shown.iter().filter(|(t, _)| *t > secs(3.5)).collect();
    assert!(moving.len() > 100);
    for pair in moving.windows(2) {
        let step = pair[1].1 - pair[0].1;
        assert!(step > -0.002, "stepped back {step} at {:?}", pair[1].0);
        assert!(step < 0.05, "jumped {step} at {:?}", pair[1].0);
    }
    // A steady lag: the 50 ms jitter of arrivals does not show.
    let lags: Vec<f32> = moving.iter().map(|&&(t, x)| hand_x(t) - x).collect();
    let (min, max) = lags
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &l| (lo.min(l), hi.max(l)));
    assert!(max - min < 0.03, "lag between {min} and {max} s");
}

/// Who has a cube on every peer: its authority and the player holding it, host first.
fn whose(sim: &Sim, id: u16) -> Vec<(u8, Option<u8>)> {
    let who = |w: &physync_engine::world::World| {
        (
            w.authority(id).view.authority,
            w.holder(id).map(|h| h.player),
        )
    };
    let mut all = vec![who(sim.host().world())];
    all.extend(sim.guests().map(|(_, g)| who(g.world().unwrap())));
    all
}

/// Two guests grab one cube in the same frame; the host decides, and every peer (the loser and a third guest
/// included) must agree within the round trip plus one play-out delay at the host and one at the guests: 250 + 2 ×
/// 100 ms, less the 50 ms by which the fastest datagrams beat the mean. Over 250 ms, 50 ms jitter and 5% loss,
/// eight contests must each agree within that (the goal, RTT + 200) and 405 ms on average. The loser used
/// to agree up to four frames after the third guest, because the host's first datagrams with the verdict were
/// often overtaken on the way and the loser's jitter buffer never played them: 383-433 ms, 412 on average. Since
/// the play time stands in the middle of a sender frame (on this simulated link it used to sit on a frame's edge,
/// where a millisecond's wobble played two frames or none), a verdict plays up to half a frame later at the host
/// and at each guest: 402 ms on average, against 383 before that.
#[test]
fn every_peer_agrees_on_a_contested_cube_within_a_round_trip_and_two_delays() {
    let frame = Duration::from_secs(1) / 60;
    let mut took = Vec::new();
    for seed in 20..28 {
        let mut sim = session(seed, 3);
        sim.run_idle_until(secs(3.0)).unwrap();
        contest(&mut sim);
        let grabbed = sim.now();
        loop {
            let until = sim.now() + frame;
            sim.run_idle_until(until).unwrap();
            let all = whose(&sim, CONTESTED);
            if all[0].1.is_some() && all.iter().all(|w| *w == all[0]) {
                break;
            }
            assert!(sim.now() < grabbed + secs(2.0), "seed {seed}: {all:?}");
        }
        took.push((sim.now() - grabbed).as_secs_f64() * 1000.0);
    }
    let mean = took.iter().sum::<f64>() / took.len() as f64;
    assert!(took.iter().all(|&ms| ms <= 450.0), "{took:?}");
    assert!(mean <= 405.0, "mean {mean} ms: {took:?}");
}
