//! The connection endpoint: the sans-IO state machine that takes raw datagrams from the transport and hands the
//! core only authenticated plaintext from peers that passed the challenge.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::Duration;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use x25519_dalek::StaticSecret;

use super::crypto::{
    KeyPair, PROOF_SEQ, SessionKeys, SymKey, XNONCE_BYTES, open, peer_keys, seal, x25519_keypair,
    xopen, xseal,
};
use super::limiter::SourceLimiter;
use super::replay::ReplayWindow;
use super::stats::ConnectionStats;
use super::token::{
    CONNECTION_PROTOCOL_ID, ConnectToken, PRIVATE_TOKEN_BYTES, PeerIdentity, Reader,
    USER_DATA_BYTES, addr_bytes, open_private,
};
use super::wire::{
    CHALLENGE_BYTES, COOKIE_BYTES, COOKIE_PLAIN_BYTES, DATA_OVERHEAD, KIND_CHALLENGE, KIND_DATA,
    KIND_PEER_REQUEST, KIND_RESPONSE, KIND_TOKEN_REQUEST, PEER_REQUEST_BYTES, RESPONSE_BYTES,
    TOKEN_REQUEST_BYTES, data_aad,
};

/// How a server decides whom to let in.
#[derive(Clone)]
pub enum ServerAuth {
    /// Peer mode: any guest that completes the challenge, keys agreed by X25519; with a join code, only guests
    /// that typed the same code (it salts the keys, so a guest with another code fails the proof).
    Peer {
        /// The session's join code, if the host set one.
        join_code: Option<String>,
    },
    /// Dedicated mode: guests with a connect token minted under `key` that names one of `public_addrs`.
    Tokens {
        /// The key shared with the token issuer.
        key: SymKey,
        /// Addresses clients reach this server at; a token must name one. An unspecified IP (`0.0.0.0:port`)
        /// stands for every address with that port.
        public_addrs: Vec<SocketAddr>,
        /// Unix time, seconds, at session time zero (token expiry is absolute).
        unix_at_epoch: u64,
    },
}

impl std::fmt::Debug for ServerAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Peer { join_code } => f
                .debug_struct("Peer")
                .field("join_code", &join_code.is_some())
                .finish(),
            Self::Tokens { public_addrs, .. } => f
                .debug_struct("Tokens")
                .field("public_addrs", public_addrs)
                .finish_non_exhaustive(),
        }
    }
}

/// Settings of a server endpoint.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Whom to admit.
    pub auth: ServerAuth,
    /// Most sessions at once; a response beyond is refused and counted.
    pub max_sessions: usize,
    /// A session silent this long is closed.
    pub idle_timeout: Duration,
    /// An empty datagram is sent on a session quiet this long, so the peer's idle timer holds.
    pub keepalive: Duration,
    /// How long a challenge cookie stays good.
    pub cookie_lifetime: Duration,
}

impl ServerConfig {
    /// Defaults around `auth`: 64 sessions, a 10 s idle timeout, 1 s keep-alives, 10 s cookies.
    pub fn new(auth: ServerAuth) -> Self {
        Self {
            auth,
            max_sessions: 64,
            idle_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(1),
            cookie_lifetime: Duration::from_secs(10),
        }
    }
}

/// How a client proves it may connect.
#[derive(Clone, Debug)]
pub enum ClientAuth {
    /// Peer mode, with the join code the host shows (if it set one).
    Peer {
        /// The code as typed.
        join_code: Option<String>,
    },
    /// Dedicated mode: a token from the issuer.
    Token(Box<ConnectToken>),
}

/// Settings of a client endpoint.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// The server to connect to.
    pub server: SocketAddr,
    /// How to prove the right to connect.
    pub auth: ClientAuth,
    /// Interval between handshake retries.
    pub resend: Duration,
    /// Give up connecting after this long.
    pub connect_timeout: Duration,
    /// A connected session silent this long is closed.
    pub idle_timeout: Duration,
    /// An empty datagram is sent when nothing else went out for this long.
    pub keepalive: Duration,
}

impl ClientConfig {
    /// Defaults: retries every 100 ms, 10 s to connect, 10 s idle timeout, 1 s keep-alives.
    pub fn new(server: SocketAddr, auth: ClientAuth) -> Self {
        Self {
            server,
            auth,
            resend: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(10),
            keepalive: Duration::from_secs(1),
        }
    }
}

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Nothing authentic arrived for the idle timeout.
    TimedOut,
    /// The handshake got no answer in time (server down, full, or a wrong join code or token).
    ConnectFailed,
    /// Closed locally.
    Closed,
    /// The same address completed a new handshake.
    Replaced,
}

