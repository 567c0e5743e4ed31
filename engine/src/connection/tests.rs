//! The connection layer under spoofing, replay and corruption, in both modes.

use std::net::SocketAddr;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::*;

const UNIX_AT_EPOCH: u64 = 1_800_000_000;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn server_addr() -> SocketAddr {
    addr("10.0.0.1:7000")
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Peer,
    Tokens,
}

const MODES: [Mode; 2] = [Mode::Peer, Mode::Tokens];
const TOKEN_KEY: SymKey = [5; 32];

fn server(mode: Mode) -> Endpoint {
    let auth = match mode {
        Mode::Peer => ServerAuth::Peer {
            join_code: Some("ABCD-2345".into()),
        },
        Mode::Tokens => ServerAuth::Tokens {
            key: TOKEN_KEY,
            public_addrs: vec![server_addr()],
            unix_at_epoch: UNIX_AT_EPOCH,
        },
    };
    Endpoint::server(ServerConfig::new(auth), [1; 32])
}

fn token(client_id: u64) -> ConnectToken {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(client_id);
    TokenIssuer::new(TOKEN_KEY)
        .issue(
            &mut rng,
            UNIX_AT_EPOCH,
            &TokenRequest {
                client_id,
                user_data: [client_id as u8; USER_DATA_BYTES],
                server_addrs: vec![server_addr()],
                valid_for: Duration::from_secs(300),
            },
        )
        .unwrap()
}

fn client(mode: Mode, seed: u8) -> Endpoint {
    client_at(mode, seed, Duration::ZERO)
}

/// A client like [`client`] that starts connecting at `now`.
fn client_at(mode: Mode, seed: u8, now: Duration) -> Endpoint {
    let auth = match mode {
        Mode::Peer => ClientAuth::Peer {
            join_code: Some("abcd 2345".into()),
        },
        Mode::Tokens => ClientAuth::Token(Box::new(token(u64::from(seed)))),
    };
    Endpoint::client(ClientConfig::new(server_addr(), auth), now, [seed; 32])
}

/// Everything both sides sent during a connect, in order, by sender.
#[derive(Default)]
struct Transcript {
    from_client: Vec<Vec<u8>>,
    from_server: Vec<Vec<u8>>,
}

/// Runs the handshake between `client` at `at` and `server` with no loss, recording every datagram.
fn connect(
    server: &mut Endpoint,
    client: &mut Endpoint,
    at: SocketAddr,
    now: Duration,
) -> Transcript {
    let mut t = Transcript::default();
    client.handle_timeout(now);
    for _ in 0..4 {
        while let Some((to, bytes)) = client.poll_transmit() {
            assert_eq!(to, server_addr());
            assert!(server.handle_datagram(now, at, &bytes).is_none());
            t.from_client.push(bytes);
        }
        while let Some((to, bytes)) = server.poll_transmit() {
            assert_eq!(to, at);
            assert!(client.handle_datagram(now, server_addr(), &bytes).is_none());
            t.from_server.push(bytes);
        }
    }
    assert!(server.is_connected(at), "server side");
    assert!(client.is_connected(server_addr()), "client side");
    t
}

#[test]
fn a_spoofed_connect_request_gets_no_larger_reply_and_leaves_no_state() {
    for mode in MODES {
        let mut s = server(mode);
        let mut real = client(mode, 9);
        real.handle_timeout(Duration::ZERO);
        let (_, request) = real.poll_transmit().unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut replies = 0;
        for i in 0..5_000u32 {
            let spoofed = SocketAddr::from((rng.random::<[u8; 4]>(), rng.random::<u16>()));
            let now = Duration::from_millis(u64::from(i));
            let bytes = match i % 3 {
                0 => request.clone(),
                1 => {
                    let mut b = request.clone();
                    let at = rng.random_range(1..b.len());
                    b[at] ^= 1 << rng.random_range(0..8);
                    b
                }
                _ => (0..rng.random_range(0..1300))
                    .map(|_| rng.random())
                    .collect(),
            };
            assert!(s.handle_datagram(now, spoofed, &bytes).is_none());
            while let Some((to, reply)) = s.poll_transmit() {
                assert_eq!(to, spoofed, "{mode:?}: replies go only to the sender");
                assert!(
                    reply.len() <= bytes.len(),
                    "{mode:?}: a {}-byte reply to a {}-byte request",
                    reply.len(),
                    bytes.len()
                );
                replies += 1;
            }
            assert_eq!(
                s.held_entries(),
                0,
                "{mode:?}: state before any challenge was answered"
            );
        }
        assert!(
            replies > 1000,
            "{mode:?}: genuine requests are still answered ({replies})"
        );
        assert_eq!(s.sessions(), 0);
        assert!(
            s.stats().dropped.total() > 1500,
            "{mode:?}: {:?}",
            s.stats().dropped
        );
    }
}

