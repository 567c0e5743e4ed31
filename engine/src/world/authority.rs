//! Authority and ownership of one object, and the rule that decides whether a received update wins.
//!
//! Authority says which player simulates an object (0 is the default authority, the host); ownership says a
//! player holds it in a hand. Both travel as wrapping 16-bit sequences: a grab bumps the ownership sequence and
//! resets the authority sequence; a touch or a return to default bumps the authority sequence. The host is the
//! arbiter: on a tie of both sequences, its view decides.

use physync_codec::seq_newer;

/// A player's index in a session; 0 is the host, and authority index 0 means "default authority (the host)".
pub type PlayerIndex = u8;

/// The default authority: the host.
pub const DEFAULT_AUTHORITY: PlayerIndex = 0;

/// Frames an object must stay at rest, with confirmed authority, before authority returns to default (1 s).
pub const RETURN_TO_DEFAULT_FRAMES: u32 = 60;

/// What an update claims about an object's authority, and what the receiver believes: the fields both the
/// wire state and the local bookkeeping carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AuthorityView {
    /// Player with authority (0 = default).
    pub authority: PlayerIndex,
    /// Authority sequence.
    pub authority_seq: u16,
    /// Ownership sequence.
    pub ownership_seq: u16,
}

/// Which way an update travels; the tie-break differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// The host (or a state relayed by it) to a guest.
    HostToGuest {
        /// The receiving guest's player index.
        guest: PlayerIndex,
    },
    /// A guest to the host.
    GuestToHost {
        /// The sending guest's player index.
        sender: PlayerIndex,
    },
}

/// The outcome of [`judge_update`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Apply the update's state and its authority fields.
    Accept,
    /// Drop the update.
    Reject,
    /// Drop the update's state, but the host has echoed the guest's own authority: take it, confirmed.
    Confirm,
}

/// Decides whether an update wins over the receiver's view, per the sample's rules: newer ownership sequence
/// wins; else newer authority sequence wins; on a tie of both the host's view decides, per the table in
/// `tie`. A guest may only claim its own authority or return an object to default; anything else is rejected.
pub fn judge_update(direction: Direction, local: AuthorityView, update: AuthorityView) -> Verdict {
    if let Direction::GuestToHost { sender } = direction
        && update.authority != sender
        && update.authority != DEFAULT_AUTHORITY
    {
        return Verdict::Reject;
    }
    if seq_newer(update.ownership_seq, local.ownership_seq) {
        return Verdict::Accept;
    }
    if update.ownership_seq != local.ownership_seq {
        return Verdict::Reject;
    }
    if seq_newer(update.authority_seq, local.authority_seq) {
        return Verdict::Accept;
    }
    if update.authority_seq != local.authority_seq {
        return Verdict::Reject;
    }
    tie(direction, local.authority, update.authority)
}

/// The tie table of both sequences ("first to interact, as the host saw it, wins"), row by row as the sample's
/// `AuthoritySystem.cs` decides it.
fn tie(direction: Direction, local: PlayerIndex, update: PlayerIndex) -> Verdict {
    match direction {
        // The host echoes the guest's own authority: nothing to apply, the claim is confirmed.
        Direction::HostToGuest { guest } if update == guest => Verdict::Confirm,
        // The host says another player has it: that player won, even over this guest's own claim.
        Direction::HostToGuest { .. } if update != DEFAULT_AUTHORITY => Verdict::Accept,
        // The host says default: taken unless this guest or another player already has the object.
        Direction::HostToGuest { .. } if local == DEFAULT_AUTHORITY => Verdict::Accept,
        Direction::HostToGuest { .. } => Verdict::Reject,
        Direction::GuestToHost { sender } if update == sender && local == sender => Verdict::Accept,
        Direction::GuestToHost { .. } => Verdict::Reject,
    }
}

/// One object's authority bookkeeping on one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Authority {
    /// Player with authority, sequences.
    pub view: AuthorityView,
    /// The host has echoed this authority (always true for default authority and on the host).
    pub confirmed: bool,
    /// A return to default was made locally and the host has not acknowledged it yet.
    pub pending_commit: bool,
    /// Consecutive frames the object has been at rest under its current authority.
    pub rest_frames: u32,
}

impl Authority {
    /// Default authority, sequences at zero, confirmed.
    pub fn new() -> Self {
        Self {
            confirmed: true,
            ..Self::default()
        }
    }

    /// A grab by `player`: ownership sequence +1, authority sequence reset, authority to the grabber.
    /// Unconfirmed unless the grabber is the host.
    pub fn grab(&mut self, player: PlayerIndex) {
        self.view.ownership_seq = self.view.ownership_seq.wrapping_add(1);
        self.view.authority_seq = 0;
        self.view.authority = player;
        self.confirmed = player == DEFAULT_AUTHORITY;
        self.pending_commit = false;
        self.rest_frames = 0;
    }