/// What an endpoint reports beside data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionEvent {
    /// A peer passed the challenge; in token mode, with what its token says.
    Connected {
        /// Its address.
        peer: SocketAddr,
        /// The token's identity (token mode, server side).
        identity: Option<PeerIdentity>,
    },
    /// A session ended.
    Closed {
        /// Its address.
        peer: SocketAddr,
        /// Why.
        reason: CloseReason,
    },
}

/// One authenticated session.
#[derive(Debug)]
struct Session {
    keys: SessionKeys,
    next_send: u64,
    window: ReplayWindow,
    last_recv: Duration,
    last_send: Duration,
    /// Nonce of the cookie the session was set up with (a retransmitted response carries the same).
    handshake: [u8; XNONCE_BYTES],
    /// Nonce of the connect token (token mode), so its reuse from another address is refused.
    token: Option<[u8; XNONCE_BYTES]>,
}

impl Session {
    fn new(keys: SessionKeys, now: Duration, handshake: [u8; XNONCE_BYTES]) -> Self {
        Self {
            keys,
            next_send: 0,
            window: ReplayWindow::new(),
            last_recv: now,
            last_send: now,
            handshake,
            token: None,
        }
    }

    fn seal(&mut self, now: Duration, plaintext: &[u8]) -> Option<Vec<u8>> {
        let seq = self.next_send;
        let aad = data_aad(seq);
        let sealed = seal(&self.keys.send, seq, &aad, plaintext)?;
        self.next_send += 1;
        self.last_send = now;
        let mut out = Vec::with_capacity(DATA_OVERHEAD + plaintext.len());
        out.push(KIND_DATA);
        out.extend_from_slice(&seq.to_le_bytes());
        out.extend_from_slice(&sealed);
        Some(out)
    }
}

/// Most used cookies and tokens remembered (each needs a completed challenge round trip to be added).
const MAX_REMEMBERED: usize = 4096;
/// Where a token cookie holds the token's nonce, and after it the token's expiry.
const TOKEN_NONCE_AT: usize = 81 + USER_DATA_BYTES;
const TOKEN_EXPIRY_AT: usize = TOKEN_NONCE_AT + XNONCE_BYTES;
/// Most datagrams a connecting client holds for sending once connected.
const MAX_QUEUED: usize = 64;

/// The server side's state.
struct Server {
    config: ServerConfig,
    cookie_key: SymKey,
    secret: StaticSecret,
    public: [u8; 32],
    limiter: SourceLimiter,
    sessions: HashMap<SocketAddr, Session>,
    used_cookies: HashMap<[u8; XNONCE_BYTES], Duration>,
    used_tokens: HashMap<[u8; XNONCE_BYTES], (SocketAddr, u64)>,
}

/// Where a client is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientPhase {
    /// Sending connect requests.
    Requesting,
    /// Challenge received; sending the response.
    Responding,
    /// Authenticated both ways.
    Connected,
    /// The session ended, or never began.
    Closed(CloseReason),
}

/// The client side's state.
struct Client {
    config: ClientConfig,
    phase: ClientPhase,
    started: Duration,
    last_handshake: Option<Duration>,
    request: Vec<u8>,
    ephemeral: Option<(StaticSecret, [u8; 32])>,
    pending: Option<(KeyPair, [u8; XNONCE_BYTES])>,
    response: Vec<u8>,
    session: Option<Session>,
    queued: VecDeque<Vec<u8>>,
}

enum Role {
    Server(Box<Server>),
    Client(Box<Client>),
}

