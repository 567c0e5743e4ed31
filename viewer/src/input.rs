//! Validation of what a person types on the start screen, with messages fit to show in the window.

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};

use thiserror::Error;

/// Why the start screen's input cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum InputError {
    /// The port field is empty.
    #[error("enter a port number (1–65535)")]
    PortMissing,
    /// The port field is not a number in range.
    #[error("'{0}' is not a port: use a number from 1 to 65535")]
    PortInvalid(String),
    /// Another program already uses the UDP port.
    #[error("UDP port {port} cannot be used: {reason}")]
    PortUnavailable {
        /// The port that was tried.
        port: u16,
        /// The operating system's reason.
        reason: String,
    },
    /// The address field is empty.
    #[error("enter the host's address, for example 127.0.0.1:40000")]
    AddressMissing,
    /// The address does not parse or resolve.
    #[error("'{0}' is not an address: use host:port, for example 127.0.0.1:40000")]
    AddressInvalid(String),
    /// The address names port 0, which cannot be connected to.
    #[error("'{0}' has port 0: give the port the host listens on")]
    AddressPortZero(String),
}

/// Parse a UDP port typed by a person (1–65535, surrounding spaces allowed).
pub fn parse_port(text: &str) -> Result<u16, InputError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(InputError::PortMissing);
    }
    match text.parse::<u16>() {
        Ok(0) | Err(_) => Err(InputError::PortInvalid(text.to_owned())),
        Ok(port) => Ok(port),
    }
}

/// Check that this machine can listen on the UDP port by binding it for a moment.
pub fn check_port_free(port: u16) -> Result<(), InputError> {
    UdpSocket::bind(("0.0.0.0", port))
        .map(drop)
        .map_err(|e| InputError::PortUnavailable {
            port,
            reason: e.to_string(),
        })
}

/// Parse the address of a host to join: `ip:port`, `[v6]:port`, or `name:port` resolved through the system.
pub fn parse_address(text: &str) -> Result<SocketAddr, InputError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(InputError::AddressMissing);
    }
    let addr = match text.parse::<SocketAddr>() {
        Ok(addr) => addr,
        Err(_) if text.contains(':') && !text.contains(char::is_whitespace) => text
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| InputError::AddressInvalid(text.to_owned()))?,
        Err(_) => return Err(InputError::AddressInvalid(text.to_owned())),
    };
    if addr.port() == 0 {
        return Err(InputError::AddressPortZero(text.to_owned()));
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_in_range_parse() {
        assert_eq!(parse_port(" 40000 "), Ok(40000));
        assert_eq!(parse_port("65535"), Ok(65535));
        assert_eq!(parse_port(""), Err(InputError::PortMissing));
        assert_eq!(parse_port("0"), Err(InputError::PortInvalid("0".into())));
        assert_eq!(
            parse_port("70000"),
            Err(InputError::PortInvalid("70000".into()))
        );
        assert_eq!(parse_port("-1"), Err(InputError::PortInvalid("-1".into())));
        assert_eq!(
            parse_port("abc"),
            Err(InputError::PortInvalid("abc".into()))
        );
    }

    #[test]
    fn a_port_in_use_is_reported() {
        let held = UdpSocket::bind(("0.0.0.0", 0)).unwrap();
        let port = held.local_addr().unwrap().port();
        assert!(
            matches!(check_port_free(port), Err(InputError::PortUnavailable { port: p, .. }) if p == port)
        );
        drop(held);
        assert_eq!(check_port_free(port), Ok(()));
    }

    #[test]
    fn addresses_parse_or_explain() {
        assert_eq!(
            parse_address("127.0.0.1:40000"),
            Ok("127.0.0.1:40000".parse().unwrap())
        );
        assert_eq!(
            parse_address("[::1]:5000"),
            Ok("[::1]:5000".parse().unwrap())
        );
        assert_eq!(
            parse_address("localhost:40000").map(|a| a.port()),
            Ok(40000)
        );
        assert_eq!(parse_address("  "), Err(InputError::AddressMissing));
        for bad in [
            "not an address",
            "127.0.0.1",
            "127.0.0.1:99999",
            "1.2.3.4:x",
        ] {
            assert!(
                matches!(parse_address(bad), Err(InputError::AddressInvalid(_))),
                "{bad}"
            );
        }
        assert_eq!(
            parse_address("127.0.0.1:0"),
            Err(InputError::AddressPortZero("127.0.0.1:0".into()))
        );
    }
}
