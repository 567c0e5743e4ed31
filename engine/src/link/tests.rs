//! Two links talking to each other on simulated time.

use std::time::Duration;

use physync_codec::{AvatarState, Backend, BodyState, ObjectState, QuantConfig, StateRevisions};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const FRAME: Duration = Duration::from_nanos(16_666_667);

/// `n` objects drifting along x at different speeds, a third of them at rest.
fn objects(n: usize, frame: u64) -> Vec<ObjectState> {
    let q = QuantConfig::default();
    (0..n)
        .map(|i| {
            let at_rest = i % 3 == 0;
            let v = if at_rest { 0.0 } else { 0.5 + i as f32 * 0.01 };
            let t = frame as f32 / 60.0;
            ObjectState {
                body: BodyState::quantize(
                    &q,
                    [i as f32 * 0.3 - 10.0 + v * t, 0.5, 1.0],
                    [0.0, 0.0, 0.0, 1.0],
                    [v, 0.0, 0.0],
                    [0.0; 3],
                    at_rest,
                ),
                ..ObjectState::default()
            }
        })
        .collect()
}

fn avatar(player: u8, frame: u64) -> TimedAvatar {
    let q = QuantConfig::default();
    let mut state = AvatarState {
        player,
        ..AvatarState::default()
    };
    state.head.position = q.position.quantize([0.0, 1.7, frame as f32 * 0.001]);
    TimedAvatar::new(state, Duration::from_millis(frame % 9))
}

/// What a sender hands a link for `frame`: `objects`, each at the same priority and without revisions, and `avatars`.
fn equal_priority<'a>(
    frame: u64,
    objects: &'a [ObjectState],
    avatars: &'a [TimedAvatar],
) -> Outgoing<'a> {
    const ONES: [f32; 1024] = [1.0; 1024];
    Outgoing {
        frame,
        objects,
        revisions: None,
        priorities: &ONES[..objects.len()],
        avatars,
    }
}

#[test]
fn states_arrive_exactly_and_shrink_once_acks_flow() {
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let n = 40;
    let mut sizes = Vec::new();
    for frame in 0..120u64 {
        let now = FRAME * frame as u32;
        let states = objects(n, frame);
        let avatars = [avatar(1, frame)];
        let out = equal_priority(frame, &states, &avatars);
        let sent = a
            .build_packet(now, &out)
            .unwrap()
            .expect("60 Hz, budget room");
        assert!(sent.bytes.len() <= 1200);
        sizes.push(sent.bytes.len());
        let got = b.receive(now, &sent.bytes).unwrap();
        assert_eq!(got.frame, frame as u16);
        assert_eq!(got.avatars, avatars);
        for (id, s) in &got.objects {
            assert_eq!(*s, states[usize::from(*id)]);
        }
        // b answers with an empty datagram that carries its acks.
        let empty = Outgoing::acks_only(frame);
        let back = b.build_packet(now, &empty).unwrap().unwrap();
        assert!(back.objects.is_empty());
        a.receive(now, &back.bytes).unwrap();
    }
    // All 40 fit at first; once baselines are acked, the same objects cost a fraction of it.
    assert!(sizes[0] > 250, "{sizes:?}");
    assert!(sizes[119] * 3 < sizes[0], "{sizes:?}");
    assert_eq!(a.stats().packets_sent, 120);
    assert_eq!(b.stats().packets_received, 120);
    assert_eq!(a.stats().packets_lost, 0);
    assert_eq!(a.stats().rtt, Some(Duration::ZERO));
}

#[test]
fn the_byte_budget_and_the_send_rate_hold() {
    let settings = LinkSettings {
        bytes_per_second: 8_000,
        ..LinkSettings::default()
    };
    let mut a = StateLink::new(settings).unwrap();
    let n = 400;
    let mut bytes = 0;
    let mut packets = 0;
    for frame in 0..600u64 {
        let states = objects(n, frame);
        let out = equal_priority(frame, &states, &[]);
        if let Some(p) = a.build_packet(FRAME * frame as u32, &out).unwrap() {
            assert!(p.bytes.len() <= 1200);
            bytes += p.bytes.len();
            packets += 1;
        }
    }
    // Ten seconds at 8,000 bytes a second, plus the first full datagram.
    assert!(bytes <= 80_000 + 1200, "{bytes}");
    assert!(bytes > 75_000, "{bytes}");
    assert_eq!(packets, 600);

    let slow = LinkSettings {
        send_hz: 20,
        ..LinkSettings::default()
    };
    let mut a = StateLink::new(slow).unwrap();
    let sent = (0..600u64)
        .filter(|&frame| {
            let out = Outgoing::acks_only(frame);
            a.build_packet(FRAME * frame as u32, &out)
                .unwrap()
                .is_some()
        })
        .count();
    assert_eq!(sent, 200);
}