#[test]
fn a_source_flooding_requests_is_rate_limited() {
    for mode in MODES {
        let mut s = server(mode);
        let mut c = client(mode, 4);
        c.handle_timeout(Duration::ZERO);
        let (_, request) = c.poll_transmit().unwrap();
        let attacker = addr("10.9.9.9:1000");
        for i in 0..1000 {
            s.handle_datagram(Duration::from_millis(i), attacker, &request);
        }
        let answered = std::iter::from_fn(|| s.poll_transmit()).count() as u64;
        assert!(
            answered <= HANDSHAKE_BURST as u64 + 20,
            "{mode:?}: {answered} challenges in one second"
        );
        assert!(s.stats().dropped.rate_limited >= 900, "{mode:?}");
    }
}

#[test]
fn replayed_joins_and_tokens_are_refused() {
    for mode in MODES {
        let mut s = server(mode);
        let mut c = client(mode, 7);
        let real = addr("10.0.1.1:5000");
        let t = connect(&mut s, &mut c, real, Duration::ZERO);
        let response = t.from_client[1].clone();
        assert_eq!(response[0], 0xC4);
        let now = Duration::from_millis(50);
        // The response, replayed from another address: the cookie is bound to the real one.
        let thief = addr("10.0.2.2:6000");
        s.handle_datagram(now, thief, &response);
        assert!(!s.is_connected(thief), "{mode:?}");
        assert_eq!(s.stats().dropped.bad_cookie, 1, "{mode:?}");
        // The request replayed from elsewhere gets a challenge at most (peer) or nothing (a token in use).
        s.handle_datagram(now, thief, &t.from_client[0]);
        let replies: Vec<_> = std::iter::from_fn(|| s.poll_transmit()).collect();
        match mode {
            Mode::Peer => assert_eq!(replies.len(), 1),
            Mode::Tokens => {
                assert!(
                    replies.is_empty(),
                    "{mode:?}: a token in use from another address"
                );
                assert_eq!(s.stats().dropped.token_reused, 1);
            }
        }
        // After the session ends, the same response from the same address does not bring it back.
        s.close(real);
        s.handle_datagram(now, real, &response);
        assert!(!s.is_connected(real), "{mode:?}");
        assert_eq!(s.stats().dropped.replayed_response, 1, "{mode:?}");
        // Data replayed on a live session is dropped.
        let mut c2 = client(mode, 8);
        let real2 = addr("10.0.1.2:5000");
        connect(&mut s, &mut c2, real2, now);
        let sealed = c2.seal(now, server_addr(), b"join").unwrap();
        assert_eq!(
            s.handle_datagram(now, real2, &sealed).as_deref(),
            Some(&b"join"[..])
        );
        assert_eq!(s.handle_datagram(now, real2, &sealed), None, "{mode:?}");
        assert_eq!(s.stats().dropped.replayed, 1, "{mode:?}");
    }
}

