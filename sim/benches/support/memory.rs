//! The process's memory as the kernel counts it, for the sim's benches.

use anyhow::Context as _;

/// VmRSS and VmHWM of this process.
pub struct Memory {
    pub rss_kib: usize,
    pub hwm_kib: usize,
}

impl Memory {
    pub fn read() -> anyhow::Result<Memory> {
        let status =
            std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
        let field = |name: &str| -> anyhow::Result<usize> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .with_context(|| format!("no {name} in /proc/self/status"))
        };
        Ok(Memory {
            rss_kib: field("VmRSS:")?,
            hwm_kib: field("VmHWM:")?,
        })
    }
}
