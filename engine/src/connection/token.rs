//! Connect tokens for the dedicated mode, in the manner of netcode.io: a token issuer (a matchmaker, or
//! `physync-host token`) that shares a key with the server mints, per client, a token with an absolute expiry,
//! a random nonce, the server addresses it is good for and fresh per-client keys. The private part, sealed for the
//! server under the shared key, carries the same keys and the client's identity; the client sends it in its
//! connect request and keeps the public part (the keys among it) to itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use rand::CryptoRng;

use super::crypto::{KEY_BYTES, KeyPair, SymKey, TAG_BYTES, XNONCE_BYTES, xopen, xseal};

/// Identifies physync's connection protocol and its version in every request and token.
pub const CONNECTION_PROTOCOL_ID: u64 = 0x7068_7973_796e_6301;

/// Most server addresses one token names.
pub const MAX_SERVER_ADDRS: usize = 4;

/// Bytes of game data a token carries for the server (the shooter puts the match id and player name there).
pub const USER_DATA_BYTES: usize = 32;

/// Bytes of the private token's plaintext.
const PRIVATE_PLAIN_BYTES: usize = 216;

/// Bytes of the sealed private token (its random nonce first, then ciphertext and tag).
pub const PRIVATE_TOKEN_BYTES: usize = XNONCE_BYTES + PRIVATE_PLAIN_BYTES + TAG_BYTES;

const ADDR_BYTES_MAX: usize = 19;

/// Who a token admits, as the server reads it from the private part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerIdentity {
    /// The id the issuer gave the client.
    pub client_id: u64,
    /// The game's data (the shooter: match id and player name).
    pub user_data: [u8; USER_DATA_BYTES],
}

/// Why a token could not be made or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No server address, or more than [`MAX_SERVER_ADDRS`].
    #[error("a token names 1 to {MAX_SERVER_ADDRS} server addresses, not {0}")]
    ServerAddrs(usize),
    /// The bytes are not a token (truncated, trailing bytes, bad hex, bad address kind).
    #[error("not a connect token")]
    Malformed,
    /// The token is for another protocol or version.
    #[error("connect token of protocol {0:#x}, not physync's")]
    WrongProtocol(u64),
    /// Sealing failed (it cannot for these sizes; kept typed rather than unwrapped).
    #[error("token sealing failed")]
    Seal,
}

/// What a client holds: the public part (server addresses, expiry, its keys) and the private part it forwards.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectToken {
    /// [`CONNECTION_PROTOCOL_ID`] of the issuer.
    pub protocol_id: u64,
    /// Unix time, seconds, the token was minted.
    pub created_unix: u64,
    /// Unix time, seconds, after which servers refuse it (absolute: a server restart does not revive it).
    pub expires_unix: u64,
    /// Servers to try, in order.
    pub server_addrs: Vec<SocketAddr>,
    /// The session keys, the same the private part gives the server.
    pub keys: KeyPair,
    /// The private part, sealed for the server (begins with its random nonce, the token's unique id).
    pub private: [u8; PRIVATE_TOKEN_BYTES],
}

impl std::fmt::Debug for ConnectToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectToken")
            .field("expires_unix", &self.expires_unix)
            .field("server_addrs", &self.server_addrs)
            .finish_non_exhaustive()
    }
}

/// Mints connect tokens under the key it shares with the servers.
#[derive(Clone)]
pub struct TokenIssuer {
    key: SymKey,
}

impl std::fmt::Debug for TokenIssuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenIssuer(..)")
    }
}

/// What a token says about its holder, for [`TokenIssuer::issue`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRequest {
    /// The client's id.
    pub client_id: u64,
    /// Game data for the server.
    pub user_data: [u8; USER_DATA_BYTES],
    /// Servers the token is good for (1 to [`MAX_SERVER_ADDRS`]).
    pub server_addrs: Vec<SocketAddr>,
    /// How long it stays valid from the moment it is minted.
    pub valid_for: Duration,
}

impl TokenIssuer {
    /// An issuer holding `key` (the servers hold the same).
    pub fn new(key: SymKey) -> Self {
        Self { key }
    }

