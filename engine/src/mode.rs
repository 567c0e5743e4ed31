//! The `--mode` flag both binaries share: peer-hosted co-op or the dedicated-server shooter.

use std::fmt;
use std::str::FromStr;

/// Which of physync's two modes a binary runs. Each mode has its own flags, so a binary reads `--mode` first
/// (with [`Mode::from_args`]) and then parses the flags of that mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Peer-hosted co-op: authority and ownership, the host arbitrates.
    #[default]
    Peer,
    /// The dedicated-server shooter: authoritative server, predicting clients.
    Dedicated,
}

impl Mode {
    /// The mode named by `--mode X` or `--mode=X` in `args` (the program name first, as from
    /// `std::env::args`); [`Mode::Peer`] when absent or unrecognised, so clap reports a bad value itself.
    pub fn from_args<I: IntoIterator<Item = String>>(args: I) -> Mode {
        let mut args = args.into_iter().skip(1);
        while let Some(arg) = args.next() {
            let value = match arg.strip_prefix("--mode") {
                Some("") => args.next(),
                Some(rest) => rest.strip_prefix('=').map(str::to_owned),
                None => None,
            };
            if let Some(value) = value {
                return value.parse().unwrap_or_default();
            }
        }
        Mode::Peer
    }
}

/// A `--mode` value that is neither `peer` nor `dedicated`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?}: expected peer or dedicated")]
pub struct UnknownMode(String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "peer" => Ok(Mode::Peer),
            "dedicated" => Ok(Mode::Dedicated),
            other => Err(UnknownMode(other.to_owned())),
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Mode::Peer => "peer",
            Mode::Dedicated => "dedicated",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Mode;

    fn mode(line: &[&str]) -> Mode {
        Mode::from_args(
            std::iter::once("bin")
                .chain(line.iter().copied())
                .map(String::from),
        )
    }

    #[test]
    fn reads_both_spellings_and_defaults_to_peer() {
        assert_eq!(mode(&[]), Mode::Peer);
        assert_eq!(mode(&["--listen", "1.2.3.4:5"]), Mode::Peer);
        assert_eq!(mode(&["--mode", "dedicated", "--json"]), Mode::Dedicated);
        assert_eq!(mode(&["--json", "--mode=dedicated"]), Mode::Dedicated);
        assert_eq!(mode(&["--mode", "peer"]), Mode::Peer);
        assert_eq!(mode(&["--mode"]), Mode::Peer);
        assert!("ranked".parse::<Mode>().is_err());
    }
}
