//! A running link's receive path allocates a few buffers a datagram, not copies of its receive history: a counting
//! global allocator counts the allocations of one steady-state `StateLink::receive`.

use std::time::Duration;

use physync_codec::alloc_count::{CountingAllocator, counted};
use physync_codec::{AvatarState, BodyState, ObjectState, QuantConfig};
use physync_engine::link::{LinkSettings, Outgoing, StateLink, TimedAvatar};

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const FRAME: Duration = Duration::from_nanos(16_666_667);

/// `n` cubes, every other one sliding along x.
fn objects(n: usize, frame: u64) -> Vec<ObjectState> {
    let q = QuantConfig::default();
    (0..n)
        .map(|i| {
            let v = if i % 2 == 0 { 0.0 } else { 0.5 };
            ObjectState {
                body: BodyState::quantize(
                    &q,
                    [i as f32 * 0.3 + v * frame as f32 / 60.0, 0.5, 1.0],
                    [0.0, 0.0, 0.0, 1.0],
                    [v, 0.0, 0.0],
                    [0.0; 3],
                    v == 0.0,
                ),
                ..ObjectState::default()
            }
        })
        .collect()
}

#[test]
fn a_steady_link_receives_without_allocating_a_copy_of_its_history() {
    let (mut a, mut b) = (
        StateLink::new(LinkSettings::default()).unwrap(),
        StateLink::new(LinkSettings::default()).unwrap(),
    );
    let n = 60;
    let mut last = (0, 0, 0);
    for frame in 0..200u64 {
        let now = FRAME * frame as u32;
        let states = objects(n, frame);
        let mut avatar = AvatarState {
            player: 1,
            ..AvatarState::default()
        };
        avatar.head.position[2] = frame as i32;
        let avatars = [TimedAvatar::new(avatar, Duration::ZERO)];
        let out = Outgoing {
            frame,
            objects: &states,
            revisions: None,
            priorities: &vec![1.0; n],
            avatars: &avatars,
        };
        let sent = a
            .build_packet(now, &out)
            .unwrap()
            .expect("60 Hz, budget room");
        let (allocations, got) = counted(|| b.receive(now, &sent.bytes));
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
    // the acks' lists (nine small buffers in all). Validating the avatar section against a fresh copy of the
    // avatar history allocated each of its 128 slots' blocks again: 142 allocations a datagram.
    assert!(
        last.0 <= 12,
        "allocations of one steady receive: {}",
        last.0
    );
}
