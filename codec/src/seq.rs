//! Wrapping comparison of 16-bit sequence numbers.

/// True when sequence `a` is newer than `b`, allowing for wraparound at 65536: `a` is newer when it is ahead of
/// `b` by at most half the number space. Authority, ownership and packet sequences all compare this way.
#[inline]
pub fn seq_newer(a: u16, b: u16) -> bool {
    (a > b && a - b <= 32768) || (a < b && b - a > 32768)
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

    #[test]
    fn half_range_boundary() {
        assert!(seq_newer(32768, 0));
        assert!(!seq_newer(32769, 0));
        assert!(seq_newer(0, 32769));
    }
}
