//! What a shooter connect token says about its holder: the match it admits to and the player's name, packed into
//! the token's user data (see [`crate::connection`] for the tokens themselves, their keys and their expiry).

use std::net::SocketAddr;
use std::time::Duration;

use rand::{CryptoRng, Rng};

use crate::connection::{
    ConnectToken, TokenError, TokenIssuer, TokenRequest, USER_DATA_BYTES, key_from_passphrase,
    unix_now,
};

/// The development passphrase: public, so servers refuse it unless started for development (`--dev`).
pub const DEV_PASSPHRASE: &str = "physync-dev";

/// Longest player name a token may carry, bytes of UTF-8.
pub const MAX_NAME_BYTES: usize = 16;

/// The shooter's claims in a connect token: which match, and who.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlayerClaims {
    /// The match it admits to.
    pub match_id: u32,
    /// The player's name; it also keys the player's slot for reconnects.
    pub name: String,
}

impl PlayerClaims {
    /// Claims for `name` (cut to [`MAX_NAME_BYTES`] on a character boundary) in `match_id`.
    pub fn new(match_id: u32, name: &str) -> Self {
        let mut name = name.to_owned();
        while name.len() > MAX_NAME_BYTES {
            name.pop();
        }
        Self { match_id, name }
    }

    /// The claims as token user data: match id (u32 LE), name length, name bytes, zeros.
    pub fn to_user_data(&self) -> [u8; USER_DATA_BYTES] {
        let mut out = [0u8; USER_DATA_BYTES];
        out[..4].copy_from_slice(&self.match_id.to_le_bytes());
        let name = &self.name.as_bytes()[..self.name.len().min(MAX_NAME_BYTES)];
        out[4] = name.len() as u8;
        out[5..5 + name.len()].copy_from_slice(name);
        out
    }

    /// Reads [`PlayerClaims::to_user_data`]; `None` for a length out of range or a name that is not UTF-8.
    pub fn from_user_data(data: &[u8; USER_DATA_BYTES]) -> Option<Self> {
        let match_id = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let len = usize::from(data[4]);
        if len > MAX_NAME_BYTES {
            return None;
        }
        let name = std::str::from_utf8(&data[5..5 + len]).ok()?.to_owned();
        Some(Self { match_id, name })
    }
}

/// Mints a token for `claims` good at `server_addrs` for `valid_for` from unix time `now_unix`: what a
/// matchmaker (or `physync-host token`) calls.
pub fn mint_token(
    issuer: &TokenIssuer,
    rng: &mut impl CryptoRng,
    now_unix: u64,
    claims: &PlayerClaims,
    server_addrs: &[SocketAddr],
    valid_for: Duration,
) -> Result<ConnectToken, TokenError> {
    let client_id = rng.random();
    issuer.issue(
        rng,
        now_unix,
        &TokenRequest {
            client_id,
            user_data: claims.to_user_data(),
            server_addrs: server_addrs.to_vec(),
            valid_for,
        },
    )
}

/// Mints a token now, with the operating system's randomness, under the key of `passphrase`: how development
/// setups (the viewer's local match, `physync-guest` without `--token`) issue their own.
pub fn mint_from_passphrase(
    passphrase: &str,
    claims: &PlayerClaims,
    server_addrs: &[SocketAddr],
    valid_for: Duration,
) -> Result<ConnectToken, TokenError> {
    let issuer = TokenIssuer::new(key_from_passphrase(passphrase));
    mint_token(
        &issuer,
        &mut rand::rng(),
        unix_now(),
        claims,
        server_addrs,
        valid_for,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claims_round_trip_through_user_data() {
        let c = PlayerClaims::new(7, "a-very-long-player-name");
        assert_eq!(c.name.len(), MAX_NAME_BYTES);
        assert_eq!(PlayerClaims::from_user_data(&c.to_user_data()), Some(c));
        let mut bad = [0u8; USER_DATA_BYTES];
        bad[4] = 17;
        assert_eq!(PlayerClaims::from_user_data(&bad), None);
        bad[4] = 1;
        bad[5] = 0xff;
        assert_eq!(PlayerClaims::from_user_data(&bad), None);
    }
}