#[test]
fn round_trip_and_loss_are_estimated_from_acks() {
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let delay = 3; // frames each way: 50 ms
    let mut to_b = std::collections::VecDeque::new();
    let mut to_a = std::collections::VecDeque::new();
    let n = 10;
    for frame in 0..1200u64 {
        let now = FRAME * frame as u32;
        let states = objects(n, frame);
        let out = equal_priority(frame, &states, &[]);
        let p = a.build_packet(now, &out).unwrap().unwrap();
        if rng.random_bool(0.8) {
            to_b.push_back((frame + delay, p.bytes));
        }
        let empty = Outgoing::acks_only(frame);
        let q = b.build_packet(now, &empty).unwrap().unwrap();
        to_a.push_back((frame + delay, q.bytes));
        while to_b.front().is_some_and(|(at, _)| *at <= frame) {
            let (_, bytes) = to_b.pop_front().unwrap();
            for (id, s) in b.receive(now, &bytes).unwrap().objects {
                let sent_at = frame - delay;
                assert_eq!(s, objects(n, sent_at)[usize::from(id)]);
            }
        }
        while to_a.front().is_some_and(|(at, _)| *at <= frame) {
            let (_, bytes) = to_a.pop_front().unwrap();
            a.receive(now, &bytes).unwrap();
        }
    }
    let stats = a.stats();
    let rtt = stats.rtt.unwrap();
    // 50 ms each way plus up to one frame before the answer is built (b builds before reading this frame's
    // arrivals): 7 frames.
    assert!(
        rtt >= Duration::from_millis(100) && rtt <= Duration::from_millis(120),
        "{rtt:?}"
    );
    let lost = stats.packets_lost as f64 / (stats.packets_lost + stats.packets_acked) as f64;
    assert!((0.15..0.25).contains(&lost), "{lost}");
    assert!((0.05..0.4).contains(&stats.loss), "{}", stats.loss);
    assert_eq!(b.stats().decode_errors, 0);
}

#[test]
fn hostile_and_stale_datagrams() {
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let n = 8;
    let mut packets = Vec::new();
    for frame in 0..3u64 {
        let states = objects(n, frame);
        let avatars = [avatar(2, frame)];
        let out = equal_priority(frame, &states, &avatars);
        packets.push(a.build_packet(FRAME * frame as u32, &out).unwrap().unwrap());
    }
    // Newest first: the older datagrams decode, but carry nothing newer.
    let newest = b.receive(Duration::ZERO, &packets[2].bytes).unwrap();
    assert_eq!(newest.objects.len(), n);
    assert_eq!(newest.avatars.len(), 1);
    let stale = b.receive(Duration::ZERO, &packets[1].bytes).unwrap();
    assert!(stale.objects.is_empty() && stale.avatars.is_empty());

    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let good = &packets[0].bytes;
    for _ in 0..2000 {
        let mut bytes = good.clone();
        let len = rng.random_range(0..=bytes.len());
        bytes.truncate(len);
        for _ in 0..rng.random_range(0..4) {
            if !bytes.is_empty() {
                let i = rng.random_range(0..bytes.len());
                bytes[i] ^= 1 << rng.random_range(0..8);
            }
        }
        let _ = b.receive(Duration::ZERO, &bytes);
    }
    let junk: Vec<u8> = (0..1500).map(|_| rng.random()).collect();
    assert!(b.receive(Duration::ZERO, &junk).is_err());
    let other = LinkSettings {
        packet_type: 9,
        ..LinkSettings::default()
    };
    let mut c = StateLink::new(other).unwrap();
    let empty = Outgoing::acks_only(0);
    let wrong = c.build_packet(Duration::ZERO, &empty).unwrap().unwrap();
    assert_eq!(
        b.receive(Duration::ZERO, &wrong.bytes),
        Err(LinkError::WrongPacketType(9))
    );
    assert!(b.stats().decode_errors >= 2);
    assert!(
        StateLink::new(LinkSettings {
            send_hz: 0,
            ..LinkSettings::default()
        })
        .is_err()
    );
}

