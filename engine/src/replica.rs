//! A replica harness: two [`World`]s in one process, an authority (the host, player 0) and a replica (a guest),
//! their states flowing both ways through a [`StateLink`] each and the real codec, once per 60 Hz frame, over
//! simulated links with loss and one-way delay drawn by the transport's [`LinkConditioner`].
//!
//! Each [`Replica::step`] is one frame: both worlds step; each side's link builds its datagram (the authority's
//! carries object states in priority order and its avatar; the replica's carries the objects under its authority,
//! its avatar, and the acks that make the authority's baselines advance); the conditioner decides when each
//! datagram arrives; datagrams due by the end of the frame are decoded and applied (objects through
//! [`World::receive_object_state`], avatars through [`World::apply_avatar_state`]). Drive input on the authority
//! through [`Replica::authority_mut`] before a step.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use physync_codec::{ObjectState, StateRevisions};

use crate::link::{LinkError, LinkSettings, Outgoing, StateLink, TimedAvatar};
use crate::transport::{Delivery, LinkConditioner, LinkConfig as Conditions, TransportError};
use crate::world::authority::{DEFAULT_AUTHORITY, Direction, PlayerIndex};
use crate::world::scene::SceneSpec;
use crate::world::{UnknownObject, World, WorldConfig};

#[cfg(test)]
mod tests;

/// How the two worlds and the link between them are set up.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicaConfig {
    /// Both worlds' simulation settings (the replica's `local_player` is replaced by `replica_player`).
    pub world: WorldConfig,
    /// Both links' settings.
    pub link: LinkSettings,
    /// The network from authority to replica.
    pub to_replica: Conditions,
    /// The network from replica to authority.
    pub to_authority: Conditions,
    /// The replica's player index (1..=3).
    pub replica_player: PlayerIndex,
    /// Seed of the conditioners.
    pub seed: u64,
}

impl ReplicaConfig {
    /// Default worlds and links, with `loss` and `one_way_delay` in both directions.
    pub fn lossy(loss: f64, one_way_delay: Duration, seed: u64) -> Self {
        let conditions = Conditions {
            latency: one_way_delay,
            loss,
            ..Conditions::ideal()
        };
        Self {
            world: WorldConfig::default(),
            link: LinkSettings::default(),
            to_replica: conditions,
            to_authority: conditions,
            replica_player: 1,
            seed,
        }
    }
}

/// Why the harness stopped.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// A link failed to build or read a datagram (with the real codec on both ends this is a bug).
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The link conditions are invalid.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A datagram named an object the scene lacks.
    #[error(transparent)]
    UnknownObject(#[from] UnknownObject),
    /// The replica's player index is the host's or out of range.
    #[error("replica player {0} is not a guest slot")]
    BadPlayer(PlayerIndex),
}

/// What one frame moved over the links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameTraffic {
    /// Bytes of the datagram the authority built this frame (0 if none).
    pub bytes_to_replica: usize,
    /// Objects in it.
    pub objects_to_replica: usize,
    /// Bytes of the datagram the replica built this frame (0 if none).
    pub bytes_to_authority: usize,
    /// Datagrams the replica decoded this frame.
    pub delivered_to_replica: usize,
    /// Datagrams the authority decoded this frame.
    pub delivered_to_authority: usize,
}

/// Datagrams on their way, released by arrival time (ties in send order).
#[derive(Default)]
struct InFlight {
    queue: BinaryHeap<Reverse<(Duration, u64, Vec<u8>)>>,
    sent: u64,
}

impl InFlight {
    fn push(&mut self, at: Duration, bytes: Vec<u8>) {
        self.queue.push(Reverse((at, self.sent, bytes)));
        self.sent += 1;
    }

    fn pop_due(&mut self, now: Duration) -> Option<Vec<u8>> {
        if self.queue.peek()?.0.0 > now {
            return None;
        }
        self.queue.pop().map(|Reverse((_, _, bytes))| bytes)
    }
}

/// One side of the harness: its world, its link, and the network its datagrams cross.
struct Side {
    world: World,
    link: StateLink,
    network: LinkConditioner,
    in_flight: InFlight,
    /// Which wire states changed, noted at each send.
    revisions: StateRevisions<ObjectState>,
}