/// One side of the connection layer: a server (peer host, dedicated server) or a client (peer guest, shooter
/// client). Feed it raw datagrams with [`Endpoint::handle_datagram`], which returns the authenticated plaintext
/// for the core; seal the core's datagrams with [`Endpoint::seal`]; send what [`Endpoint::poll_transmit`] gives
/// (handshakes and keep-alives); run [`Endpoint::handle_timeout`] at [`Endpoint::poll_timeout`].
pub struct Endpoint {
    role: Role,
    rng: ChaCha20Rng,
    outgoing: VecDeque<(SocketAddr, Vec<u8>)>,
    events: VecDeque<ConnectionEvent>,
    stats: ConnectionStats,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("server", &matches!(self.role, Role::Server(_)))
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A server endpoint; `seed` feeds its random numbers (cookie keys, nonces): give it 32 bytes from the
    /// operating system in a real server, a fixed value in a test.
    pub fn server(config: ServerConfig, seed: [u8; 32]) -> Self {
        let mut rng = ChaCha20Rng::from_seed(seed);
        let mut cookie_key = [0u8; 32];
        rng.fill_bytes(&mut cookie_key);
        let (secret, public) = x25519_keypair(rng.random());
        let limiter = SourceLimiter::new((rng.next_u64(), rng.next_u64()));
        Self {
            role: Role::Server(Box::new(Server {
                config,
                cookie_key,
                secret,
                public,
                limiter,
                sessions: HashMap::new(),
                used_cookies: HashMap::new(),
                used_tokens: HashMap::new(),
            })),
            rng,
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
            stats: ConnectionStats::default(),
        }
    }

    /// A client endpoint that starts connecting at `now` (its first request goes out on the first
    /// [`Endpoint::handle_timeout`]).
    pub fn client(config: ClientConfig, now: Duration, seed: [u8; 32]) -> Self {
        let mut rng = ChaCha20Rng::from_seed(seed);
        let (request, ephemeral) = match &config.auth {
            ClientAuth::Peer { .. } => {
                let (secret, public) = x25519_keypair(rng.random());
                let mut request = Vec::with_capacity(PEER_REQUEST_BYTES);
                request.push(KIND_PEER_REQUEST);
                request.extend_from_slice(&CONNECTION_PROTOCOL_ID.to_le_bytes());
                request.extend_from_slice(&public);
                request.resize(PEER_REQUEST_BYTES, 0);
                (request, Some((secret, public)))
            }
            ClientAuth::Token(token) => {
                let mut request = Vec::with_capacity(TOKEN_REQUEST_BYTES);
                request.push(KIND_TOKEN_REQUEST);
                request.extend_from_slice(&token.protocol_id.to_le_bytes());
                request.extend_from_slice(&token.expires_unix.to_le_bytes());
                request.extend_from_slice(&token.private);
                (request, None)
            }
        };
        Self {
            role: Role::Client(Box::new(Client {
                config,
                phase: ClientPhase::Requesting,
                started: now,
                last_handshake: None,
                request,
                ephemeral,
                pending: None,
                response: Vec::new(),
                session: None,
                queued: VecDeque::new(),
            })),
            rng,
            outgoing: VecDeque::new(),
            events: VecDeque::new(),
            stats: ConnectionStats::default(),
        }
    }

    /// What went through and what was dropped.
    pub fn stats(&self) -> &ConnectionStats {
        &self.stats
    }

    /// Sessions open (a client has at most one).
    pub fn sessions(&self) -> usize {
        match &self.role {
            Role::Server(s) => s.sessions.len(),
            Role::Client(c) => usize::from(c.session.is_some()),
        }
    }

    /// True when a session with `peer` is authenticated both ways.
    pub fn is_connected(&self, peer: SocketAddr) -> bool {
        match &self.role {
            Role::Server(s) => s.sessions.contains_key(&peer),
            Role::Client(c) => c.config.server == peer && c.session.is_some(),
        }
    }

    /// The client's phase (`None` on a server).
    pub fn client_phase(&self) -> Option<ClientPhase> {
        match &self.role {
            Role::Server(_) => None,
            Role::Client(c) => Some(c.phase),
        }
    }

    /// Bytes of per-peer state the endpoint holds: sessions and remembered cookies and tokens (the rate
    /// limiter's fixed table not counted). Grows only with peers that passed the challenge.
    pub fn held_entries(&self) -> usize {
        match &self.role {
            Role::Server(s) => s.sessions.len() + s.used_cookies.len() + s.used_tokens.len(),
            Role::Client(c) => c.queued.len() + usize::from(c.session.is_some()),
        }
    }

    /// Adds an address connect tokens may name to reach this server (token mode; ignored otherwise), such as the
    /// port the system picked at bind.
    pub fn add_public_addr(&mut self, addr: SocketAddr) {
        if let Role::Server(s) = &mut self.role
            && let ServerAuth::Tokens { public_addrs, .. } = &mut s.config.auth
            && !public_addrs.contains(&addr)
        {
            public_addrs.push(addr);
        }
    }

