//! The connection layer's datagrams. The first byte names the kind; every size is fixed except data's.
//!
//! | kind | bytes | layout |
//! |---|---|---|
//! | peer request | [`PEER_REQUEST_BYTES`] | kind, protocol id (u64), guest's X25519 public key, zero padding |
//! | token request | [`TOKEN_REQUEST_BYTES`] | kind, protocol id, token expiry (u64 unix s), private token |
//! | challenge | [`CHALLENGE_BYTES`] | kind, server's X25519 public key (zero in token mode), cookie |
//! | response | [`RESPONSE_BYTES`] | kind, cookie, proof (a Poly1305 tag under the client-to-server key) |
//! | data | [`DATA_OVERHEAD`] + n | kind, sequence (u64), ChaCha20-Poly1305 ciphertext of n bytes and tag |
//!
//! Requests are padded so that the challenge that answers one is never larger: a spoofed request cannot turn the
//! server into an amplifier.

use super::crypto::{TAG_BYTES, XNONCE_BYTES};
use super::token::{PRIVATE_TOKEN_BYTES, USER_DATA_BYTES};

/// Kind byte of a peer-mode connect request.
pub const KIND_PEER_REQUEST: u8 = 0xC1;
/// Kind byte of a token connect request.
pub const KIND_TOKEN_REQUEST: u8 = 0xC2;
/// Kind byte of a challenge.
pub const KIND_CHALLENGE: u8 = 0xC3;
/// Kind byte of a challenge response.
pub const KIND_RESPONSE: u8 = 0xC4;
/// Kind byte of an encrypted data datagram.
pub const KIND_DATA: u8 = 0xD0;

/// Bytes of a challenge cookie's plaintext: mode, expiry (ms of server time), two 32-byte fields (the guest's
/// public key, or the token's two keys), client id, user data, token nonce, token expiry (Unix seconds: the
/// server remembers a used token until then, and no longer).
pub const COOKIE_PLAIN_BYTES: usize = 1 + 8 + 32 + 32 + 8 + USER_DATA_BYTES + XNONCE_BYTES + 8;
/// Bytes of a sealed cookie.
pub const COOKIE_BYTES: usize = XNONCE_BYTES + COOKIE_PLAIN_BYTES + TAG_BYTES;
/// Bytes of a challenge.
pub const CHALLENGE_BYTES: usize = 1 + 32 + COOKIE_BYTES;
/// Bytes of a challenge response.
pub const RESPONSE_BYTES: usize = 1 + COOKIE_BYTES + TAG_BYTES;
/// Bytes of a peer-mode connect request (padded to at least a challenge).
pub const PEER_REQUEST_BYTES: usize = 256;
/// Bytes of a token connect request.
pub const TOKEN_REQUEST_BYTES: usize = 1 + 8 + 8 + PRIVATE_TOKEN_BYTES;
/// Bytes a data datagram adds to its plaintext.
pub const DATA_OVERHEAD: usize = 1 + 8 + TAG_BYTES;

const _: () =
    assert!(CHALLENGE_BYTES <= PEER_REQUEST_BYTES && CHALLENGE_BYTES <= TOKEN_REQUEST_BYTES);
const _: () = assert!(RESPONSE_BYTES >= DATA_OVERHEAD);

/// The associated data of data datagram `seq`: its kind and sequence in the clear, bound to the protocol.
pub fn data_aad(seq: u64) -> [u8; 17] {
    let mut aad = [0u8; 17];
    aad[0] = KIND_DATA;
    aad[1..9].copy_from_slice(&seq.to_le_bytes());
    aad[9..].copy_from_slice(&super::token::CONNECTION_PROTOCOL_ID.to_le_bytes());
    aad
}
