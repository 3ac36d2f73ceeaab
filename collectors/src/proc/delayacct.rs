//! Whether the kernel accounts per-task IO wait (delay accounting), which `/proc/<pid>/stat`
//! field 42 (`delayacct_blkio_ticks`) and iotop's `IO>` column rely on.
//!
//! Since Linux 5.14 delay accounting is off unless `kernel.task_delayacct=1`
//! (`<root>/proc/sys/kernel/task_delayacct`) or the `delayacct` boot parameter turned it on;
//! before, it was on unless the kernel was booted with `nodelayacct`, and the sysctl did not
//! exist. A kernel built without `CONFIG_TASK_DELAY_ACCT` has no sysctl and prints 0: the
//! `load` collector notices that from the figures (a window with tasks in D state and no
//! delay at all) and samples D states instead. Two one-value files: our own parser.

use crate::host::HostPaths;
use crate::ReadError;

/// Whether delay accounting is on, and how that was told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayAcct {
    /// `kernel.task_delayacct` reads 1.
    On,
    /// `kernel.task_delayacct` reads 0.
    Off,
    /// No such sysctl (a kernel before 5.14): on by default.
    OnByDefault,
    /// No such sysctl and the kernel was booted with `nodelayacct`.
    OffByBootParameter,
}

impl DelayAcct {
    pub fn is_on(self) -> bool {
        matches!(self, DelayAcct::On | DelayAcct::OnByDefault)
    }
}

/// Parses `task_delayacct` (`0\n` or `1\n`).
pub fn parse_sysctl(text: &str) -> Result<bool, String> {
    match text.trim() {
        "0" => Ok(false),
        "1" => Ok(true),
        other => Err(format!(
            "expected 0 or 1, found {:?}",
            other.chars().take(32).collect::<String>()
        )),
    }
}

/// True when a kernel command line turns delay accounting off (`nodelayacct`).
pub fn cmdline_disables(cmdline: &str) -> bool {
    cmdline.split_whitespace().any(|w| w == "nodelayacct")
}

/// Reads `<root>/proc/sys/kernel/task_delayacct`, else `<root>/proc/cmdline`.
pub fn read(host: &HostPaths) -> Result<DelayAcct, ReadError> {
    let path = host.proc_file("sys/kernel/task_delayacct");
    match crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE) {
        Ok(text) => match parse_sysctl(&text) {
            Ok(true) => Ok(DelayAcct::On),
            Ok(false) => Ok(DelayAcct::Off),
            Err(e) => Err(ReadError::parse(&path, e)),
        },
        Err(e) if e.is_not_found() => {
            // No command line either (a copy of /proc without it): the old default. Were it
            // off, the load collector sees no delay while tasks wait, and samples instead.
            let cmdline = host.proc_file("cmdline");
            let text = match crate::hostfs::read_text(&cmdline, crate::hostfs::cap::VALUE) {
                Ok(t) => t,
                Err(e) if e.is_not_found() => String::new(),
                Err(e) => return Err(e),
            };
            Ok(if cmdline_disables(&text) {
                DelayAcct::OffByBootParameter
            } else {
                DelayAcct::OnByDefault
            })
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sysctl_else_the_boot_parameter() {
        let t = tempfile::tempdir().unwrap();
        let host = HostPaths::new(t.path());
        std::fs::create_dir_all(t.path().join("proc/sys/kernel")).unwrap();
        // Linux 6.18 as booted here: off.
        std::fs::write(t.path().join("proc/sys/kernel/task_delayacct"), "0\n").unwrap();
        assert_eq!(read(&host).unwrap(), DelayAcct::Off);
        std::fs::write(t.path().join("proc/sys/kernel/task_delayacct"), "1\n").unwrap();
        assert_eq!(read(&host).unwrap(), DelayAcct::On);
        std::fs::write(t.path().join("proc/sys/kernel/task_delayacct"), "yes\n").unwrap();
        assert!(read(&host).is_err());
        // A 5.4 kernel: no sysctl; on unless booted with nodelayacct.
        std::fs::remove_file(t.path().join("proc/sys/kernel/task_delayacct")).unwrap();
        std::fs::write(
            t.path().join("proc/cmdline"),
            "BOOT_IMAGE=/vmlinuz-5.4.0 root=/dev/vda1 ro quiet\n",
        )
        .unwrap();
        assert_eq!(read(&host).unwrap(), DelayAcct::OnByDefault);
        assert!(DelayAcct::OnByDefault.is_on());
        std::fs::write(
            t.path().join("proc/cmdline"),
            "BOOT_IMAGE=/vmlinuz-5.4.0 root=/dev/vda1 ro nodelayacct quiet\n",
        )
        .unwrap();
        assert_eq!(read(&host).unwrap(), DelayAcct::OffByBootParameter);
        assert!(!DelayAcct::OffByBootParameter.is_on());
        assert!(!cmdline_disables("delayacct"));
        std::fs::remove_file(t.path().join("proc/cmdline")).unwrap();
        assert_eq!(read(&host).unwrap(), DelayAcct::OnByDefault);
    }
}