    /// Mints a token at unix time `now_unix` with fresh keys and nonce from `rng`.
    pub fn issue(
        &self,
        rng: &mut impl CryptoRng,
        now_unix: u64,
        request: &TokenRequest,
    ) -> Result<ConnectToken, TokenError> {
        let n = request.server_addrs.len();
        if n == 0 || n > MAX_SERVER_ADDRS {
            return Err(TokenError::ServerAddrs(n));
        }
        let mut keys = KeyPair {
            client_to_server: [0; KEY_BYTES],
            server_to_client: [0; KEY_BYTES],
        };
        rng.fill_bytes(&mut keys.client_to_server);
        rng.fill_bytes(&mut keys.server_to_client);
        let expires_unix = now_unix.saturating_add(request.valid_for.as_secs());
        let mut plain = Vec::with_capacity(PRIVATE_PLAIN_BYTES);
        plain.extend_from_slice(&request.client_id.to_le_bytes());
        plain.extend_from_slice(&keys.client_to_server);
        plain.extend_from_slice(&keys.server_to_client);
        plain.extend_from_slice(&request.user_data);
        plain.push(n as u8);
        for addr in &request.server_addrs {
            write_addr(&mut plain, *addr);
        }
        plain.resize(PRIVATE_PLAIN_BYTES, 0);
        let mut nonce = [0u8; XNONCE_BYTES];
        rng.fill_bytes(&mut nonce);
        let sealed = xseal(
            &self.key,
            nonce,
            &private_aad(CONNECTION_PROTOCOL_ID, expires_unix),
            &plain,
        )
        .ok_or(TokenError::Seal)?;
        let private = sealed.try_into().map_err(|_| TokenError::Seal)?;
        Ok(ConnectToken {
            protocol_id: CONNECTION_PROTOCOL_ID,
            created_unix: now_unix,
            expires_unix,
            server_addrs: request.server_addrs.clone(),
            keys,
            private,
        })
    }
}

/// What the server reads from a private token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct PrivateToken {
    pub identity: PeerIdentity,
    pub keys: KeyPair,
    pub server_addrs: Vec<SocketAddr>,
}

/// The associated data a private token is sealed with: it binds the expiry sent in the clear.
pub(super) fn private_aad(protocol_id: u64, expires_unix: u64) -> [u8; 16] {
    let mut aad = [0u8; 16];
    aad[..8].copy_from_slice(&protocol_id.to_le_bytes());
    aad[8..].copy_from_slice(&expires_unix.to_le_bytes());
    aad
}

/// Opens a private token under the server's `key`; `None` when it was not sealed under it for this expiry.
pub(super) fn open_private(
    key: &SymKey,
    protocol_id: u64,
    expires_unix: u64,
    sealed: &[u8],
) -> Option<PrivateToken> {
    let plain = xopen(key, &private_aad(protocol_id, expires_unix), sealed)?;
    let mut r = Reader(&plain);
    let client_id = u64::from_le_bytes(r.array()?);
    let client_to_server = r.array()?;
    let server_to_client = r.array()?;
    let user_data = r.array()?;
    let [n] = r.array()?;
    if n == 0 || usize::from(n) > MAX_SERVER_ADDRS {
        return None;
    }
    let server_addrs = (0..n)
        .map(|_| read_addr(&mut r))
        .collect::<Option<Vec<_>>>()?;
    Some(PrivateToken {
        identity: PeerIdentity {
            client_id,
            user_data,
        },
        keys: KeyPair {
            client_to_server,
            server_to_client,
        },
        server_addrs,
    })
}

/// A bounds-checked cursor over untrusted bytes.
pub(super) struct Reader<'a>(pub &'a [u8]);

impl Reader<'_> {
    /// The next `N` bytes, or `None` past the end.
    pub fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_at_checked(N)?;
        self.0 = rest;
        head.try_into().ok()
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Writes a socket address: 4 or 6, the IP's bytes, the port (big-endian).
pub(super) fn write_addr(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    out.extend_from_slice(&addr.port().to_be_bytes());
}

/// The bytes [`write_addr`] writes for `addr` (the associated data that binds a cookie to its address).
pub(super) fn addr_bytes(addr: SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(ADDR_BYTES_MAX);
    write_addr(&mut out, addr);
    out
}

fn read_addr(r: &mut Reader<'_>) -> Option<SocketAddr> {
    let [kind] = r.array()?;
    let ip = match kind {
        4 => IpAddr::V4(Ipv4Addr::from(r.array::<4>()?)),
        6 => IpAddr::V6(Ipv6Addr::from(r.array::<16>()?)),
        _ => return None,
    };
    let port = u16::from_be_bytes(r.array()?);
    Some(SocketAddr::new(ip, port))
}