#[test]
fn acks_sent_before_anything_arrived_promote_nothing() {
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let n = 5;
    let empty = Outgoing::acks_only(0);
    // a's first datagram is lost; b, having received nothing, answers anyway.
    let states = objects(n, 0);
    let out = equal_priority(0, &states, &[]);
    let lost = a.build_packet(Duration::ZERO, &out).unwrap().unwrap();
    assert_ne!(lost.sequence, 0);
    let answer = b.build_packet(Duration::ZERO, &empty).unwrap().unwrap();
    a.receive(Duration::ZERO, &answer.bytes).unwrap();
    assert_eq!(a.stats().packets_acked, 0);
    // So a's next datagram is still coded without baselines, and b can read it.
    let states = objects(n, 1);
    let out = Outgoing {
        frame: 1,
        objects: &states,
        revisions: None,
        ..out
    };
    let next = a.build_packet(FRAME, &out).unwrap().unwrap();
    let got = b.receive(FRAME, &next.bytes).unwrap();
    assert_eq!(got.objects.len(), n);
}

#[test]
fn sample_offsets_are_clamped_and_travel_with_unchanged_avatars() {
    let far = TimedAvatar::new(AvatarState::default(), Duration::from_secs(5));
    assert_eq!(far.sample_offset_ms, MAX_SAMPLE_OFFSET_MS);
    assert_eq!(far.sample_offset(), Duration::from_millis(1023));
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let state = avatar(3, 7).state;
    for frame in 0..20u64 {
        let now = FRAME * frame as u32;
        // The pose stays put; only the sample offset moves, and it must arrive each time.
        let sent = [TimedAvatar::new(state, Duration::from_millis(frame * 3))];
        let out = equal_priority(frame, &[], &sent);
        let p = a.build_packet(now, &out).unwrap().unwrap();
        assert_eq!(p.avatars, vec![3]);
        assert_eq!(b.receive(now, &p.bytes).unwrap().avatars, sent);
        let empty = Outgoing {
            avatars: &[],
            ..out
        };
        let back = b.build_packet(now, &empty).unwrap().unwrap();
        a.receive(now, &back.bytes).unwrap();
    }
    // An avatar whose slot is not a player never goes out.
    let stray = [TimedAvatar::new(
        AvatarState {
            player: 16,
            ..AvatarState::default()
        },
        Duration::ZERO,
    )];
    let out = equal_priority(20, &[], &stray);
    let p = a.build_packet(FRAME * 20, &out).unwrap().unwrap();
    assert!(p.avatars.is_empty());
}

#[test]
fn a_tight_budget_still_carries_objects_beside_four_avatars() {
    let settings = LinkSettings {
        bytes_per_second: 48 * 60,
        ..LinkSettings::default()
    };
    let mut a = StateLink::new(settings).unwrap();
    let mut b = StateLink::new(settings).unwrap();
    let n = 30;
    let mut with_objects = 0;
    let mut with_avatars = 0;
    let mut total = 0;
    let mut delivered = vec![false; n];
    for frame in 0..240u64 {
        let now = FRAME * frame as u32;
        let states = objects(n, frame);
        // Four avatars holding things, whose absolute form alone outgrows a 48-byte datagram.
        let avatars: Vec<TimedAvatar> = (0..4)
            .map(|p| {
                let mut t = avatar(p, frame);
                for (h, hand) in t.state.hands.iter_mut().enumerate() {
                    hand.held = Some(physync_codec::HeldObject {
                        object: 100 + u16::from(p) * 2 + h as u16,
                        ..Default::default()
                    });
                }
                t
            })
            .collect();
        let out = equal_priority(frame, &states, &avatars);
        if let Some(p) = a.build_packet(now, &out).unwrap() {
            total += p.bytes.len();
            with_objects += usize::from(!p.objects.is_empty());
            with_avatars += usize::from(!p.avatars.is_empty());
            let got = b.receive(now, &p.bytes).unwrap();
            for (id, s) in got.objects {
                assert_eq!(s, states[usize::from(id)]);
                delivered[usize::from(id)] = true;
            }
        }
    }
    // Four seconds at 48 bytes a frame, plus the full first datagram.
    assert!(total <= 4 * 48 * 60 + 1200, "{total}");
    // Avatars go first; the objects still get through, every one of them.
    assert!(with_avatars > 200, "{with_avatars}");
    assert!(with_objects > 40, "{with_objects}");
    assert!(delivered.iter().all(|&d| d));
}

