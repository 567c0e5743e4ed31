//! Entity ids for shots and hit effects. The server numbers what it creates from the lower half of the `u32`
//! range; a client numbers the shots and effects it predicts from the upper half, so a predicted entity can never
//! be confused with one the server created in a different order (seed 000).

use thiserror::Error;

/// First id of the client-local range; server ids are below it.
pub const CLIENT_LOCAL_BASE: u32 = 1 << 31;

/// Id of a short-lived entity (a shot, a hit effect).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityId(pub u32);

impl EntityId {
    /// True when a client created this id for something it predicted.
    pub fn is_client_local(self) -> bool {
        self.0 >= CLIENT_LOCAL_BASE
    }

    /// Validates an id read from a server packet: the server never sends a client-local id.
    pub fn from_server(raw: u32) -> Result<Self, IdRangeError> {
        if raw >= CLIENT_LOCAL_BASE {
            Err(IdRangeError::ClientRangeFromServer(raw))
        } else {
            Ok(Self(raw))
        }
    }
}

/// An id outside the range its sender may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum IdRangeError {
    /// The server sent an id from the client-local range.
    #[error("server sent id {0:#x}, which lies in the client-local range")]
    ClientRangeFromServer(u32),
}

/// Hands out server ids `1..CLIENT_LOCAL_BASE`, wrapping (0 is never used, so it can mean "none").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerIdAllocator {
    last: u32,
}

impl ServerIdAllocator {
    /// The next server id.
    pub fn allocate(&mut self) -> EntityId {
        self.last = if self.last + 1 >= CLIENT_LOCAL_BASE {
            1
        } else {
            self.last + 1
        };
        EntityId(self.last)
    }
}

/// Hands out client-local ids `CLIENT_LOCAL_BASE..=u32::MAX`, wrapping.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientIdAllocator {
    offset: u32,
}

impl ClientIdAllocator {
    /// The next client-local id.
    pub fn allocate(&mut self) -> EntityId {
        let id = EntityId(CLIENT_LOCAL_BASE + self.offset);
        self.offset = (self.offset + 1) & (CLIENT_LOCAL_BASE - 1);
        id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_and_client_ranges_never_meet_even_when_wrapping() {
        let mut server = ServerIdAllocator {
            last: CLIENT_LOCAL_BASE - 2,
        };
        let mut client = ClientIdAllocator {
            offset: CLIENT_LOCAL_BASE - 2,
        };
        for _ in 0..4 {
            let s = server.allocate();
            let c = client.allocate();
            assert!(!s.is_client_local() && s.0 != 0, "{s:?}");
            assert!(c.is_client_local(), "{c:?}");
        }
        assert_eq!(server.allocate(), EntityId(4));
        assert_eq!(client.allocate(), EntityId(CLIENT_LOCAL_BASE + 2));
        assert!(EntityId::from_server(CLIENT_LOCAL_BASE).is_err());
        assert_eq!(EntityId::from_server(5), Ok(EntityId(5)));
    }
}
