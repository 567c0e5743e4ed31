//! A state type defined outside the codec (a shooter player snapshot) goes through the same acks, baselines,
//! delta paths and back ends as the codec's own types.

use physync_codec::encode::{pose_absolute, pose_residual, vec_residual};
use physync_codec::{
    AckTracker, Backend, Buckets, CodecError, Ctx, DeltaState, LinkConfig, PacketHeader,
    QuantConfig, QuantizedPose, ReceiveHistory, Stream, VecCtx, decode_packet, encode_packet,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Player {
    pose: QuantizedPose,
    view: [i32; 3],
    health: u8,
    ammo: u8,
}

const VIEW: VecCtx = VecCtx {
    bucket: Ctx::user(0, "view bucket"),
    axes: [
        Ctx::user(1, "yaw"),
        Ctx::user(2, "pitch"),
        Ctx::user(3, "roll"),
    ],
};
const VIEW_ABS: Ctx = Ctx::user(4, "view");
const STATS_CHANGED: Ctx = Ctx::user(5, "stats changed");
const HEALTH: Ctx = Ctx::user(6, "health");
const AMMO: Ctx = Ctx::user(7, "ammo");

fn stats<S: Stream>(s: &mut S, p: &mut Player) -> Result<(), CodecError> {
    s.u8(HEALTH, &mut p.health)?;
    s.u8(AMMO, &mut p.ammo)
}

impl DeltaState for Player {
    type Config = QuantConfig;

    fn predict(_config: &QuantConfig, _baseline: &Self, _frames: u16) -> Option<Self> {
        None
    }

    fn serialize_residual<S: Stream>(
        s: &mut S,
        config: &QuantConfig,
        value: &mut Self,
        reference: &Self,
    ) -> Result<(), CodecError> {
        pose_residual(s, config, &mut value.pose, &reference.pose)?;
        vec_residual(
            s,
            &VIEW,
            Buckets([7, 127, 2047]),
            &mut value.view,
            &reference.view,
        )?;
        if value.view.iter().any(|v| !(0..4096).contains(v)) {
            return Err(CodecError::Invalid { field: "view" });
        }
        let mut changed = (value.health, value.ammo) != (reference.health, reference.ammo);
        s.bool(STATS_CHANGED, &mut changed)?;
        if changed {
            stats(s, value)
        } else {
            value.health = reference.health;
            value.ammo = reference.ammo;
            Ok(())
        }
    }

    fn serialize_absolute<S: Stream>(
        s: &mut S,
        config: &QuantConfig,
        value: &mut Self,
    ) -> Result<(), CodecError> {
        pose_absolute(s, config, &mut value.pose)?;
        for v in &mut value.view {
            s.int(VIEW_ABS, v, 0, 4095)?;
        }
        stats(s, value)
    }
}

#[test]
fn player_snapshots_travel_as_deltas_on_both_back_ends() {
    let quant = QuantConfig::default();
    let players: Vec<Player> = (0..8)
        .map(|i| Player {
            pose: QuantizedPose::quantize(
                &quant,
                [i as f32, 1.0, -2.0],
                [0.0, 0.1 * i as f32, 0.0, 1.0],
            ),
            view: [100 * i, 2000, 0],
            health: 100,
            ammo: 30,
        })
        .collect();
    let order: Vec<u16> = (0..8).collect();
    for backend in [Backend::Bitpack, Backend::Arith] {
        let link = LinkConfig {
            backend,
            max_objects: 64,
            ..LinkConfig::default()
        };
        let mut tracker = AckTracker::new(link.max_objects);
        let mut history = ReceiveHistory::new(link.max_objects);
        let mut sizes = Vec::new();
        for tick in 0..4u16 {
            let now: Vec<Player> = players
                .iter()
                .map(|p| {
                    let mut p = *p;
                    p.pose.position[0] += i32::from(tick) * 20;
                    p.view[0] += i32::from(tick) * 3;
                    p.ammo -= tick as u8;
                    p
                })
                .collect();
            let header = PacketHeader {
                sequence: tick,
                ..PacketHeader::default()
            };
            let packet = encode_packet(
                &link,
                &quant,
                header,
                tick,
                &order,
                |id| now.get(usize::from(id)).copied(),
                &mut tracker,
            )
            .unwrap();
            let decoded =
                decode_packet::<Player>(&link, &quant, &packet.bytes, &mut history).unwrap();
            let expected: Vec<(u16, Player)> =
                order.iter().map(|&id| (id, now[usize::from(id)])).collect();
            assert_eq!(decoded.entries, expected);
            tracker.process_acks(tick, 0);
            sizes.push(packet.bytes.len());
        }
        assert!(
            sizes[3] * 3 < sizes[0] * 2,
            "{backend:?}: deltas should be well under the first, absolute packet: {sizes:?}"
        );
    }
}