    /// The next handshake or keep-alive datagram to send.
    pub fn poll_transmit(&mut self) -> Option<(SocketAddr, Vec<u8>)> {
        self.outgoing.pop_front()
    }

    /// The next connection event.
    pub fn poll_event(&mut self) -> Option<ConnectionEvent> {
        self.events.pop_front()
    }

    /// Ends the session with `peer` without a word (the core ended it); later datagrams from it are dropped as
    /// from an unknown sender.
    pub fn close(&mut self, peer: SocketAddr) {
        let closed = match &mut self.role {
            Role::Server(s) => s.sessions.remove(&peer).is_some(),
            Role::Client(c) => {
                let open = c.config.server == peer && !matches!(c.phase, ClientPhase::Closed(_));
                if open {
                    c.phase = ClientPhase::Closed(CloseReason::Closed);
                    c.session = None;
                    c.pending = None;
                    c.queued.clear();
                }
                open
            }
        };
        if closed {
            self.stats.closed += 1;
            self.events.push_back(ConnectionEvent::Closed {
                peer,
                reason: CloseReason::Closed,
            });
        }
    }

    /// Seals the core's `plaintext` for `to`. `None` when there is no session with `to`: a connecting client
    /// holds the datagram (up to a bound) and sends it once connected; a server drops it and counts it.
    pub fn seal(&mut self, now: Duration, to: SocketAddr, plaintext: &[u8]) -> Option<Vec<u8>> {
        let sealed = match &mut self.role {
            Role::Server(s) => s.sessions.get_mut(&to).and_then(|x| x.seal(now, plaintext)),
            Role::Client(c) if c.config.server == to => match (&mut c.session, c.phase) {
                (Some(session), _) => session.seal(now, plaintext),
                (None, ClientPhase::Requesting | ClientPhase::Responding) => {
                    if c.queued.len() < MAX_QUEUED {
                        c.queued.push_back(plaintext.to_vec());
                    } else {
                        self.stats.unsent += 1;
                    }
                    return None;
                }
                _ => None,
            },
            Role::Client(_) => None,
        };
        match sealed {
            Some(_) => self.stats.data_out += 1,
            None => self.stats.unsent += 1,
        }
        sealed
    }

    /// Takes one raw datagram from `from` at `now`. Returns the plaintext for the core when it is authentic data
    /// from a peer with a session; anything else is a handshake step (answered through
    /// [`Endpoint::poll_transmit`]), a keep-alive, or dropped and counted.
    pub fn handle_datagram(
        &mut self,
        now: Duration,
        from: SocketAddr,
        bytes: &[u8],
    ) -> Option<Vec<u8>> {
        let Some(&kind) = bytes.first() else {
            self.stats.dropped.malformed += 1;
            return None;
        };
        match &mut self.role {
            Role::Server(_) => match kind {
                KIND_DATA => self.server_data(now, from, bytes),
                KIND_PEER_REQUEST | KIND_TOKEN_REQUEST => {
                    self.server_request(now, from, bytes);
                    None
                }
                KIND_RESPONSE => {
                    self.server_response(now, from, bytes);
                    None
                }
                KIND_CHALLENGE => {
                    self.stats.dropped.unexpected += 1;
                    None
                }
                _ => {
                    self.stats.dropped.malformed += 1;
                    None
                }
            },
            Role::Client(c) => {
                if from != c.config.server {
                    self.stats.dropped.unknown_sender += 1;
                    return None;
                }
                match kind {
                    KIND_DATA => self.client_data(now, bytes),
                    KIND_CHALLENGE => {
                        self.client_challenge(now, bytes);
                        None
                    }
                    KIND_PEER_REQUEST | KIND_TOKEN_REQUEST | KIND_RESPONSE => {
                        self.stats.dropped.unexpected += 1;
                        None
                    }
                    _ => {
                        self.stats.dropped.malformed += 1;
                        None
                    }
                }
            }
        }
    }

    /// When [`Endpoint::handle_timeout`] must next run.
    pub fn poll_timeout(&self) -> Option<Duration> {
        match &self.role {
            Role::Server(s) => s
                .sessions
                .values()
                .map(|x| {
                    (x.last_send + s.config.keepalive).min(x.last_recv + s.config.idle_timeout)
                })
                .min(),
            Role::Client(c) => match (c.phase, &c.session) {
                (ClientPhase::Requesting | ClientPhase::Responding, _) => Some(
                    c.last_handshake
                        .map_or(c.started, |t| t + c.config.resend)
                        .min(c.started + c.config.connect_timeout),
                ),
                (ClientPhase::Connected, Some(x)) => Some(
                    (x.last_send + c.config.keepalive).min(x.last_recv + c.config.idle_timeout),
                ),
                _ => None,
            },
        }
    }

