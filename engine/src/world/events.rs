//! Events a game shows: an object's authority moved to another player, or a hand took or let go of it.
//!
//! The world compares every object's authority and holder with the previous step's at the end of each
//! [`World::step`], whatever changed them (a touch, a grab, an update from the network, a return to default), and
//! queues one event per change. A game drains them with [`World::take_events`]; a game that never does loses the
//! oldest beyond [`MAX_QUEUED_EVENTS`], counted in [`World::dropped_events`].

use std::collections::VecDeque;

use super::authority::PlayerIndex;
use super::scene::ObjectId;
use super::{Holder, World};

/// Events kept for the game at most; older ones are dropped first.
pub const MAX_QUEUED_EVENTS: usize = 4096;

/// A change of who simulates or who holds an object, as this peer sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorldEvent {
    /// Another player (0: the host, the default authority) now simulates the object.
    AuthorityChanged {
        /// The object.
        object: ObjectId,
        /// Who had authority before.
        from: PlayerIndex,
        /// Who has it now.
        to: PlayerIndex,
    },
    /// The object was taken into a hand, let go, or passed between hands.
    OwnershipChanged {
        /// The object.
        object: ObjectId,
        /// Who held it before.
        from: Option<Holder>,
        /// Who holds it now.
        to: Option<Holder>,
    },
}

/// The last seen authority and holder of every object, and the queue of events for the game.
#[derive(Debug, Clone, Default)]
pub(crate) struct EventLog {
    seen: Vec<(PlayerIndex, Option<Holder>)>,
    queue: VecDeque<WorldEvent>,
    dropped: u64,
}

impl EventLog {
    fn push(&mut self, event: WorldEvent) {
        if self.queue.len() == MAX_QUEUED_EVENTS {
            self.queue.pop_front();
            self.dropped += 1;
        }
        self.queue.push_back(event);
    }
}

impl World {
    /// Queues an event for every object whose authority or holder differs from the last look.
    pub(crate) fn observe_changes(&mut self) {
        let log = &mut self.events;
        if log.seen.len() != self.objects.len() {
            log.seen.clear();
            log.seen.extend(
                self.objects
                    .iter()
                    .map(|o| (o.authority.view.authority, o.holder)),
            );
            return;
        }
        for (id, object) in self.objects.iter().enumerate() {
            let after = (object.authority.view.authority, object.holder);
            let before = std::mem::replace(&mut log.seen[id], after);
            let object = id as ObjectId;
            if before.0 != after.0 {
                log.push(WorldEvent::AuthorityChanged {
                    object,
                    from: before.0,
                    to: after.0,
                });
            }
            if before.1 != after.1 {
                log.push(WorldEvent::OwnershipChanged {
                    object,
                    from: before.1,
                    to: after.1,
                });
            }
        }
    }

    /// The authority and ownership changes seen since the last call, oldest first.
    pub fn take_events(&mut self) -> Vec<WorldEvent> {
        self.events.queue.drain(..).collect()
    }

    /// Events dropped because nobody took them in time.
    pub fn dropped_events(&self) -> u64 {
        self.events.dropped
    }
}
