//! How a peer guest joins and runs.

use std::net::SocketAddr;
use std::time::Duration;

use physync_engine::link::LinkSettings;
use physync_engine::session::{DEFAULT_JITTER_DELAY, PEER_PROTOCOL_ID, PEER_PROTOCOL_VERSION};
use physync_engine::world::WorldConfig;

/// Everything a [`super::PeerGuest`] is configured with.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestConfig {
    /// The host's address.
    pub host: SocketAddr,
    /// Random per join attempt (the caller's seeded randomness picks it); echoed by the host's answer.
    pub nonce: u64,
    /// Protocol id control messages carry.
    pub protocol_id: u16,
    /// Protocol version the join request names.
    pub version: u16,
    /// A join request is re-sent this often until answered (a lost reliable message may stay lost for long).
    pub join_retry: Duration,
    /// While the scene downloads, chunks still missing this long after a request are asked for again.
    pub scene_retry: Duration,
    /// How often a keep-alive goes to the host on the reliable channel.
    pub keepalive_interval: Duration,
    /// A host not heard from for this long (or a join not answered) ends the session.
    pub timeout: Duration,
    /// The host's frames (avatars with the object updates sent beside them) play this far behind the fastest
    /// arrival (100 ms by default); with `adaptive_jitter_delay`, at most this far.
    pub jitter_delay: Duration,
    /// Whether the host's frames play only as far behind as the link's measured jitter needs (see
    /// [`physync_engine::session::FrameJitterBuffer::adaptive`]); on by default.
    pub adaptive_jitter_delay: bool,
    /// The link to the host: codec, send rate, byte budget. `max_objects`, the quantization and the send rate
    /// are taken from the host's scene setup.
    pub link: LinkSettings,
    /// The simulation; `step_hz` and `local_player` are taken from the host's answer.
    pub world: WorldConfig,
}

impl GuestConfig {
    /// Defaults for joining `host`: retry every 500 ms, scene chunks asked again after 100 ms, keep-alives every 250 ms, 5 s timeout, 100 ms jitter
    /// buffer, 256 kbps up.
    pub fn new(host: SocketAddr, nonce: u64) -> Self {
        Self {
            host,
            nonce,
            protocol_id: PEER_PROTOCOL_ID,
            version: PEER_PROTOCOL_VERSION,
            join_retry: Duration::from_millis(500),
            scene_retry: Duration::from_millis(100),
            keepalive_interval: Duration::from_millis(250),
            timeout: Duration::from_secs(5),
            jitter_delay: DEFAULT_JITTER_DELAY,
            adaptive_jitter_delay: true,
            link: LinkSettings::default(),
            world: WorldConfig::default(),
        }
    }
}