    /// Retries handshakes, sends keep-alives, closes silent sessions.
    pub fn handle_timeout(&mut self, now: Duration) {
        match &mut self.role {
            Role::Server(s) => {
                let idle = s.config.idle_timeout;
                let keepalive = s.config.keepalive;
                let mut gone = Vec::new();
                for (&peer, session) in &mut s.sessions {
                    if now >= session.last_recv + idle {
                        gone.push(peer);
                    } else if now >= session.last_send + keepalive
                        && let Some(d) = session.seal(now, &[])
                    {
                        self.outgoing.push_back((peer, d));
                    }
                }
                for peer in gone {
                    s.sessions.remove(&peer);
                    self.stats.closed += 1;
                    self.events.push_back(ConnectionEvent::Closed {
                        peer,
                        reason: CloseReason::TimedOut,
                    });
                }
            }
            Role::Client(c) => {
                let server = c.config.server;
                match c.phase {
                    ClientPhase::Requesting | ClientPhase::Responding => {
                        if now >= c.started + c.config.connect_timeout {
                            c.phase = ClientPhase::Closed(CloseReason::ConnectFailed);
                            c.queued.clear();
                            self.events.push_back(ConnectionEvent::Closed {
                                peer: server,
                                reason: CloseReason::ConnectFailed,
                            });
                        } else if c.last_handshake.is_none_or(|t| now >= t + c.config.resend) {
                            let packet = if c.phase == ClientPhase::Requesting {
                                c.request.clone()
                            } else {
                                c.response.clone()
                            };
                            c.last_handshake = Some(now);
                            self.outgoing.push_back((server, packet));
                        }
                    }
                    ClientPhase::Connected => {
                        let Some(session) = &mut c.session else {
                            return;
                        };
                        if now >= session.last_recv + c.config.idle_timeout {
                            c.session = None;
                            c.phase = ClientPhase::Closed(CloseReason::TimedOut);
                            self.stats.closed += 1;
                            self.events.push_back(ConnectionEvent::Closed {
                                peer: server,
                                reason: CloseReason::TimedOut,
                            });
                        } else if now >= session.last_send + c.config.keepalive
                            && let Some(d) = session.seal(now, &[])
                        {
                            self.outgoing.push_back((server, d));
                        }
                    }
                    ClientPhase::Closed(_) => {}
                }
            }
        }
    }