#[test]
fn an_expired_or_foreign_token_is_refused() {
    let mut s = server(Mode::Tokens);
    // Five minutes and a second after minting, by the server's absolute clock.
    let late = Duration::from_secs(301);
    let auth = ClientAuth::Token(Box::new(token(3)));
    let mut c = Endpoint::client(ClientConfig::new(server_addr(), auth), late, [3; 32]);
    c.handle_timeout(late);
    let (_, request) = c.poll_transmit().unwrap();
    s.handle_datagram(late, addr("10.0.1.1:1"), &request);
    assert!(s.poll_transmit().is_none());
    assert_eq!(s.stats().dropped.expired_token, 1);
    let mut other = Endpoint::server(
        ServerConfig::new(ServerAuth::Tokens {
            key: TOKEN_KEY,
            public_addrs: vec![addr("10.0.0.99:7000")],
            unix_at_epoch: UNIX_AT_EPOCH,
        }),
        [2; 32],
    );
    other.handle_datagram(Duration::ZERO, addr("10.0.1.1:1"), &request);
    assert!(other.poll_transmit().is_none());
    assert_eq!(other.stats().dropped.wrong_server, 1);
}

#[test]
fn a_datagram_with_one_flipped_bit_is_dropped_and_counted() {
    for mode in MODES {
        let mut s = server(mode);
        let mut c = client(mode, 5);
        let at = addr("10.0.1.1:5000");
        connect(&mut s, &mut c, at, Duration::ZERO);
        let now = Duration::from_millis(10);
        let datagram_bits = (DATA_OVERHEAD + b"state update".len()) * 8;
        for (bit, dir) in (0..2 * datagram_bits).zip([true, false].into_iter().cycle()) {
            let bit = bit / 2;
            let (sealed, receiver, from) = if dir {
                (
                    c.seal(now, server_addr(), b"state update").unwrap(),
                    &mut s,
                    at,
                )
            } else {
                (
                    s.seal(now, at, b"state update").unwrap(),
                    &mut c,
                    server_addr(),
                )
            };
            let mut flipped = sealed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let before = receiver.stats().dropped.total();
            assert_eq!(
                receiver.handle_datagram(now, from, &flipped),
                None,
                "{mode:?} bit {bit}"
            );
            assert_eq!(
                receiver.stats().dropped.total(),
                before + 1,
                "{mode:?} bit {bit}"
            );
            assert_eq!(
                receiver.handle_datagram(now, from, &sealed).as_deref(),
                Some(&b"state update"[..]),
                "{mode:?}: the intact datagram still passes"
            );
        }
    }
}

#[test]
fn a_spoofed_datagram_cannot_end_or_change_a_session() {
    for mode in MODES {
        let mut s = server(mode);
        let mut c = client(mode, 6);
        let at = addr("10.0.1.1:5000");
        connect(&mut s, &mut c, at, Duration::ZERO);
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let now = Duration::from_millis(20);
        // Forged "leave" datagrams in the server's name and the client's: plaintext, garbage, and well-framed data
        // with a guessed sequence.
        for i in 0..2000u64 {
            let mut forged = vec![0xD0];
            forged.extend_from_slice(&i.to_le_bytes());
            forged.extend((0..rng.random_range(0..40)).map(|_| rng.random::<u8>()));
            let plain_leave = vec![0x53, 0x50, 0x80];
            for bytes in [&forged, &plain_leave] {
                assert_eq!(c.handle_datagram(now, server_addr(), bytes), None);
                assert_eq!(s.handle_datagram(now, at, bytes), None);
            }
        }
        assert!(
            s.is_connected(at) && c.is_connected(server_addr()),
            "{mode:?}"
        );
        let sealed = c.seal(now, server_addr(), b"still here").unwrap();
        assert_eq!(
            s.handle_datagram(now, at, &sealed).as_deref(),
            Some(&b"still here"[..])
        );
        let sealed = s.seal(now, at, b"so am I").unwrap();
        assert_eq!(
            c.handle_datagram(now, server_addr(), &sealed).as_deref(),
            Some(&b"so am I"[..])
        );
    }
}