impl ConnectToken {
    /// The token as bytes: what a matchmaker hands its client.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + PRIVATE_TOKEN_BYTES + 4 * ADDR_BYTES_MAX);
        out.extend_from_slice(&self.protocol_id.to_le_bytes());
        out.extend_from_slice(&self.created_unix.to_le_bytes());
        out.extend_from_slice(&self.expires_unix.to_le_bytes());
        out.push(self.server_addrs.len() as u8);
        for addr in &self.server_addrs {
            write_addr(&mut out, *addr);
        }
        out.extend_from_slice(&self.keys.client_to_server);
        out.extend_from_slice(&self.keys.server_to_client);
        out.extend_from_slice(&self.private);
        out
    }

    /// Reads [`ConnectToken::to_bytes`].
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, TokenError> {
        let mut r = Reader(bytes);
        let malformed = TokenError::Malformed;
        let protocol_id = u64::from_le_bytes(r.array().ok_or(malformed.clone())?);
        if protocol_id != CONNECTION_PROTOCOL_ID {
            return Err(TokenError::WrongProtocol(protocol_id));
        }
        let created_unix = u64::from_le_bytes(r.array().ok_or(malformed.clone())?);
        let expires_unix = u64::from_le_bytes(r.array().ok_or(malformed.clone())?);
        let [n] = r.array().ok_or(malformed.clone())?;
        if n == 0 || usize::from(n) > MAX_SERVER_ADDRS {
            return Err(TokenError::ServerAddrs(usize::from(n)));
        }
        let server_addrs = (0..n)
            .map(|_| read_addr(&mut r))
            .collect::<Option<Vec<_>>>()
            .ok_or(malformed.clone())?;
        let client_to_server = r.array().ok_or(malformed.clone())?;
        let server_to_client = r.array().ok_or(malformed.clone())?;
        let private = r.array().ok_or(malformed.clone())?;
        if !r.is_empty() {
            return Err(malformed);
        }
        Ok(Self {
            protocol_id,
            created_unix,
            expires_unix,
            server_addrs,
            keys: KeyPair {
                client_to_server,
                server_to_client,
            },
            private,
        })
    }

    /// The token as lowercase hex, for command lines and environment variables.
    pub fn to_hex(&self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads [`ConnectToken::to_hex`] (surrounding whitespace allowed).
    pub fn from_hex(text: &str) -> Result<Self, TokenError> {
        let text = text.trim();
        if !text.len().is_multiple_of(2) || !text.is_ascii() {
            return Err(TokenError::Malformed);
        }
        let bytes = (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .map_err(|_| TokenError::Malformed)?;
        Self::from_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn request() -> TokenRequest {
        TokenRequest {
            client_id: 42,
            user_data: [7; USER_DATA_BYTES],
            server_addrs: vec![
                "127.0.0.1:7000".parse().unwrap(),
                "[::1]:7001".parse().unwrap(),
            ],
            valid_for: Duration::from_secs(60),
        }
    }

    #[test]
    fn a_token_round_trips_and_opens_only_under_its_key() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let issuer = TokenIssuer::new([9; 32]);
        let token = issuer.issue(&mut rng, 1_000, &request()).unwrap();
        assert_eq!(token.expires_unix, 1_060);
        let back = ConnectToken::from_hex(&token.to_hex()).unwrap();
        assert!(back == token);
        let private = open_private(
            &[9; 32],
            token.protocol_id,
            token.expires_unix,
            &token.private,
        )
        .unwrap();
        assert_eq!(private.identity.client_id, 42);
        assert_eq!(private.keys, token.keys);
        assert_eq!(private.server_addrs, request().server_addrs);
        assert!(
            open_private(
                &[8; 32],
                token.protocol_id,
                token.expires_unix,
                &token.private
            )
            .is_none()
        );
        assert!(
            open_private(
                &[9; 32],
                token.protocol_id,
                token.expires_unix + 1,
                &token.private
            )
            .is_none(),
            "a stretched expiry breaks the seal"
        );
        let again = issuer.issue(&mut rng, 1_000, &request()).unwrap();
        assert_ne!(
            again.private[..XNONCE_BYTES],
            token.private[..XNONCE_BYTES],
            "fresh nonce"
        );
        assert_ne!(again.keys, token.keys, "fresh keys");
    }

    #[test]
    fn malformed_tokens_are_typed_errors() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        let token = TokenIssuer::new([1; 32])
            .issue(&mut rng, 5, &request())
            .unwrap();
        let bytes = token.to_bytes();
        for cut in 0..bytes.len() {
            assert!(
                ConnectToken::from_bytes(&bytes[..cut]).is_err(),
                "cut {cut}"
            );
        }
        assert!(ConnectToken::from_hex("zz").is_err());
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(ConnectToken::from_bytes(&long), Err(TokenError::Malformed));
        let mut none = request();
        none.server_addrs.clear();
        assert_eq!(
            TokenIssuer::new([1; 32])
                .issue(&mut rng, 5, &none)
                .unwrap_err(),
            TokenError::ServerAddrs(0)
        );
    }
}
