//! Connect tokens: a keyed hash over the token's fields with a secret the matchmaker and the server share, so a
//! random or forged datagram cannot take a slot.
//!
//! The MAC is SipHash-2-4 (Aumasson and Bernstein), a keyed pseudo-random function designed for short inputs with
//! a 128-bit key. No maintained MAC crate is in the offline registry and `std`'s `SipHasher` is deprecated, so the
//! ~40-line reference algorithm is implemented here and checked against the paper's test vector. A 64-bit tag is
//! enough for an online check: a forger gets one try per datagram.

use physync_codec::stream::Ctx;
use physync_codec::{CodecError, Stream};

/// SipHash-2-4 of `data` under the 128-bit `key`.
pub fn siphash24(key: &[u8; 16], data: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap_or([0; 8]));
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap_or([0; 8]));
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let m = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        v[3] ^= m;
        round(&mut v);
        round(&mut v);
        v[0] ^= m;
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    round(&mut v);
    round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// A 128-bit secret derived from a passphrase (command lines take passphrases; both ends derive the same key).
pub fn secret_from_passphrase(passphrase: &str) -> [u8; 16] {
    let a = siphash24(b"physync-secret-a", passphrase.as_bytes());
    let b = siphash24(b"physync-secret-b", passphrase.as_bytes());
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&a.to_le_bytes());
    key[8..].copy_from_slice(&b.to_le_bytes());
    key
}

/// Longest player name a token may carry, bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 16;

/// A ticket to one match for one named player, issued by whoever knows the server's secret (a matchmaker, or
/// the server's own command line for local play).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectToken {
    /// The match it admits to.
    pub match_id: u32,
    /// The player's name; it also keys the player's slot for reconnects.
    pub name: String,
    /// Seconds since the server's epoch after which the token is refused.
    pub expires_s: u32,
    /// SipHash-2-4 of the fields above under the shared secret.
    pub mac: u64,
}

const MATCH_ID: Ctx = Ctx::user(0, "token match id");
const EXPIRES: Ctx = Ctx::user(1, "token expiry");
const MAC: Ctx = Ctx::user(2, "token mac");

impl ConnectToken {
    /// A token for `name` in `match_id`, valid until `expires_s`, signed with `secret`.
    pub fn issue(secret: &[u8; 16], match_id: u32, name: &str, expires_s: u32) -> Self {
        let mut name = name.to_owned();
        while name.len() > MAX_NAME_BYTES {
            name.pop();
        }
        let mut token = Self {
            match_id,
            name,
            expires_s,
            mac: 0,
        };
        token.mac = token.expected_mac(secret);
        token
    }

    fn expected_mac(&self, secret: &[u8; 16]) -> u64 {
        let mut data = Vec::with_capacity(8 + self.name.len());
        data.extend_from_slice(&self.match_id.to_le_bytes());
        data.extend_from_slice(&self.expires_s.to_le_bytes());
        data.extend_from_slice(self.name.as_bytes());
        siphash24(secret, &data)
    }

    /// True when the MAC matches under `secret` (compared without early exit).
    pub fn verify(&self, secret: &[u8; 16]) -> bool {
        let diff = self.expected_mac(secret) ^ self.mac;
        diff == 0
    }

    /// Serializes the token.
    pub fn serialize<S: Stream>(&mut self, s: &mut S) -> Result<(), CodecError> {
        let mut id = self.match_id;
        s.bits(MATCH_ID, &mut id, 32)?;
        self.match_id = id;
        super::wire::string(s, &mut self.name, MAX_NAME_BYTES)?;
        s.bits(EXPIRES, &mut self.expires_s, 32)?;
        let mut hi = (self.mac >> 32) as u32;
        let mut lo = self.mac as u32;
        s.bits(MAC, &mut hi, 32)?;
        s.bits(MAC, &mut lo, 32)?;
        self.mac = (u64::from(hi) << 32) | u64::from(lo);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_the_reference_vector() {
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let data: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key, &data), 0xa129_ca61_49be_45e5);
        assert_eq!(siphash24(&key, &[]), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn tokens_verify_only_under_their_secret_and_fields() {
        let secret = [7u8; 16];
        let token = ConnectToken::issue(&secret, 3, "alice", 1000);
        assert!(token.verify(&secret));
        assert!(!token.verify(&[8u8; 16]));
        let mut forged = token.clone();
        forged.name = "mallory".into();
        assert!(!forged.verify(&secret));
        let mut other_match = token;
        other_match.match_id = 4;
        assert!(!other_match.verify(&secret));
    }
}
