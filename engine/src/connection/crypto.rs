//! Every cryptographic operation of the connection layer, each a thin call into a RustCrypto or dalek crate:
//! ChaCha20-Poly1305 seals data datagrams and proofs, XChaCha20-Poly1305 (random 24-byte nonces) seals connect
//! tokens and challenge cookies, X25519 agrees the peer mode's keys, HKDF-SHA256 derives keys.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce, XChaCha20Poly1305, XNonce};
use hkdf::Hkdf;
use sha2::Sha256;
use x25519_dalek::{PublicKey, StaticSecret};

/// Bytes of a Poly1305 tag.
pub const TAG_BYTES: usize = 16;
/// Bytes of an XChaCha20 nonce.
pub const XNONCE_BYTES: usize = 24;
/// Bytes of a key.
pub const KEY_BYTES: usize = 32;

/// A 256-bit symmetric key.
pub type SymKey = [u8; KEY_BYTES];

/// The two directions' keys of one session, as the local side uses them.
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    /// Seals what this side sends.
    pub send: SymKey,
    /// Opens what this side receives.
    pub recv: SymKey,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(..)")
    }
}

/// The client-to-server and server-to-client keys of a session, before a side picks its direction.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct KeyPair {
    /// Seals client → server traffic.
    pub client_to_server: SymKey,
    /// Seals server → client traffic.
    pub server_to_client: SymKey,
}

impl std::fmt::Debug for KeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyPair(..)")
    }
}

impl KeyPair {
    /// The keys as the client uses them.
    pub fn for_client(&self) -> SessionKeys {
        SessionKeys {
            send: self.client_to_server,
            recv: self.server_to_client,
        }
    }

    /// The keys as the server uses them.
    pub fn for_server(&self) -> SessionKeys {
        SessionKeys {
            send: self.server_to_client,
            recv: self.client_to_server,
        }
    }
}

/// The 12-byte nonce of data datagram `seq`: the direction's key is fresh per session, so the sequence alone
/// never repeats a (key, nonce) pair. Handshake proofs use the nonce of `u64::MAX`, which data never sends.
fn data_nonce(seq: u64) -> Nonce {
    let mut n = [0u8; 12];
    n[4..].copy_from_slice(&seq.to_le_bytes());
    Nonce::from(n)
}

/// Seals `plaintext` under `key` as datagram `seq`, binding `aad`.
pub fn seal(key: &SymKey, seq: u64, aad: &[u8], plaintext: &[u8]) -> Option<Vec<u8>> {
    ChaCha20Poly1305::new(Key::from_slice(key))
        .encrypt(
            &data_nonce(seq),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .ok()
}

/// Opens what [`seal`] made; `None` for anything altered, forged or sealed under another key.
pub fn open(key: &SymKey, seq: u64, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    ChaCha20Poly1305::new(Key::from_slice(key))
        .decrypt(&data_nonce(seq), Payload { msg: sealed, aad })
        .ok()
}

/// The sequence number handshake proofs are sealed under (never used by data).
pub const PROOF_SEQ: u64 = u64::MAX;

/// Seals `plaintext` under `key` with the random `nonce`, binding `aad`: the output is nonce, ciphertext, tag.
pub fn xseal(
    key: &SymKey,
    nonce: [u8; XNONCE_BYTES],
    aad: &[u8],
    plaintext: &[u8],
) -> Option<Vec<u8>> {
    let sealed = XChaCha20Poly1305::new(Key::from_slice(key))
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: plaintext,
                aad,
            },
        )
        .ok()?;
    let mut out = Vec::with_capacity(XNONCE_BYTES + sealed.len());
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Some(out)
}

/// Opens what [`xseal`] made.
pub fn xopen(key: &SymKey, aad: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    if sealed.len() < XNONCE_BYTES + TAG_BYTES {
        return None;
    }
    let (nonce, body) = sealed.split_at(XNONCE_BYTES);
    XChaCha20Poly1305::new(Key::from_slice(key))
        .decrypt(XNonce::from_slice(nonce), Payload { msg: body, aad })
        .ok()
}

/// HKDF-SHA256 of `ikm` with `salt`, expanded under `info` to `N` bytes.
fn derive<const N: usize>(salt: &[u8], ikm: &[u8], info: &[&[u8]]) -> [u8; N] {
    let hk = Hkdf::<Sha256>::new(Some(salt), ikm);
    let mut out = [0u8; N];
    let info: Vec<u8> = info.concat();
    // N is at most 64 bytes here, far under HKDF-SHA256's 8160-byte limit, so expansion cannot fail.
    if hk.expand(&info, &mut out).is_err() {
        out = [0; N];
    }
    out
}

/// A symmetric key from a passphrase (token keys on command lines). HKDF is not a password hash: use a long
/// random passphrase, as `physync-host token --new-key` prints.
pub fn key_from_passphrase(passphrase: &str) -> SymKey {
    derive(
        b"physync token key v1",
        passphrase.as_bytes(),
        &[b"token key"],
    )
}

/// An X25519 key pair from 32 random bytes.
pub fn x25519_keypair(secret: [u8; 32]) -> (StaticSecret, [u8; 32]) {
    let secret = StaticSecret::from(secret);
    let public = PublicKey::from(&secret).to_bytes();
    (secret, public)
}

/// The peer mode's session keys: X25519 between the guest's fresh key and the host's key, salted with the join
/// code (empty without one), bound to both public keys and the cookie's nonce. `None` for a degenerate (low-order)
/// public key.
pub fn peer_keys(
    secret: &StaticSecret,
    their_public: [u8; 32],
    client_public: [u8; 32],
    server_public: [u8; 32],
    cookie_nonce: &[u8],
    join_code: &str,
) -> Option<KeyPair> {
    let shared = secret.diffie_hellman(&PublicKey::from(their_public));
    if !shared.was_contributory() {
        return None;
    }
    let okm: [u8; 64] = derive(
        join_code.as_bytes(),
        shared.as_bytes(),
        &[
            b"physync peer keys v1",
            &client_public,
            &server_public,
            cookie_nonce,
        ],
    );
    let mut client_to_server = [0u8; 32];
    let mut server_to_client = [0u8; 32];
    client_to_server.copy_from_slice(&okm[..32]);
    server_to_client.copy_from_slice(&okm[32..]);
    Some(KeyPair {
        client_to_server,
        server_to_client,
    })
}
