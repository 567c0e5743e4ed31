//! The server's per-client input buffer (seeds 000 and 004). Every input packet repeats the client's last five
//! inputs, so one lost packet loses nothing; the buffer keeps one command per tick (duplicates dropped), hands
//! the simulation exactly one command per tick (repeating the last one's movement and view when none arrived, but
//! never its buttons: a lost input must not fire, reload or jump for the player), reports how many
//! ticks it holds ahead (sent back with every snapshot so the client can steer it), and drops what an honest
//! client could not have sent: ticks already simulated, ticks too far ahead, oversized batches. Axes and pitch
//! outside the rules are clamped and counted.

use super::Tick;
use super::input::{InputCommand, ViewTime};
use super::ring::TickRing;

/// Limits of an input buffer.
#[derive(Debug, Clone, PartialEq)]
pub struct InputBufferConfig {
    /// Furthest a command may lie ahead of the next tick to simulate (32 ≈ 1 s at 30 Hz).
    pub max_ahead: Tick,
    /// Most commands accepted from one packet (the newest plus five repeats).
    pub max_batch: usize,
}

impl Default for InputBufferConfig {
    fn default() -> Self {
        Self {
            max_ahead: 32,
            max_batch: 6,
        }
    }
}

/// Counters of one client's input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InputBufferStats {
    /// Commands stored.
    pub accepted: u64,
    /// Commands for a tick already stored (the redundancy doing its job).
    pub duplicates: u64,
    /// Commands for ticks already simulated.
    pub late: u64,
    /// Commands too far in the future.
    pub too_far_ahead: u64,
    /// Commands beyond `max_batch` in one packet.
    pub over_batch: u64,
    /// Commands whose input broke the rules and was clamped.
    pub clamped: u64,
    /// Ticks simulated with a repeated command because none arrived in time.
    pub repeated: u64,
}

/// How one packet's commands were taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReceiveReport {
    /// New commands stored.
    pub accepted: u32,
    /// Commands dropped as duplicates, late, too far ahead or over the batch limit.
    pub dropped: u32,
}

/// The command the simulation gets for a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakenInput {
    /// The command (for a repeat: the last one's movement and view without its buttons, re-labelled with this
    /// tick).
    pub command: InputCommand,
    /// True when no command arrived for this tick and the last one was repeated.
    pub repeated: bool,
}

/// One client's input buffer on the server.
#[derive(Debug, Clone, PartialEq)]
pub struct InputBuffer {
    config: InputBufferConfig,
    slots: TickRing<InputCommand>,
    next_tick: Tick,
    last: Option<InputCommand>,
    stats: InputBufferStats,
}