/// One frame both ways: `a` sends `states` with `priorities`, `b` answers with its acks. Returns what `b` got.
fn exchange(
    a: &mut StateLink,
    b: &mut StateLink,
    frame: u64,
    states: &[ObjectState],
    priorities: &[f32],
) -> ReceivedUpdate {
    let now = FRAME * frame as u32;
    let out = Outgoing {
        frame,
        objects: states,
        revisions: None,
        priorities,
        avatars: &[],
    };
    let sent = a.build_packet(now, &out).unwrap().expect("one a frame");
    let got = b.receive(now, &sent.bytes).expect("every datagram decodes");
    let empty = Outgoing::acks_only(frame);
    let ack = b.build_packet(now, &empty).unwrap().expect("one a frame");
    a.receive(now, &ack.bytes).unwrap();
    got
}

#[test]
fn an_object_idle_for_any_number_of_packets_syncs_again() {
    // Object 0 travels in every packet; object 1 is sent, left idle (never sent: at rest on another peer, or
    // held) for longer than half the sequence space and across the wrap of the 16-bit counter, then sent again.
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let mut frame = 0u64;
    let mut run = |frames: u64, idle: bool, a: &mut StateLink, b: &mut StateLink| {
        let mut got_idle_object = 0;
        for _ in 0..frames {
            let states = objects(2, frame);
            let priorities = [1.0, if idle { -1.0 } else { 1.0 }];
            let got = exchange(a, b, frame, &states, &priorities);
            for (id, s) in &got.objects {
                assert_eq!(*s, states[usize::from(*id)], "frame {frame}");
                got_idle_object += usize::from(*id == 1);
            }
            frame += 1;
        }
        got_idle_object
    };
    assert!(run(100, false, &mut a, &mut b) > 90);
    // Idle from packet 100 to 45,100: 45,000 packets, past 32,768.
    assert_eq!(run(45_000, true, &mut a, &mut b), 0);
    assert!(
        run(100, false, &mut a, &mut b) > 90,
        "the idle object syncs again"
    );
    // Idle again across the wrap from 65,535 to 0.
    assert_eq!(run(30_000, true, &mut a, &mut b), 0);
    assert!(
        run(100, false, &mut a, &mut b) > 90,
        "and again after the wrap"
    );
    assert_eq!(b.stats().decode_errors, 0);
    assert_eq!(a.stats().decode_errors, 0);
}

/// Three links that each lose 3% report about 3%: the loss figure counts a window of resolved packets (a smoothed
/// average of the last ten or so read anywhere from 0.02% to 10.8% on such links).
#[test]
fn reported_loss_agrees_with_what_the_link_lost() {
    for seed in [1, 2, 3] {
        let mut a = StateLink::new(LinkSettings::default()).unwrap();
        let mut b = StateLink::new(LinkSettings::default()).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (mut sent, mut dropped) = (0u32, 0u32);
        let mut readings = Vec::new();
        let mut to_a = std::collections::VecDeque::new();
        for frame in 0..3000u64 {
            let now = FRAME * frame as u32;
            let states = objects(4, frame);
            let out = equal_priority(frame, &states, &[]);
            let p = a.build_packet(now, &out).unwrap().unwrap();
            sent += 1;
            if rng.random_bool(0.97) {
                b.receive(now, &p.bytes).unwrap();
            } else {
                dropped += 1;
            }
            let empty = Outgoing::acks_only(frame);
            to_a.push_back((
                frame + 3,
                b.build_packet(now, &empty).unwrap().unwrap().bytes,
            ));
            while to_a.front().is_some_and(|(at, _)| *at <= frame) {
                let (_, bytes) = to_a.pop_front().unwrap();
                a.receive(now, &bytes).unwrap();
            }
            // What a status line would show, once a second after the first twenty.
            if frame >= 1200 && frame % 60 == 0 {
                readings.push(a.stats().loss);
            }
        }
        let lost = f64::from(dropped) / f64::from(sent);
        for loss in readings {
            assert!(
                (loss - lost).abs() < 0.02,
                "seed {seed}: reported {loss:.4}, the link lost {lost:.4}"
            );
        }
    }
}