    /// A touch by an object under `player`'s authority: authority to that player, authority sequence +1.
    pub fn touch(&mut self, player: PlayerIndex) {
        self.view.authority = player;
        self.view.authority_seq = self.view.authority_seq.wrapping_add(1);
        self.confirmed = player == DEFAULT_AUTHORITY;
        self.pending_commit = false;
        self.rest_frames = 0;
    }

    /// Counts one frame of rest (or resets the count) and, once the authority is confirmed and the object has
    /// rested for [`RETURN_TO_DEFAULT_FRAMES`], returns it to default: sequence +1, pending commit until the
    /// host acknowledges. Returns true on the frame authority returned. Only the peer holding a non-default
    /// authority (`local_player`) does this; nothing happens on other peers.
    pub fn tick_rest(&mut self, local_player: PlayerIndex, at_rest: bool, held: bool) -> bool {
        if !at_rest || held {
            self.rest_frames = 0;
            return false;
        }
        self.rest_frames = self.rest_frames.saturating_add(1);
        let ours = self.view.authority == local_player && local_player != DEFAULT_AUTHORITY;
        if ours && self.confirmed && self.rest_frames >= RETURN_TO_DEFAULT_FRAMES {
            self.view.authority = DEFAULT_AUTHORITY;
            self.view.authority_seq = self.view.authority_seq.wrapping_add(1);
            self.confirmed = true;
            self.pending_commit = true;
            self.rest_frames = 0;
            return true;
        }
        false
    }

