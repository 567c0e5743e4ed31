//! How a peer host runs: scene, player count, rates, timeouts, who is refused, and where objects may be.

use std::net::IpAddr;
use std::time::Duration;

use physync_codec::QuantConfig;
use physync_engine::link::LinkSettings;
use physync_engine::session::{DEFAULT_JITTER_DELAY, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION};
use physync_engine::world::WorldConfig;
use physync_engine::world::scene::SceneSpec;

/// The box objects must stay in; a guest update placing one outside is refused and counted. Generous around
/// the scene's floor: thrown cubes fly, and may fall off the edge, but never this far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorldBounds {
    /// Smallest x, y, z (m).
    pub min: [f32; 3],
    /// Largest x, y, z (m).
    pub max: [f32; 3],
}

impl WorldBounds {
    /// The floor's square widened by 5 m, from 2 m below the floor to 30 m above it.
    pub fn around_floor(floor_half_extent: f32) -> Self {
        let h = floor_half_extent + 5.0;
        Self {
            min: [-h, -2.0, -h],
            max: [h, 30.0, h],
        }
    }

    /// The square around the scene's level geometry widened by 5 m, from 2 m below y = 0 to 30 m above the
    /// level's highest point (for a flat floor: [`WorldBounds::around_floor`]), never beyond the quantization box.
    pub fn around_scene(scene: &SceneSpec) -> Self {
        let h = scene.floor_half_extent() + 5.0;
        let (_, top) = scene.level_bounds();
        let q = scene.quantization;
        Self {
            min: [
                (-h).max(q.min[0]),
                (-2.0f32).max(q.min[1]),
                (-h).max(q.min[2]),
            ],
            max: [
                h.min(q.max[0]),
                (top.y.max(0.0) + 30.0).min(q.max[1]),
                h.min(q.max[2]),
            ],
        }
    }

    /// Whether a position lies inside.
    pub fn contains(&self, p: [f32; 3]) -> bool {
        (0..3).all(|i| p[i] >= self.min[i] && p[i] <= self.max[i])
    }
}

/// Players a host admits unless configured otherwise (the host included); up to
/// [`physync_engine::world::avatar::MAX_PLAYERS`].
pub const DEFAULT_PLAYERS: u8 = 4;

/// Everything a [`super::PeerHost`] is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct HostConfig {
    /// The scene every player builds; guests download it at join.
    pub scene: SceneSpec,
    /// Players admitted, the host included (2..=16; 4 by default).
    pub max_players: u8,
    /// The simulation (its `local_player` is forced to 0, the host).
    pub world: WorldConfig,
    /// Each guest link's codec, send rate (60 Hz) and byte budget (32,000 B/s = 256 kbps); `max_objects` is set
    /// from the scene.
    pub link: LinkSettings,
    /// Protocol id control messages must carry.
    pub protocol_id: u16,
    /// Protocol version a join request must name.
    pub version: u16,
    /// How often a keep-alive goes to each guest on the reliable channel (also keeps laminar's acks flowing).
    pub keepalive_interval: Duration,
    /// A guest not heard from for this long is dropped.
    pub timeout: Duration,
    /// Addresses refused with [`physync_engine::session::RejectReason::Banned`].
    pub banned: Vec<IpAddr>,
    /// Where objects may be; `None` derives it from the scene's level ([`WorldBounds::around_scene`]).
    pub bounds: Option<WorldBounds>,
    /// Frames a corrected object stays at top priority on the link to the guest being corrected.
    pub correction_frames: u32,
    /// Guests' frames (avatars with the object updates sent beside them) play this far behind the fastest
    /// arrival (100 ms by default); with `adaptive_jitter_delay`, at most this far.
    pub jitter_delay: Duration,
    /// Whether each guest's frames play only as far behind as that link's measured jitter needs (see
    /// [`physync_engine::session::FrameJitterBuffer::adaptive`]); on by default.
    pub adaptive_jitter_delay: bool,
    /// What a guest's object update may claim physically.
    pub plausibility: Plausibility,
}

/// The physical limits the host holds guests' object updates to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plausibility {
    /// Fastest an object may move (m/s).
    pub max_speed: f32,
    /// Fastest an object may spin (rad/s).
    pub max_spin: f32,
    /// How far (m) a claimed position may lie from where the host has the object beyond what the faster of
    /// the two velocities covers in the time since the host last accepted the object from that guest (contacts
    /// the host resolved differently, quantization).
    pub slack_m: f32,
    /// The longest gap (s) the speed allowance runs over: an object not heard of for longer still may not jump
    /// further than this much motion.
    pub max_gap_s: f32,
}

impl Default for Plausibility {
    fn default() -> Self {
        Self {
            max_speed: 20.0,
            max_spin: 40.0,
            slack_m: 1.5,
            max_gap_s: 0.5,
        }
    }
}

impl HostConfig {
    /// Defaults for `scene`: 4 players, 60 Hz steps and sends, 256 kbps per link, keep-alives every 250 ms, a
    /// 5 s timeout.
    pub fn new(scene: SceneSpec) -> Self {
        Self {
            scene,
            max_players: DEFAULT_PLAYERS,
            world: WorldConfig::default(),
            link: LinkSettings::default(),
            protocol_id: PEER_PROTOCOL_ID,
            version: PEER_PROTOCOL_VERSION,
            keepalive_interval: Duration::from_millis(250),
            timeout: Duration::from_secs(5),
            banned: Vec::new(),
            bounds: None,
            correction_frames: 10,
            jitter_delay: DEFAULT_JITTER_DELAY,
            adaptive_jitter_delay: true,
            plausibility: Plausibility::default(),
        }
    }

    /// The quantization shared by world and links: the scene's.
    pub fn quant(&self) -> QuantConfig {
        self.scene.quant()
    }
}
