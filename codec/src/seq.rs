//! Wrapping comparison of 16-bit sequence numbers.

/// True when sequence `a` is newer than `b`, allowing for wraparound at 65536: `a` is newer when it is ahead of
/// `b` by at most half the number space. Authority, ownership and packet sequences all compare this way.
#[inline]
pub fn seq_newer(a: u16, b: u16) -> bool {
    // `a - b` (mod 65536) in 1..32768, as one comparison (subtracting one more wraps 0 to the top of the range),
    // or exactly half the space when `a` is the larger: the decoder asks this twice per entry it stores, and the
    // two-sided form cost four branches each time.
    let d = a.wrapping_sub(b);
    d.wrapping_sub(1) < 32767 || (d == 32768 && a > b)
}

#[cfg(test)]
mod tests {
    use super::seq_newer;

    #[test]
    fn newer_without_wrap() {
        assert!(seq_newer(2, 1));
        assert!(!seq_newer(1, 2));
        assert!(!seq_newer(5, 5));
    }

    #[test]
    fn newer_across_wrap() {
        assert!(seq_newer(0, 65535));
        assert!(seq_newer(10, 65530));
        assert!(!seq_newer(65535, 0));
    }

    /// The one-comparison form agrees with the definition (ahead by 1 to 32768 without wrapping, or behind by more
    /// than 32768 across it) on every `a` against seeded `b`s, the edges of the range included.
    #[test]
    fn the_one_comparison_form_agrees_with_the_definition() {
        let defined = |a: u16, b: u16| (a > b && a - b <= 32768) || (a < b && b - a > 32768);
        let mut b = 0x9E37u16;
        for round in 0..64u16 {
            // A multiplicative walk over the 16-bit values, seeded; then the edges.
            b = b.wrapping_mul(0x6A09).wrapping_add(round);
            for b in [b, 0, 1, 32767, 32768, 32769, 65535] {
                for a in 0..=u16::MAX {
                    assert_eq!(seq_newer(a, b), defined(a, b), "a {a} b {b}");
                }
            }
        }
    }

    #[test]
    fn half_range_boundary() {
        assert!(seq_newer(32768, 0));
        assert!(!seq_newer(32769, 0));
        assert!(seq_newer(0, 32769));
    }
}