    fn server_request(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        let Role::Server(s) = &mut self.role else {
            return;
        };
        let kind = bytes[0];
        let expected = match kind {
            KIND_PEER_REQUEST => PEER_REQUEST_BYTES,
            _ => TOKEN_REQUEST_BYTES,
        };
        if bytes.len() != expected {
            self.stats.dropped.malformed += 1;
            return;
        }
        let mut r = Reader(&bytes[1..]);
        let protocol = r.array::<8>().map(u64::from_le_bytes);
        if protocol != Some(CONNECTION_PROTOCOL_ID) {
            self.stats.dropped.wrong_protocol += 1;
            return;
        }
        let mut cookie = [0u8; COOKIE_PLAIN_BYTES];
        let expiry_ms = (now + s.config.cookie_lifetime).as_millis() as u64;
        cookie[1..9].copy_from_slice(&expiry_ms.to_le_bytes());
        match (&s.config.auth, kind) {
            (ServerAuth::Peer { .. }, KIND_PEER_REQUEST) => {
                let Some(client_public) = r.array::<32>() else {
                    self.stats.dropped.malformed += 1;
                    return;
                };
                if !s.limiter.allow(now, from) {
                    self.stats.dropped.rate_limited += 1;
                    return;
                }
                cookie[0] = 1;
                cookie[9..41].copy_from_slice(&client_public);
            }
            (
                ServerAuth::Tokens {
                    key,
                    public_addrs,
                    unix_at_epoch,
                },
                KIND_TOKEN_REQUEST,
            ) => {
                let expires_unix = r.array::<8>().map(u64::from_le_bytes).unwrap_or(0);
                let unix_now = unix_at_epoch.saturating_add(now.as_secs());
                if expires_unix <= unix_now {
                    self.stats.dropped.expired_token += 1;
                    return;
                }
                if !s.limiter.allow(now, from) {
                    self.stats.dropped.rate_limited += 1;
                    return;
                }
                let Some(sealed) = r.bytes(PRIVATE_TOKEN_BYTES) else {
                    self.stats.dropped.malformed += 1;
                    return;
                };
                let Some(private) = open_private(key, CONNECTION_PROTOCOL_ID, expires_unix, sealed)
                else {
                    self.stats.dropped.bad_token += 1;
                    return;
                };
                let serves = |a: &SocketAddr| {
                    public_addrs
                        .iter()
                        .any(|p| p == a || (p.ip().is_unspecified() && p.port() == a.port()))
                };
                if !private.server_addrs.iter().any(serves) {
                    self.stats.dropped.wrong_server += 1;
                    return;
                }
                let mut token_nonce = [0u8; XNONCE_BYTES];
                token_nonce.copy_from_slice(&sealed[..XNONCE_BYTES]);
                if s.used_tokens
                    .get(&token_nonce)
                    .is_some_and(|&(addr, _)| addr != from)
                {
                    self.stats.dropped.token_reused += 1;
                    return;
                }
                cookie[0] = 2;
                cookie[9..41].copy_from_slice(&private.keys.client_to_server);
                cookie[41..73].copy_from_slice(&private.keys.server_to_client);
                cookie[73..81].copy_from_slice(&private.identity.client_id.to_le_bytes());
                cookie[81..81 + USER_DATA_BYTES].copy_from_slice(&private.identity.user_data);
                cookie[TOKEN_NONCE_AT..TOKEN_EXPIRY_AT].copy_from_slice(&token_nonce);
                cookie[TOKEN_EXPIRY_AT..].copy_from_slice(&expires_unix.to_le_bytes());
            }
            _ => {
                self.stats.dropped.unexpected += 1;
                return;
            }
        }
        let nonce: [u8; XNONCE_BYTES] = self.rng.random();
        let Some(sealed) = xseal(&s.cookie_key, nonce, &addr_bytes(from), &cookie) else {
            return;
        };
        let mut challenge = Vec::with_capacity(CHALLENGE_BYTES);
        challenge.push(KIND_CHALLENGE);
        match s.config.auth {
            ServerAuth::Peer { .. } => challenge.extend_from_slice(&s.public),
            ServerAuth::Tokens { .. } => challenge.extend_from_slice(&[0; 32]),
        }
        challenge.extend_from_slice(&sealed);
        self.stats.challenges_sent += 1;
        self.outgoing.push_back((from, challenge));
    }

