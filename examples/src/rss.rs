//! The process's resident set size, as the kernel reports it.

/// Resident memory of this process in bytes (`VmRSS` of `/proc/self/status`); `None` where that file does not
/// exist or does not parse.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