/// A datagram overtaken on the way (link jitter reorders datagrams sent a frame apart) is still the sender's
/// frame: a jitter buffer plays its avatar and its object updates in their slot. Here it carries a throw, the
/// hand opening and the thrown object's first free state. Dropped as stale, the hand opened a frame late, or
/// several while the datagrams after it kept overtaking, and every peer that had to agree on who holds a
/// contested cube waited for the next avatar that got through in order; with only its avatar kept, the hand
/// opened in its slot while the object's next state came a frame later, 10 cm on.
#[test]
fn an_overtaken_datagram_still_plays_its_frame_in_its_slot() {
    use crate::session::{DEFAULT_JITTER_DELAY, FrameJitterBuffer};
    use physync_codec::HeldObject;
    let quant = QuantConfig::default();
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let thrown = |frame: u64| ObjectState {
        body: BodyState::quantize(
            &quant,
            [frame as f32 * 0.1, 1.0, 0.0],
            [0.0, 0.0, 0.0, 1.0],
            [6.0, 0.0, 0.0],
            [0.0; 3],
            false,
        ),
        ..ObjectState::default()
    };
    let mut packets = Vec::new();
    for frame in 0..6u64 {
        let mut state = avatar(2, frame).state;
        if frame < 3 {
            state.hands[1].held = Some(HeldObject {
                object: 0,
                relative: state.hands[1].pose,
                authority_seq: 1,
                ownership_seq: 1,
            });
        }
        let avatars = [TimedAvatar::new(state, Duration::ZERO)];
        let objects = [thrown(frame)];
        let out = Outgoing {
            frame,
            objects: if frame < 3 { &[] } else { &objects },
            revisions: None,
            priorities: if frame < 3 { &[] } else { &[1.0] },
            avatars: &avatars,
        };
        packets.push(a.build_packet(FRAME * frame as u32, &out).unwrap().unwrap());
    }
    // Every datagram takes 80 ms, but frame 3's takes 110: frame 4's overtakes it.
    let mut buffer = FrameJitterBuffer::new(DEFAULT_JITTER_DELAY, 60, quant);
    let mut arrivals: Vec<(Duration, usize)> = (0..6)
        .map(|k| {
            let late = if k == 3 { 0.110 } else { 0.080 };
            (FRAME * k as u32 + Duration::from_secs_f64(late), k)
        })
        .collect();
    arrivals.sort();
    assert_eq!(arrivals[3].1, 4, "frame 4 arrives before frame 3");
    for (arrival, k) in arrivals {
        let got = b.receive(arrival, &packets[k].bytes).unwrap();
        buffer.push(arrival, got.frame, &got.avatars, &got.objects);
        let late = &got.overtaken;
        buffer.push_overtaken(arrival, got.frame, &late.avatars, &late.objects);
    }
    // Play time reaches frame 3 at 3 frames + the 80 ms fastest delay + the play-out delay.
    let slot =
        FRAME * 3 + Duration::from_millis(80) + DEFAULT_JITTER_DELAY + Duration::from_millis(1);
    let shown = buffer.sample(slot, 2).unwrap();
    assert_eq!(
        shown.hands[1].held, None,
        "the hand opens in frame 3's slot"
    );
    let mut due = Vec::new();
    buffer.pop_objects(slot, &mut due);
    assert_eq!(
        due,
        vec![(0, thrown(3))],
        "with the object's state of frame 3"
    );
    buffer.pop_objects(slot + FRAME, &mut due);
    assert_eq!(due, vec![(0, thrown(3)), (0, thrown(4))]);
    // A receiver applying states on arrival (no jitter buffer) still sees nothing overtaken as fresh.
    let mut c = StateLink::new(LinkSettings::default()).unwrap();
    c.receive(Duration::ZERO, &packets[4].bytes).unwrap();
    let overtaken = c.receive(Duration::ZERO, &packets[3].bytes).unwrap();
    assert!(overtaken.avatars.is_empty() && overtaken.objects.is_empty());
    assert_eq!(overtaken.overtaken.avatars.len(), 1);
    assert_eq!(overtaken.overtaken.objects.len(), 1);
}

