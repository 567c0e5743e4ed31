//! What a link counts: traffic, decode errors, and the round-trip time and loss it infers from acks.

use std::time::Duration;

use physync_codec::seq_newer;

/// Packets whose send time and fate are remembered (about four seconds at 60 Hz).
const SENT_WINDOW: usize = 256;
/// A packet not acked once the other side has acked one this many sequences newer counts as lost: acks repeat
/// for 32 packets.
const ACK_WINDOW: u16 = 33;
/// Weight of each new sample in the smoothed round-trip time.
const SMOOTHING: f64 = 0.1;
/// Resolved packets the loss figure counts over (about 17 s at 60 Hz): a smoothed average over the last ten or so
/// packets jumped to 10% at every single loss and read 0.02% to 10.8% on three links that each lost 3%; a count over
/// a thousand packets reads within about a percentage point of what the link lost.
pub const LOSS_WINDOW: usize = 1024;

/// Counters and estimates of one link.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkStats {
    /// Datagram bytes built for sending.
    pub bytes_sent: u64,
    /// Datagram bytes handed to [`super::StateLink::receive`], good or bad.
    pub bytes_received: u64,
    /// Datagrams built.
    pub packets_sent: u64,
    /// Datagrams that decoded.
    pub packets_received: u64,
    /// Datagrams that failed to decode.
    pub decode_errors: u64,
    /// Sent datagrams the other side acknowledged.
    pub packets_acked: u64,
    /// Sent datagrams that fell out of the ack window unacknowledged.
    pub packets_lost: u64,
    /// Smoothed round-trip time from send to ack (includes the other side's send interval), once known.
    pub rtt: Option<Duration>,
    /// Fraction of the last `LOSS_WINDOW` (1,024) resolved datagrams (acked, or out of the ack window) that were lost;
    /// `packets_lost / (packets_lost + packets_acked)` is the same over the whole session.
    pub loss: f64,
    /// Objects whose baselines (sending) or received states (receiving) were forgotten after
    /// [`super::STALE_PACKETS`] without traffic: idle or held that long, their next state goes absolute.
    pub stale_forgotten: u64,
}

#[derive(Debug, Clone, Copy)]
struct Sent {
    sequence: u16,
    at: Duration,
    pending: bool,
}

/// The fates of the last [`LOSS_WINDOW`] resolved packets, one bit each (set: lost).
#[derive(Debug, Clone)]
struct LossWindow {
    bits: [u64; LOSS_WINDOW / 64],
    next: usize,
    filled: usize,
    lost: usize,
}

impl LossWindow {
    fn note(&mut self, lost: bool) -> f64 {
        let (word, bit) = (self.next / 64, 1u64 << (self.next % 64));
        if self.filled == LOSS_WINDOW {
            if self.bits[word] & bit != 0 {
                self.lost -= 1;
            }
        } else {
            self.filled += 1;
        }
        if lost {
            self.bits[word] |= bit;
            self.lost += 1;
        } else {
            self.bits[word] &= !bit;
        }
        self.next = (self.next + 1) % LOSS_WINDOW;
        self.lost as f64 / self.filled as f64
    }
}

/// The sender's record of its own packets, resolved by acks into the round-trip and loss figures.
#[derive(Debug, Clone)]
pub(crate) struct SendLog {
    sent: Vec<Option<Sent>>,
    newest_ack: Option<u16>,
    window: LossWindow,
}

impl SendLog {
    pub(crate) fn new() -> Self {
        Self {
            sent: vec![None; SENT_WINDOW],
            newest_ack: None,
            window: LossWindow {
                bits: [0; LOSS_WINDOW / 64],
                next: 0,
                filled: 0,
                lost: 0,
            },
        }
    }

    pub(crate) fn record(&mut self, sequence: u16, at: Duration, stats: &mut LinkStats) {
        let slot = &mut self.sent[usize::from(sequence) % SENT_WINDOW];
        if slot.is_some_and(|s| s.pending) {
            // Overwritten before it could be resolved: it was never acked.
            note_loss(&mut self.window, stats, true);
        }
        *slot = Some(Sent {
            sequence,
            at,
            pending: true,
        });
    }

    /// Resolves the newly acked sequences and, if `ack` moved forward, the packets that fell out of the window.
    pub(crate) fn acked(&mut self, now: Duration, ack: u16, newly: &[u16], stats: &mut LinkStats) {
        for &sequence in newly {
            let Some(s) = self.sent[usize::from(sequence) % SENT_WINDOW].as_mut() else {
                continue;
            };
            if s.sequence != sequence || !s.pending {
                continue;
            }
            s.pending = false;
            let sample = now.saturating_sub(s.at);
            stats.rtt = Some(match stats.rtt {
                None => sample,
                Some(rtt) => rtt.mul_f64(1.0 - SMOOTHING) + sample.mul_f64(SMOOTHING),
            });
            note_loss(&mut self.window, stats, false);
        }
        if self.newest_ack.is_some_and(|n| !seq_newer(ack, n)) {
            return;
        }
        self.newest_ack = Some(ack);
        let horizon = ack.wrapping_sub(ACK_WINDOW);
        for s in self.sent.iter_mut().flatten() {
            if s.pending && !seq_newer(s.sequence, horizon) && seq_newer(ack, s.sequence) {
                s.pending = false;
                note_loss(&mut self.window, stats, true);
            }
        }
    }
}

fn note_loss(window: &mut LossWindow, stats: &mut LinkStats, lost: bool) {
    if lost {
        stats.packets_lost += 1;
    } else {
        stats.packets_acked += 1;
    }
    stats.loss = window.note(lost);
}