    fn server_response(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) {
        let Role::Server(s) = &mut self.role else {
            return;
        };
        if bytes.len() != RESPONSE_BYTES {
            self.stats.dropped.malformed += 1;
            return;
        }
        let cookie = &bytes[1..1 + COOKIE_BYTES];
        let proof = &bytes[1 + COOKIE_BYTES..];
        let mut handshake = [0u8; XNONCE_BYTES];
        handshake.copy_from_slice(&cookie[..XNONCE_BYTES]);
        if let Some(session) = s.sessions.get_mut(&from)
            && session.handshake == handshake
        {
            // Our welcome was lost and the client repeated its response: welcome again (smaller than the response).
            if let Some(d) = session.seal(now, &[]) {
                self.outgoing.push_back((from, d));
            }
            return;
        }
        if !s.limiter.allow(now, from) {
            self.stats.dropped.rate_limited += 1;
            return;
        }
        let Some(plain) = xopen(&s.cookie_key, &addr_bytes(from), cookie) else {
            self.stats.dropped.bad_cookie += 1;
            return;
        };
        let Some(plain) = <[u8; COOKIE_PLAIN_BYTES]>::try_from(plain.as_slice()).ok() else {
            self.stats.dropped.bad_cookie += 1;
            return;
        };
        let expiry =
            Duration::from_millis(u64::from_le_bytes(plain[1..9].try_into().unwrap_or([0; 8])));
        if now >= expiry {
            self.stats.dropped.expired_cookie += 1;
            return;
        }
        if s.used_cookies.contains_key(&handshake) {
            self.stats.dropped.replayed_response += 1;
            return;
        }
        let mut a = [0u8; 32];
        let mut b = [0u8; 32];
        a.copy_from_slice(&plain[9..41]);
        b.copy_from_slice(&plain[41..73]);
        let mut token_expiry = 0;
        let (keys, identity, token) = match &s.config.auth {
            ServerAuth::Peer { join_code } => {
                let code = normalize_join_code(join_code.as_deref().unwrap_or(""));
                let Some(keys) = peer_keys(&s.secret, a, a, s.public, &handshake, &code) else {
                    self.stats.dropped.bad_proof += 1;
                    return;
                };
                (keys, None, None)
            }
            ServerAuth::Tokens { .. } => {
                let mut user_data = [0u8; USER_DATA_BYTES];
                user_data.copy_from_slice(&plain[81..81 + USER_DATA_BYTES]);
                let mut token = [0u8; XNONCE_BYTES];
                token.copy_from_slice(&plain[TOKEN_NONCE_AT..TOKEN_EXPIRY_AT]);
                token_expiry =
                    u64::from_le_bytes(plain[TOKEN_EXPIRY_AT..].try_into().unwrap_or([0; 8]));
                let identity = PeerIdentity {
                    client_id: u64::from_le_bytes(plain[73..81].try_into().unwrap_or([0; 8])),
                    user_data,
                };
                let keys = KeyPair {
                    client_to_server: a,
                    server_to_client: b,
                };
                (keys, Some(identity), Some(token))
            }
        };
        if open(
            &keys.client_to_server,
            PROOF_SEQ,
            &bytes[..1 + COOKIE_BYTES],
            proof,
        )
        .is_none()
        {
            self.stats.dropped.bad_proof += 1;
            return;
        }
        if let Some(token) = token
            && s.used_tokens
                .get(&token)
                .is_some_and(|&(addr, _)| addr != from)
        {
            self.stats.dropped.token_reused += 1;
            return;
        }
        let replacing = s.sessions.contains_key(&from);
        if !replacing && s.sessions.len() >= s.config.max_sessions {
            self.stats.dropped.full += 1;
            return;
        }
        if !remember(
            &mut s.used_cookies,
            handshake,
            now + s.config.cookie_lifetime,
            |&t| t <= now,
        ) {
            self.stats.dropped.full += 1;
            return;
        }
        if let (Some(token), ServerAuth::Tokens { unix_at_epoch, .. }) = (token, &s.config.auth) {
            let unix_now = unix_at_epoch.saturating_add(now.as_secs());
            // Remembered until the token expires: from then on its expiry alone refuses it.
            if !remember(
                &mut s.used_tokens,
                token,
                (from, token_expiry),
                |&(_, t)| t <= unix_now,
            ) {
                self.stats.dropped.full += 1;
                return;
            }
        }
        let mut session = Session::new(keys.for_server(), now, handshake);
        session.token = token;
        if let Some(welcome) = session.seal(now, &[]) {
            self.outgoing.push_back((from, welcome));
        }
        if replacing {
            self.stats.closed += 1;
            self.events.push_back(ConnectionEvent::Closed {
                peer: from,
                reason: CloseReason::Replaced,
            });
        }
        s.sessions.insert(from, session);
        self.stats.established += 1;
        self.events.push_back(ConnectionEvent::Connected {
            peer: from,
            identity,
        });
    }

    fn server_data(&mut self, now: Duration, from: SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
        let Role::Server(s) = &mut self.role else {
            return None;
        };
        let Some(session) = s.sessions.get_mut(&from) else {
            self.stats.dropped.unknown_sender += 1;
            return None;
        };
        open_data(&mut self.stats, session, now, bytes)
            .ok()
            .flatten()
    }

