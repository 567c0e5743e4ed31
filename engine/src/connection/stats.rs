//! What a connection endpoint let through and what it dropped, by kind, so a flood or a forgery shows up as a
//! figure instead of a silent loss.

/// Datagrams an endpoint refused, by why.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct DropCounts {
    /// Too short, too long or of an unknown kind.
    pub malformed: u64,
    /// Another protocol or version.
    pub wrong_protocol: u64,
    /// Handshake packets over the per-source rate limit.
    pub rate_limited: u64,
    /// Connect tokens that did not decrypt under the server's key.
    pub bad_token: u64,
    /// Connect tokens past their absolute expiry.
    pub expired_token: u64,
    /// Connect tokens that do not name this server's address.
    pub wrong_server: u64,
    /// Connect tokens already in use from another address.
    pub token_reused: u64,
    /// Challenge cookies that did not open (forged, or from another address).
    pub bad_cookie: u64,
    /// Challenge cookies past their lifetime.
    pub expired_cookie: u64,
    /// Challenge responses already used once.
    pub replayed_response: u64,
    /// Challenge responses whose proof did not verify (a wrong join code, or a forgery).
    pub bad_proof: u64,
    /// Responses refused because every session slot is taken.
    pub full: u64,
    /// Data from an address with no session.
    pub unknown_sender: u64,
    /// Data that failed authentication (altered, forged or under another key).
    pub auth_failed: u64,
    /// Data whose sequence was already received or is too old.
    pub replayed: u64,
    /// Handshake packets of the wrong role or state (a challenge sent to a server, say).
    pub unexpected: u64,
}

impl DropCounts {
    /// Every drop, summed.
    pub fn total(&self) -> u64 {
        self.malformed
            + self.wrong_protocol
            + self.rate_limited
            + self.bad_token
            + self.expired_token
            + self.wrong_server
            + self.token_reused
            + self.bad_cookie
            + self.expired_cookie
            + self.replayed_response
            + self.bad_proof
            + self.full
            + self.unknown_sender
            + self.auth_failed
            + self.replayed
            + self.unexpected
    }
}

/// Traffic through one endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ConnectionStats {
    /// Connect requests answered with a challenge.
    pub challenges_sent: u64,
    /// Sessions set up.
    pub established: u64,
    /// Sessions ended (timed out or closed).
    pub closed: u64,
    /// Authenticated data datagrams handed on.
    pub data_in: u64,
    /// Data datagrams sealed and sent.
    pub data_out: u64,
    /// Outgoing datagrams to an address without a session, not sent.
    pub unsent: u64,
    /// What was refused.
    pub dropped: DropCounts,
}