    /// Applies the verdict on a received update to this bookkeeping (the caller applies the physical state
    /// on [`Verdict::Accept`]). An accepted update is the arbiter's word (or, on the host, becomes it): the
    /// authority it names is confirmed, and a pending return to default is settled by it.
    pub fn apply_verdict(&mut self, verdict: Verdict, update: AuthorityView) {
        match verdict {
            Verdict::Accept => {
                if update != self.view {
                    self.rest_frames = 0;
                }
                self.view = update;
                self.confirmed = true;
                self.pending_commit = false;
            }
            Verdict::Confirm => {
                self.view.authority = update.authority;
                self.confirmed = true;
            }
            Verdict::Reject => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn v(authority: PlayerIndex, authority_seq: u16, ownership_seq: u16) -> AuthorityView {
        AuthorityView {
            authority,
            authority_seq,
            ownership_seq,
        }
    }

    const H2G: Direction = Direction::HostToGuest { guest: 2 };
    const G2H: Direction = Direction::GuestToHost { sender: 2 };

    #[test]
    fn judge_update_table() {
        use Verdict::*;
        // (case, direction, local view, update, expected)
        let table: &[(&str, Direction, AuthorityView, AuthorityView, Verdict)] = &[
            // Ownership decides first.
            ("h2g newer ownership", H2G, v(2, 5, 3), v(1, 0, 4), Accept),
            ("h2g older ownership", H2G, v(0, 0, 4), v(1, 9, 3), Reject),
            ("g2h newer ownership", G2H, v(1, 7, 3), v(2, 0, 4), Accept),
            ("g2h older ownership", G2H, v(0, 0, 4), v(2, 9, 3), Reject),
            // Then authority.
            ("h2g newer authority", H2G, v(2, 5, 3), v(0, 6, 3), Accept),
            ("h2g older authority", H2G, v(2, 5, 3), v(0, 4, 3), Reject),
            ("g2h newer authority", G2H, v(0, 5, 3), v(2, 6, 3), Accept),
            ("g2h older authority", G2H, v(0, 5, 3), v(2, 4, 3), Reject),
            ("g2h return to default", G2H, v(2, 5, 3), v(0, 6, 3), Accept),
            // Ties of both sequences: the table of the design notes, row by row (guest G = 2, other P = 1).
            // host -> G | update G | anything: ignore the state, G's authority confirmed.
            ("h2g tie, G, view G", H2G, v(2, 5, 3), v(2, 5, 3), Confirm),
            (
                "h2g tie, G, view default",
                H2G,
                v(0, 5, 3),
                v(2, 5, 3),
                Confirm,
            ),
            ("h2g tie, G, view P", H2G, v(1, 5, 3), v(2, 5, 3), Confirm),
            // host -> G | update P | anything, G included (G lost the race): accept.
            ("h2g tie, P, view G", H2G, v(2, 5, 3), v(1, 5, 3), Accept),
            (
                "h2g tie, P, view default",
                H2G,
                v(0, 5, 3),
                v(1, 5, 3),
                Accept,
            ),
            ("h2g tie, P, view P", H2G, v(1, 5, 3), v(1, 5, 3), Accept),
            (
                "h2g tie, P, view other",
                H2G,
                v(3, 5, 3),
                v(1, 5, 3),
                Accept,
            ),
            // host -> G | update default | view G: ignore.
            (
                "h2g tie, default, view G",
                H2G,
                v(2, 5, 3),
                v(0, 5, 3),
                Reject,
            ),
            // host -> G | update default | view default: accept.
            (
                "h2g tie, default, view default",
                H2G,
                v(0, 5, 3),
                v(0, 5, 3),
                Accept,
            ),
            // host -> G | update default | view P: reject.
            (
                "h2g tie, default, view P",
                H2G,
                v(1, 5, 3),
                v(0, 5, 3),
                Reject,
            ),
            // guest S -> host | update not S | anything: reject.
            (
                "g2h tie, default, view S",
                G2H,
                v(2, 5, 3),
                v(0, 5, 3),
                Reject,
            ),
            (
                "g2h tie, default, view default",
                G2H,
                v(0, 5, 3),
                v(0, 5, 3),
                Reject,
            ),
            ("g2h tie, P, view P", G2H, v(1, 5, 3), v(1, 5, 3), Reject),
            // guest S -> host | update S | view S: accept.
            ("g2h tie, S, view S", G2H, v(2, 5, 3), v(2, 5, 3), Accept),
            // guest S -> host | update S | view not S: reject.
            (
                "g2h tie, S, view default",
                G2H,
                v(0, 5, 3),
                v(2, 5, 3),
                Reject,
            ),
            ("g2h tie, S, view P", G2H, v(1, 5, 3), v(2, 5, 3), Reject),
            // A guest may not claim another player's authority, however new.
            (
                "g2h claims third player",
                G2H,
                v(0, 5, 3),
                v(3, 9, 9),
                Reject,
            ),
            // Wraparound: 0 is newer than 65535, 65535 is older than 0.
            (
                "h2g ownership wraps",
                H2G,
                v(2, 5, 65535),
                v(0, 0, 0),
                Accept,
            ),
            (
                "h2g ownership wrapped older",
                H2G,
                v(2, 5, 0),
                v(0, 9, 65535),
                Reject,
            ),
            (
                "h2g authority wraps",
                H2G,
                v(2, 65535, 7),
                v(0, 0, 7),
                Accept,
            ),
            (
                "h2g authority wrapped older",
                H2G,
                v(2, 0, 7),
                v(0, 65535, 7),
                Reject,
            ),
            (
                "g2h authority wraps",
                G2H,
                v(0, 65534, 7),
                v(2, 1, 7),
                Accept,
            ),
            (
                "g2h ownership wrapped older",
                G2H,
                v(0, 3, 2),
                v(2, 3, 65000),
                Reject,
            ),
            (
                "h2g half-range ahead is newer",
                H2G,
                v(2, 0, 0),
                v(0, 32768, 0),
                Accept,
            ),
            (
                "h2g beyond half-range is older",
                H2G,
                v(2, 0, 0),
                v(0, 32769, 0),
                Reject,
            ),
        ];
        for &(name, direction, local, update, expected) in table {
            assert_eq!(judge_update(direction, local, update), expected, "{name}");
        }
    }

    #[test]
    fn grab_bumps_ownership_and_resets_authority_sequence() {
        let mut a = Authority::new();
        a.view = v(0, 41, 65535);
        a.grab(3);
        assert_eq!(a.view, v(3, 0, 0));
        assert!(!a.confirmed);
        a.grab(0);
        assert_eq!(a.view, v(0, 0, 1));
        assert!(a.confirmed);
    }

    #[test]
    fn return_to_default_waits_for_confirmation_and_sixty_frames() {
        let mut a = Authority::new();
        a.touch(2);
        assert_eq!(a.view, v(2, 1, 0));
        for _ in 0..200 {
            assert!(
                !a.tick_rest(2, true, false),
                "unconfirmed authority never returns"
            );
        }
        a.apply_verdict(judge_update(H2G, a.view, a.view), a.view);
        assert!(a.confirmed);
        a.rest_frames = 0;
        for frame in 1..=RETURN_TO_DEFAULT_FRAMES {
            let returned = a.tick_rest(2, true, false);
            assert_eq!(returned, frame == RETURN_TO_DEFAULT_FRAMES, "frame {frame}");
        }
        assert_eq!(a.view, v(0, 2, 0));
        assert!(a.pending_commit);
        // The host's stale view (authority 2, seq 1) is older: the pending return stands.
        let stale = v(2, 1, 0);
        a.apply_verdict(judge_update(H2G, a.view, stale), stale);
        assert!(a.pending_commit);
        // The host's echo of the return settles it.
        a.apply_verdict(judge_update(H2G, a.view, a.view), a.view);
        assert!(!a.pending_commit);
    }

    #[test]
    fn movement_or_holding_resets_the_rest_count() {
        let mut a = Authority::new();
        a.touch(1);
        a.confirmed = true;
        for _ in 0..59 {
            a.tick_rest(1, true, false);
        }
        a.tick_rest(1, false, false);
        for _ in 0..59 {
            assert!(!a.tick_rest(1, true, false));
        }
        assert!(!a.tick_rest(1, true, true));
        assert_eq!(a.view.authority, 1);
    }

    #[test]
    fn the_host_never_returns_authority_it_does_not_hold() {
        let mut a = Authority::new();
        a.touch(2);
        a.confirmed = true;
        for _ in 0..300 {
            assert!(!a.tick_rest(0, true, false));
        }
        assert_eq!(a.view.authority, 2);
    }
}