#[test]
fn a_wrong_join_code_never_connects() {
    let mut s = server(Mode::Peer);
    let auth = ClientAuth::Peer {
        join_code: Some("WXYZ-9999".into()),
    };
    let mut c = Endpoint::client(
        ClientConfig::new(server_addr(), auth),
        Duration::ZERO,
        [3; 32],
    );
    let at = addr("10.0.1.1:5000");
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(11) {
        c.handle_timeout(now);
        while let Some((_, bytes)) = c.poll_transmit() {
            s.handle_datagram(now, at, &bytes);
        }
        while let Some((_, bytes)) = s.poll_transmit() {
            c.handle_datagram(now, server_addr(), &bytes);
        }
        now += Duration::from_millis(100);
    }
    assert!(!s.is_connected(at));
    assert_eq!(
        c.client_phase(),
        Some(ClientPhase::Closed(CloseReason::ConnectFailed))
    );
    assert!(s.stats().dropped.bad_proof > 0);
}

#[test]
fn silent_sessions_close_and_keepalives_hold_live_ones() {
    let mut s = server(Mode::Peer);
    let mut c = client(Mode::Peer, 2);
    let at = addr("10.0.1.1:5000");
    connect(&mut s, &mut c, at, Duration::ZERO);
    let mut now = Duration::ZERO;
    while now < Duration::from_secs(30) {
        now += Duration::from_millis(250);
        for e in [&mut s, &mut c] {
            if e.poll_timeout().is_some_and(|t| t <= now) {
                e.handle_timeout(now);
            }
        }
        while let Some((_, b)) = c.poll_transmit() {
            s.handle_datagram(now, at, &b);
        }
        while let Some((_, b)) = s.poll_transmit() {
            c.handle_datagram(now, server_addr(), &b);
        }
    }
    assert!(
        s.is_connected(at),
        "keep-alives held the session through 30 s of silence from the core"
    );
    now += Duration::from_secs(11);
    s.handle_timeout(now);
    assert!(!s.is_connected(at), "a peer gone silent is closed");
    assert!(matches!(
        s.poll_event(),
        Some(ConnectionEvent::Connected { .. })
    ));
    assert_eq!(
        s.poll_event(),
        Some(ConnectionEvent::Closed {
            peer: at,
            reason: CloseReason::TimedOut
        })
    );
}

/// A server that runs for long forgets used cookies and tokens once they can no longer be replayed (a cookie at
/// its lifetime, a token at its own expiry): what it holds follows the peers of the last minutes, not all it ever
/// saw (it held every token until the end of time, and every cookie until 4,096 piled up).
#[test]
fn used_cookies_and_tokens_are_forgotten_at_their_expiry() {
    for mode in MODES {
        let mut s = server(mode);
        for i in 0..40u8 {
            let now = Duration::from_secs(5 * u64::from(i));
            s.handle_timeout(now);
            while s.poll_transmit().is_some() {}
            let at = SocketAddr::from(([10, 0, 1, i + 1], 5000));
            let mut c = client_at(mode, i, now);
            connect(&mut s, &mut c, at, now);
        }
        // Past every token's expiry (300 s) and every session's silence timeout, one more client comes.
        let now = Duration::from_secs(400);
        s.handle_timeout(now);
        while s.poll_transmit().is_some() {}
        let auth = match mode {
            Mode::Peer => ClientAuth::Peer {
                join_code: Some("ABCD-2345".into()),
            },
            Mode::Tokens => {
                let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(99);
                let request = TokenRequest {
                    client_id: 99,
                    user_data: [0; USER_DATA_BYTES],
                    server_addrs: vec![server_addr()],
                    valid_for: Duration::from_secs(300),
                };
                let issued = TokenIssuer::new(TOKEN_KEY)
                    .issue(&mut rng, UNIX_AT_EPOCH + 400, &request)
                    .unwrap();
                ClientAuth::Token(Box::new(issued))
            }
        };
        let mut late = Endpoint::client(ClientConfig::new(server_addr(), auth), now, [99; 32]);
        connect(&mut s, &mut late, addr("10.0.2.1:5000"), now);
        assert_eq!(s.sessions(), 1, "{mode:?}");
        assert!(
            s.held_entries() <= 3,
            "{mode:?}: {} entries held for 1 session",
            s.held_entries()
        );
    }
}