#[test]
fn a_link_that_names_revisions_sends_the_bytes_of_one_that_compares() {
    for backend in [Backend::Arith, Backend::Bitpack] {
        let settings = LinkSettings {
            codec: LinkConfig {
                backend,
                ..LinkSettings::default().codec
            },
            ..LinkSettings::default()
        };
        let mut revised = StateLink::new(settings).unwrap();
        let mut compared = StateLink::new(settings).unwrap();
        let mut b = StateLink::new(settings).unwrap();
        let mut noted = StateRevisions::new();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        // More objects than a bit-packed datagram holds: there the accumulator takes turns and baselines age.
        let n = 600;
        for frame in 0..300u64 {
            let now = FRAME * frame as u32;
            let mut states = objects(n, frame);
            // Every fifth object's authority sequence changes and changes back.
            for s in states.iter_mut().step_by(5) {
                s.authority_seq = ((frame / 15) % 2) as u16;
            }
            let priorities = vec![1.0; n];
            let out = |revisions| Outgoing {
                frame,
                objects: &states,
                revisions,
                priorities: &priorities,
                avatars: &[],
            };
            let sent = revised
                .build_packet(now, &out(Some(noted.note(&states))))
                .unwrap();
            let plain = compared.build_packet(now, &out(None)).unwrap();
            assert_eq!(sent, plain, "{backend:?} frame {frame}");
            if let Some(p) = sent
                && rng.random::<f64>() > 0.2
            {
                b.receive(now, &p.bytes).unwrap();
            }
            let empty = Outgoing::acks_only(frame);
            if let Some(ack) = b.build_packet(now, &empty).unwrap()
                && rng.random::<f64>() > 0.2
            {
                revised.receive(now, &ack.bytes).unwrap();
                compared.receive(now, &ack.bytes).unwrap();
            }
        }
    }
}

#[test]
fn a_datagram_rejected_after_its_sections_stores_nothing() {
    // A datagram whose sections decode but which goes on past its last one (a byte a sender never writes) is
    // rejected whole: none of its objects or avatars may be kept as states received in its packet, or a later
    // datagram naming that packet as a baseline would decode against states its sender never saw acked.
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let n = 40;
    let states = objects(n, 0);
    let avatars = [avatar(1, 0)];
    let out = equal_priority(0, &states, &avatars);
    let sent = a.build_packet(Duration::ZERO, &out).unwrap().unwrap();
    let mut bytes = sent.bytes.clone();
    bytes.push(0xA5);
    assert!(b.receive(Duration::ZERO, &bytes).is_err());
    assert!(
        (0..n as u16).all(|id| b.objects_received.get(id, sent.sequence).is_none()),
        "objects of a rejected datagram were kept"
    );
    assert!(b.avatars_received.get(1, sent.sequence).is_none());
    // The datagram as sent is then taken whole.
    let got = b.receive(Duration::ZERO, &sent.bytes).unwrap();
    assert_eq!(got.objects.len(), n);
    assert!((0..n as u16).all(|id| b.objects_received.get(id, sent.sequence).is_some()));
    assert!(b.avatars_received.get(1, sent.sequence).is_some());
}

#[test]
fn a_steady_link_receives_without_allocating_a_copy_of_its_history() {
    // A running link's receive allocates a few buffers a datagram, counted on this thread by the crate's test
    // allocator, not copies of its receive histories.
    let mut a = StateLink::new(LinkSettings::default()).unwrap();
    let mut b = StateLink::new(LinkSettings::default()).unwrap();
    let n = 60;
    let mut last = (0, 0, 0);
    for frame in 0..200u64 {
        let now = FRAME * frame as u32;
        let states = objects(n, frame);
        let avatars = [avatar(1, frame)];
        let out = equal_priority(frame, &states, &avatars);
        let sent = a.build_packet(now, &out).unwrap().unwrap();
        let (allocations, got) =
            physync_codec::alloc_count::counted(|| b.receive(now, &sent.bytes));
        let got = got.unwrap();
        assert_eq!(got.avatars, avatars, "frame {frame}");
        last = (allocations, got.objects.len(), got.avatars.len());
        let back = b
            .build_packet(now, &Outgoing::acks_only(frame))
            .unwrap()
            .unwrap();
        a.receive(now, &back.bytes).unwrap();
    }
    assert!(
        last.1 > 0 && last.2 == 1,
        "objects and an avatar arrive: {last:?}"
    );
    // Measured: the range decoder and its model table (three), each section's entries and the update's avatars,
    // the acks' lists. When the avatar section was checked against a fresh copy of the avatar history, the copy
    // allocated each of its 128 slots' blocks again: 142 allocations a datagram.
    assert!(
        last.0 <= 12,
        "allocations of one steady receive: {}",
        last.0
    );
}