impl InputBuffer {
    /// An empty buffer whose first simulated tick will be `next_tick`.
    pub fn new(config: InputBufferConfig, next_tick: Tick) -> Self {
        Self {
            slots: TickRing::new(config.max_ahead as usize + 1),
            config,
            next_tick,
            last: None,
            stats: InputBufferStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> InputBufferStats {
        self.stats
    }

    /// The next tick the buffer will hand out.
    pub fn next_tick(&self) -> Tick {
        self.next_tick
    }

    /// Commands held for ticks not yet simulated: the fill the server reports to the client.
    pub fn fill(&self) -> u32 {
        self.slots
            .iter()
            .filter(|(tick, _)| *tick >= self.next_tick)
            .count() as u32
    }

    /// Takes the commands of one packet (newest and repeats, any order).
    pub fn receive(&mut self, commands: &[InputCommand]) -> ReceiveReport {
        let mut report = ReceiveReport::default();
        let over = commands.len().saturating_sub(self.config.max_batch);
        self.stats.over_batch += over as u64;
        report.dropped += over as u32;
        for command in commands.iter().take(self.config.max_batch) {
            if command.tick < self.next_tick {
                self.stats.late += 1;
            } else if command.tick - self.next_tick > self.config.max_ahead {
                self.stats.too_far_ahead += 1;
            } else if self.slots.contains(command.tick) {
                self.stats.duplicates += 1;
            } else {
                let (input, clamped) = command.input.sanitized();
                self.stats.clamped += u64::from(clamped);
                let view = if command.view.tick > command.tick {
                    ViewTime::at(command.tick)
                } else {
                    command.view
                };
                self.slots.insert(
                    command.tick,
                    InputCommand {
                        tick: command.tick,
                        view,
                        input,
                    },
                );
                self.stats.accepted += 1;
                report.accepted += 1;
                continue;
            }
            report.dropped += 1;
        }
        report
    }

    /// The command for `tick` (normally [`Self::next_tick`]; a later tick discards the ones skipped). A missing
    /// command repeats the movement and view of the last one handed out, its view time advanced by the same number
    /// of ticks, with no button held: the server never fires a shot (or reloads, or jumps) the player did not
    /// send. `None` only before any command ever arrived.
    pub fn take(&mut self, tick: Tick) -> Option<TakenInput> {
        if tick < self.next_tick {
            return None;
        }
        for skipped in self.next_tick..tick {
            self.slots.remove(skipped);
        }
        self.next_tick = tick + 1;
        if let Some(command) = self.slots.remove(tick) {
            self.last = Some(command);
            return Some(TakenInput {
                command,
                repeated: false,
            });
        }
        let last = self.last?;
        self.stats.repeated += 1;
        let age = tick - last.tick;
        let view_tick = last.view.tick.saturating_add(age).min(tick);
        let command = InputCommand {
            tick,
            view: ViewTime {
                tick: view_tick,
                fraction: last.view.fraction,
            },
            input: last.input.repeated(),
        };
        self.last = Some(command);
        Some(TakenInput {
            command,
            repeated: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shooter::input::{PlayerInput, buttons};

    fn command(tick: Tick) -> InputCommand {
        InputCommand {
            tick,
            view: ViewTime::at(tick.saturating_sub(6)),
            input: PlayerInput {
                move_z: (tick % 7) as i8,
                yaw: tick as u16 * 100,
                ..PlayerInput::default()
            },
        }
    }

    fn packet(newest: Tick) -> Vec<InputCommand> {
        (newest.saturating_sub(5)..=newest)
            .rev()
            .map(command)
            .collect()
    }

    #[test]
    fn redundant_packets_are_deduplicated_and_fill_is_reported() {
        let mut buffer = InputBuffer::new(InputBufferConfig::default(), 10);
        assert_eq!(buffer.take(10), None, "nothing received yet");
        for newest in 11..=15 {
            buffer.receive(&packet(newest));
        }
        // Ticks 6..=15 were sent; 6..=10 are already past.
        assert_eq!(buffer.fill(), 5);
        assert_eq!(buffer.stats().accepted, 5);
        assert_eq!(buffer.stats().late, 5 + 4 + 3 + 2 + 1);
        assert_eq!(buffer.stats().duplicates, 1 + 2 + 3 + 4);
        for tick in 11..=15 {
            let taken = buffer.take(tick).unwrap();
            assert_eq!(taken.command, command(tick));
            assert!(!taken.repeated);
        }
        assert_eq!(buffer.fill(), 0);
    }

    #[test]
    fn a_lost_burst_is_recovered_by_redundancy_and_a_gap_repeats_the_last_input() {
        let mut buffer = InputBuffer::new(InputBufferConfig::default(), 1);
        buffer.receive(&packet(1));
        // Packets for ticks 2, 3 and 4 are lost; the one for 5 carries 0..=5.
        buffer.receive(&packet(5));
        for tick in 1..=5 {
            assert_eq!(buffer.take(tick).unwrap().command, command(tick));
        }
        // Nothing arrives for 6 and 7: the input of 5 is repeated, view time advancing with it.
        let six = buffer.take(6).unwrap();
        assert!(six.repeated);
        assert_eq!(six.command.input, command(5).input);
        assert_eq!(six.command.tick, 6);
        assert_eq!(six.command.view, ViewTime::at(1));
        assert_eq!(buffer.take(7).unwrap().command.view, ViewTime::at(2));
        assert_eq!(buffer.stats().repeated, 2);
        // Late redundancy for 6 and 7 is dropped; 8 is used.
        buffer.receive(&packet(8));
        assert_eq!(buffer.stats().late, 2 + 5);
        assert!(!buffer.take(8).unwrap().repeated);
    }

    #[test]
    fn a_missing_input_repeats_movement_but_never_fires() {
        let mut buffer = InputBuffer::new(InputBufferConfig::default(), 1);
        let mut firing = command(1);
        firing.input.buttons = buttons::FIRE | buttons::JUMP | buttons::RELOAD;
        buffer.receive(&[firing]);
        assert_eq!(buffer.take(1).unwrap().command.input, firing.input);
        for tick in 2..5 {
            let repeat = buffer.take(tick).unwrap();
            assert!(repeat.repeated);
            assert_eq!(repeat.command.input.buttons, 0, "tick {tick}");
            assert_eq!(repeat.command.input.move_z, firing.input.move_z);
            assert_eq!(repeat.command.input.yaw, firing.input.yaw);
        }
    }

    #[test]
    fn hostile_commands_are_rejected_or_clamped() {
        let config = InputBufferConfig::default();
        let mut buffer = InputBuffer::new(config.clone(), 100);
        let far = command(100 + config.max_ahead + 1);
        let edge = command(100 + config.max_ahead);
        let report = buffer.receive(&[far, edge]);
        assert_eq!(
            report,
            ReceiveReport {
                accepted: 1,
                dropped: 1
            }
        );
        assert_eq!(buffer.stats().too_far_ahead, 1);

        let mut cheat = command(101);
        cheat.input.move_x = 100;
        cheat.input.buttons = 0xFF;
        cheat.view = ViewTime::at(5_000);
        buffer.receive(&[cheat]);
        assert_eq!(buffer.stats().clamped, 1);
        buffer.take(100);
        let taken = buffer.take(101).unwrap().command;
        assert_eq!(taken.input.move_x, crate::shooter::input::MOVE_AXIS_MAX);
        assert_eq!(taken.input.buttons, buttons::ALL);
        assert_eq!(
            taken.view,
            ViewTime::at(101),
            "a view time in the future is clamped"
        );

        let flood: Vec<InputCommand> = (102..122).map(command).collect();
        let report = buffer.receive(&flood);
        assert_eq!(report.accepted, config.max_batch as u32);
        assert_eq!(buffer.stats().over_batch, 20 - config.max_batch as u64);
    }
}
