//! What a link counts: traffic, decode errors, and the round-trip time and loss it infers from acks.

use std::time::Duration;

use physync_codec::seq_newer;

/// Packets whose send time and fate are remembered (about four seconds at 60 Hz).
const SENT_WINDOW: usize = 256;
/// A packet not acked once the other side has acked one this many sequences newer counts as lost: acks repeat
/// for 32 packets.
const ACK_WINDOW: u16 = 33;
/// Weight of each new sample in the smoothed round-trip time and loss.
const SMOOTHING: f64 = 0.1;

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
    /// Smoothed fraction of sent datagrams lost.
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

/// The sender's record of its own packets, resolved by acks into the round-trip and loss figures.
#[derive(Debug, Clone)]
pub(crate) struct SendLog {
    sent: Vec<Option<Sent>>,
    newest_ack: Option<u16>,
}

impl SendLog {
    pub(crate) fn new() -> Self {
        Self {
            sent: vec![None; SENT_WINDOW],
            newest_ack: None,
        }
    }

    pub(crate) fn record(&mut self, sequence: u16, at: Duration, stats: &mut LinkStats) {
        let slot = &mut self.sent[usize::from(sequence) % SENT_WINDOW];
        if slot.is_some_and(|s| s.pending) {
            // Overwritten before it could be resolved: it was never acked.
            note_loss(stats, true);
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
            note_loss(stats, false);
        }
        if self.newest_ack.is_some_and(|n| !seq_newer(ack, n)) {
            return;
        }
        self.newest_ack = Some(ack);
        let horizon = ack.wrapping_sub(ACK_WINDOW);
        for s in self.sent.iter_mut().flatten() {
            if s.pending && !seq_newer(s.sequence, horizon) && seq_newer(ack, s.sequence) {
                s.pending = false;
                note_loss(stats, true);
            }
        }
    }
}

fn note_loss(stats: &mut LinkStats, lost: bool) {
    if lost {
        stats.packets_lost += 1;
    } else {
        stats.packets_acked += 1;
    }
    let sample = if lost { 1.0 } else { 0.0 };
    stats.loss = stats.loss * (1.0 - SMOOTHING) + sample * SMOOTHING;
}