impl Side {
    fn send(&mut self, now: Duration, frame: u64) -> Result<(usize, usize), ReplicaError> {
        let objects = self.world.object_states();
        let priorities = self.world.priorities();
        let player = self.world.local_player();
        let avatars = [TimedAvatar::new(
            self.world.avatar_state(player),
            Duration::ZERO,
        )];
        let out = Outgoing {
            frame,
            objects: &objects,
            revisions: Some(self.revisions.note(&objects)),
            priorities: &priorities,
            avatars: &avatars,
        };
        let Some(packet) = self.link.build_packet(now, &out)? else {
            return Ok((0, 0));
        };
        let schedule = self
            .network
            .schedule(now, Delivery::Unreliable, packet.bytes.len());
        for &at in schedule.times() {
            self.in_flight.push(at, packet.bytes.clone());
        }
        Ok((packet.bytes.len(), packet.objects.len()))
    }
}

/// Reads every datagram `from` sent that has arrived by `now` into `to`'s link and world.
fn deliver(
    from: &mut Side,
    to: &mut Side,
    now: Duration,
    direction: Direction,
) -> Result<usize, ReplicaError> {
    let mut delivered = 0;
    while let Some(bytes) = from.in_flight.pop_due(now) {
        let update = to.link.receive(now, &bytes)?;
        for (id, state) in &update.objects {
            to.world.receive_object_state(*id, direction, state)?;
        }
        for avatar in &update.avatars {
            to.world.apply_avatar_state(&avatar.state);
        }
        delivered += 1;
    }
    Ok(delivered)
}

/// The authority and the replica, and the simulated network between them.
pub struct Replica {
    authority: Side,
    replica: Side,
    replica_player: PlayerIndex,
    frame: u64,
    frame_time: Duration,
}

impl Replica {
    /// Builds both worlds from `scene` and the links between them.
    pub fn new(scene: &SceneSpec, config: ReplicaConfig) -> Result<Self, ReplicaError> {
        let player = config.replica_player;
        if player == DEFAULT_AUTHORITY || usize::from(player) >= crate::world::avatar::MAX_PLAYERS {
            return Err(ReplicaError::BadPlayer(player));
        }
        let host_world = WorldConfig {
            local_player: DEFAULT_AUTHORITY,
            ..config.world
        };
        let guest_world = WorldConfig {
            local_player: player,
            ..config.world
        };
        let side =
            |world: WorldConfig, network: Conditions, seed: u64| -> Result<Side, ReplicaError> {
                Ok(Side {
                    world: World::new(world, scene),
                    link: StateLink::new(config.link)?,
                    network: LinkConditioner::new(network, seed)?,
                    in_flight: InFlight::default(),
                    revisions: StateRevisions::new(),
                })
            };
        Ok(Self {
            authority: side(host_world, config.to_replica, config.seed)?,
            replica: side(guest_world, config.to_authority, config.seed ^ 0x5EED)?,
            replica_player: player,
            frame: 0,
            frame_time: Duration::from_secs(1) / config.world.step_hz,
        })
    }

    /// Runs one frame: both worlds step, both links send, and what has arrived by the frame's time is applied.
    pub fn step(&mut self) -> Result<FrameTraffic, ReplicaError> {
        self.authority.world.step();
        self.replica.world.step();
        self.frame += 1;
        let now = self.now();
        let (bytes_to_replica, objects_to_replica) = self.authority.send(now, self.frame)?;
        let (bytes_to_authority, _) = self.replica.send(now, self.frame)?;
        let delivered_to_replica = deliver(
            &mut self.authority,
            &mut self.replica,
            now,
            Direction::HostToGuest {
                guest: self.replica_player,
            },
        )?;
        let delivered_to_authority = deliver(
            &mut self.replica,
            &mut self.authority,
            now,
            Direction::GuestToHost {
                sender: self.replica_player,
            },
        )?;
        Ok(FrameTraffic {
            bytes_to_replica,
            objects_to_replica,
            bytes_to_authority,
            delivered_to_replica,
            delivered_to_authority,
        })
    }

    /// Simulated time: frames stepped times the frame length.
    pub fn now(&self) -> Duration {
        self.frame_time * self.frame as u32
    }

    /// Frames stepped.
    pub fn frame(&self) -> u64 {
        self.frame
    }

    /// The authority's world.
    pub fn authority(&self) -> &World {
        &self.authority.world
    }

    /// The authority's world, to drive input before a step.
    pub fn authority_mut(&mut self) -> &mut World {
        &mut self.authority.world
    }

    /// The replica's world.
    pub fn replica(&self) -> &World {
        &self.replica.world
    }

    /// The replica's world, to drive its player's input before a step.
    pub fn replica_mut(&mut self) -> &mut World {
        &mut self.replica.world
    }

    /// The authority's link to the replica.
    pub fn authority_link(&self) -> &StateLink {
        &self.authority.link
    }

    /// The replica's link to the authority.
    pub fn replica_link(&self) -> &StateLink {
        &self.replica.link
    }
}