    fn client_challenge(&mut self, now: Duration, bytes: &[u8]) {
        let Role::Client(c) = &mut self.role else {
            return;
        };
        if c.phase != ClientPhase::Requesting {
            // Every request that arrives is answered, so later challenges are expected: the first is answered.
            return;
        }
        if bytes.len() != CHALLENGE_BYTES {
            self.stats.dropped.malformed += 1;
            return;
        }
        let mut server_public = [0u8; 32];
        server_public.copy_from_slice(&bytes[1..33]);
        let cookie = &bytes[33..];
        let mut handshake = [0u8; XNONCE_BYTES];
        handshake.copy_from_slice(&cookie[..XNONCE_BYTES]);
        let keys = match (&c.config.auth, &c.ephemeral) {
            (ClientAuth::Peer { join_code }, Some((secret, public))) => {
                let code = normalize_join_code(join_code.as_deref().unwrap_or(""));
                let Some(keys) = peer_keys(
                    secret,
                    server_public,
                    *public,
                    server_public,
                    &handshake,
                    &code,
                ) else {
                    self.stats.dropped.malformed += 1;
                    return;
                };
                keys
            }
            (ClientAuth::Token(token), _) => token.keys,
            _ => return,
        };
        let mut response = Vec::with_capacity(RESPONSE_BYTES);
        response.push(KIND_RESPONSE);
        response.extend_from_slice(cookie);
        let Some(proof) = seal(&keys.client_to_server, PROOF_SEQ, &response, &[]) else {
            return;
        };
        response.extend_from_slice(&proof);
        c.response = response.clone();
        c.pending = Some((keys, handshake));
        c.phase = ClientPhase::Responding;
        c.last_handshake = Some(now);
        self.outgoing.push_back((c.config.server, response));
    }

    fn client_data(&mut self, now: Duration, bytes: &[u8]) -> Option<Vec<u8>> {
        let Role::Client(c) = &mut self.role else {
            return None;
        };
        let server = c.config.server;
        if c.phase == ClientPhase::Responding
            && let Some((keys, handshake)) = c.pending
        {
            let mut session = Session::new(keys.for_client(), now, handshake);
            let plain = open_data(&mut self.stats, &mut session, now, bytes).ok()?;
            c.pending = None;
            c.phase = ClientPhase::Connected;
            for queued in c.queued.drain(..) {
                if let Some(d) = session.seal(now, &queued) {
                    self.stats.data_out += 1;
                    self.outgoing.push_back((server, d));
                }
            }
            c.session = Some(session);
            self.stats.established += 1;
            self.events.push_back(ConnectionEvent::Connected {
                peer: server,
                identity: None,
            });
            return plain;
        }
        let Some(session) = &mut c.session else {
            self.stats.dropped.unknown_sender += 1;
            return None;
        };
        open_data(&mut self.stats, session, now, bytes)
            .ok()
            .flatten()
    }
}

/// Opens a data datagram on `session`: checks the replay window, authenticates, then records the sequence.
/// `Ok(None)` is an authentic keep-alive (empty plaintext, not handed on); `Err` a dropped datagram (counted).
fn open_data(
    stats: &mut ConnectionStats,
    session: &mut Session,
    now: Duration,
    bytes: &[u8],
) -> Result<Option<Vec<u8>>, ()> {
    if bytes.len() < DATA_OVERHEAD {
        stats.dropped.malformed += 1;
        return Err(());
    }
    let seq = u64::from_le_bytes(bytes[1..9].try_into().unwrap_or([0xff; 8]));
    if !session.window.is_fresh(seq) {
        stats.dropped.replayed += 1;
        return Err(());
    }
    let Some(plain) = open(&session.keys.recv, seq, &data_aad(seq), &bytes[9..]) else {
        stats.dropped.auth_failed += 1;
        return Err(());
    };
    session.window.mark(seq);
    session.last_recv = now;
    if plain.is_empty() {
        return Ok(None);
    }
    stats.data_in += 1;
    Ok(Some(plain))
}

/// Records `key` in a bounded map, first forgetting the entries `expired` says are done (an entry is kept only
/// while it can still refuse a replay, so a server that runs for days holds what the last lifetime brought, not
/// everything it ever saw) and giving back room a burst left behind; false when still full.
fn remember<K: std::hash::Hash + Eq, V>(
    map: &mut HashMap<K, V>,
    key: K,
    value: V,
    expired: impl Fn(&V) -> bool,
) -> bool {
    map.retain(|_, v| !expired(v));
    if map.capacity() > 4 * map.len().max(16) {
        map.shrink_to(2 * map.len());
    }
    if map.len() >= MAX_REMEMBERED {
        return false;
    }
    map.insert(key, value);
    true
}

/// A join code as both sides compare it: letters upper-cased, spaces and dashes dropped, so "abc-123" typed on
/// one side matches "ABC 123" shown on the other.
pub fn normalize_join_code(code: &str) -> String {
    code.chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// A fresh join code for a host to show, from the operating system's generator: 8 characters from an alphabet
/// without look-alikes (40 bits).
pub fn new_join_code() -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut rng = rand::rng();
    let code: String = (0..8)
        .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
        .collect();
    format!("{}-{}", &code[..4], &code[4..])
}
