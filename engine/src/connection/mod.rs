//! The connection layer both modes share, between the transport and the protocol cores.
//!
//! A joining peer first proves it owns its source address with a challenge round trip: it sends a connect request,
//! the server answers with a *cookie* sealed under a key only the server knows (bound to the requester's address,
//! holding everything the server needs later), and the peer echoes the cookie with a proof that it holds the
//! session keys. Until that echo arrives the server keeps no state for the address and never answers with more
//! bytes than it received (requests are padded to at least a challenge's size). Every datagram after that is
//! sealed with ChaCha20-Poly1305 under per-direction session keys and carries a sequence number checked against a
//! replay window, so a spoofed, altered or replayed datagram is dropped and counted before any core sees it; it
//! can neither end a session nor change one.
//!
//! Where the keys come from:
//! - **Peer mode** ([`ServerAuth::Peer`]): X25519 between a fresh key of the guest and the host's key, run
//!   through HKDF-SHA256 salted with the session's optional join code: a guest that typed another code derives
//!   other keys, fails the proof and is never let in.
//! - **Dedicated mode** ([`ServerAuth::Tokens`]): connect tokens minted by a [`TokenIssuer`] that shares a key
//!   with the server, in the manner of netcode.io: an absolute expiry, a random nonce (one token, one address),
//!   the server addresses it is good for and fresh per-client keys, the private part sealed for the server.
//!
//! Memory stays bounded under floods: handshake packets pass a fixed-size table of per-source token buckets
//! ([`SourceLimiter`]), and only a completed challenge creates per-address state (a session, bounded by
//! [`ServerConfig::max_sessions`]). The UDP driver runs the layer beneath laminar, so laminar's connection table
//! only ever holds authenticated peers.
//!
//! The endpoint is sans-IO: `(now, from, bytes)` in, plaintext or nothing out, datagrams to send polled.
//!
//! ```
//! use std::time::Duration;
//! use physync_engine::connection::{ClientAuth, ClientConfig, Endpoint, ServerAuth, ServerConfig};
//!
//! let (host, guest) = ("10.0.0.1:7000".parse().unwrap(), "10.0.0.2:7000".parse().unwrap());
//! let auth = ServerAuth::Peer { join_code: Some("K7QM-22XF".into()) };
//! let mut server = Endpoint::server(ServerConfig::new(auth), [1; 32]);
//! let code = Some("k7qm 22xf".into()); // as typed: case, spaces and dashes do not matter
//! let mut client = Endpoint::client(ClientConfig::new(host, ClientAuth::Peer { join_code: code }), Duration::ZERO, [2; 32]);
//! let now = Duration::ZERO;
//! client.handle_timeout(now);
//! for _ in 0..2 {
//!     while let Some((_, bytes)) = client.poll_transmit() {
//!         server.handle_datagram(now, guest, &bytes);
//!     }
//!     while let Some((_, bytes)) = server.poll_transmit() {
//!         client.handle_datagram(now, host, &bytes);
//!     }
//! }
//! assert!(server.is_connected(guest) && client.is_connected(host));
//! let sealed = client.seal(now, host, b"hello").unwrap();
//! assert_eq!(server.handle_datagram(now, guest, &sealed).as_deref(), Some(&b"hello"[..]));
//! ```

mod crypto;
mod endpoint;
mod limiter;
mod replay;
mod stats;
mod token;
mod wire;

#[cfg(test)]
mod tests;

pub use crypto::{KeyPair, SymKey, key_from_passphrase};
pub use endpoint::{
    ClientAuth, ClientConfig, ClientPhase, CloseReason, ConnectionEvent, Endpoint, ServerAuth,
    ServerConfig, new_join_code, normalize_join_code,
};
pub use limiter::{HANDSHAKE_BURST, HANDSHAKES_PER_SECOND, LIMITER_BUCKETS, SourceLimiter};
pub use replay::{REPLAY_WINDOW, ReplayWindow};
pub use stats::{ConnectionStats, DropCounts};
pub use token::{
    CONNECTION_PROTOCOL_ID, ConnectToken, MAX_SERVER_ADDRS, PeerIdentity, TokenError, TokenIssuer,
    TokenRequest, USER_DATA_BYTES,
};
pub use wire::{
    CHALLENGE_BYTES, DATA_OVERHEAD, PEER_REQUEST_BYTES, RESPONSE_BYTES, TOKEN_REQUEST_BYTES,
};

/// The unix time simulated sessions start at (tokens for an in-memory match are minted at it).
pub const SIM_UNIX_EPOCH: u64 = 1_800_000_000;

/// Unix time now, in whole seconds (0 if the clock is before 1970): what drivers give
/// [`ServerAuth::Tokens::unix_at_epoch`] and token issuers their `now_unix`.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// 32 bytes from the operating system's generator, to seed a real endpoint.
pub fn os_seed() -> [u8; 32] {
    rand::random()
}
