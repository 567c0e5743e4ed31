//! Deterministic per-link seeds, so each direction of each link draws its own random stream from one session seed.

use std::net::SocketAddr;

/// Derives the seed of the `from → to` conditioner from a session seed.
///
/// Depends only on the seed and the two addresses (not on the order links were first used), and differs for the
/// two directions of a link.
pub(crate) fn link_seed(seed: u64, from: SocketAddr, to: SocketAddr) -> u64 {
    let mut state = splitmix64(seed ^ 0x7068_7973_796e_6321);
    for addr in [from, to] {
        state = mix_addr(state, addr);
    }
    state
}

fn mix_addr(mut state: u64, addr: SocketAddr) -> u64 {
    match addr {
        SocketAddr::V4(v4) => {
            state = splitmix64(state ^ 4);
            state = splitmix64(state ^ u64::from(u32::from(*v4.ip())));
        }
        SocketAddr::V6(v6) => {
            let bits = u128::from(*v6.ip());
            state = splitmix64(state ^ 6);
            state = splitmix64(state ^ (bits >> 64) as u64);
            state = splitmix64(state ^ bits as u64);
        }
    }
    splitmix64(state ^ u64::from(addr.port()))
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_per_direction_and_session_but_repeat() {
        let a: SocketAddr = "10.0.0.1:4000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:4000".parse().unwrap();
        assert_eq!(link_seed(7, a, b), link_seed(7, a, b));
        assert_ne!(link_seed(7, a, b), link_seed(7, b, a));
        assert_ne!(link_seed(7, a, b), link_seed(8, a, b));
    }
}
