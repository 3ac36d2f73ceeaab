//! `check`'s exit code: the worst finding in the low two bits, and a separate bit when any
//! collector did not complete, so that silence from a collector that could not look is never
//! read as health.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | every collector completed; nothing above info |
//! | 1 | a warning (worst finding) |
//! | 2 | a critical finding |
//! | 3 | node-doctor itself failed (missing, empty or wrong host root; cannot write the report) |
//! | 4 + (0, 1 or 2) | as 0/1/2, but at least one collector did not complete: it timed out, failed, or could not read (all or part of) its sources that should exist (refused, unreadable, malformed); the report names which and why. A source absent by design (PSI off, an nft-only node, no runtime on a machine that is not a node) is stated in the collector's message and is not incomplete |
//! | 64 | bad usage (unknown flag, bad value, unknown collector) |
//!
//! In a script: `rc & 3` is the severity (when `rc != 3` and `rc < 64`), `rc & 4` says the
//! check was incomplete.

use collectors::{Severity, Status};

/// node-doctor itself failed.
pub const AGENT_FAILED: u8 = 3;
/// Added to the severity code when a collector did not complete.
pub const INCOMPLETE: u8 = 4;

/// Text for `check --help` (kept beside the codes it describes).
pub const HELP: &str = "\
Exit codes:
  0   every collector completed and nothing above info was found
  1   the worst finding is a warning
  2   the worst finding is critical
  3   node-doctor itself failed (missing, empty or wrong --host-root; cannot write the report)
  4   nothing above info, but a collector did not complete (timed out, failed, or could not
      read a source that should exist); 5 and 6 are 1 and 2 with the same caveat. rc & 4 is
      set whenever the check was incomplete; the report names each such collector and why.
      A source absent by design (PSI off, nft-only node, not a node) is a note, not this
  64  bad usage (unknown flag, bad value, unknown collector)";

/// True when a collector's status means it could not look at everything it is meant to
/// (it timed out, failed, or a source that should exist was refused, unreadable or
/// malformed). A source this host does not have by design (`Status::Noted`: PSI off, no
/// legacy iptables, not a node) is stated in the message and is complete.
pub fn is_incomplete(status: &Status) -> bool {
    !status.is_complete()
}

/// The exit code for the worst finding and whether any collector was incomplete.
pub fn code(worst: Option<Severity>, incomplete: bool) -> u8 {
    let severity = match worst {
        Some(Severity::Critical) => 2,
        Some(Severity::Warning) => 1,
        Some(Severity::Info) | None => 0,
    };
    if incomplete {
        severity | INCOMPLETE
    } else {
        severity
    }
}

/// Why a host root cannot be diagnosed, or `Ok` when it looks like a host's `/`: it must be
/// a directory holding a `proc/stat` (present on every Linux since 1.0; in a pod, the host's
/// `/` mounted with its `/proc` under it). An empty directory or a wrong mount would
/// otherwise make every collector report "unavailable" and look like a quiet node.
pub fn check_host_root(root: &std::path::Path) -> Result<(), String> {
    let hint = "mount the host's / there (in a pod: a read-only hostPath volume of / at /host) \
                and pass it with --host-root";
    match std::fs::symlink_metadata(root) {
        Ok(md) if md.is_dir() => {}
        Ok(_) => {
            return Err(format!(
                "the host root {} is not a directory; {hint}",
                root.display()
            ))
        }
        Err(e) => {
            return Err(format!(
                "the host root {} is not usable: {e}; {hint}",
                root.display()
            ))
        }
    }
    let stat = root.join("proc/stat");
    match std::fs::symlink_metadata(&stat) {
        Ok(_) => Ok(()),
        Err(e) => Err(format!(
            "the host root {} does not look like a host's /: {} is missing ({e}); {hint}",
            root.display(),
            stat.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severity_in_the_low_bits_incomplete_in_bit_two() {
        assert_eq!(code(None, false), 0);
        assert_eq!(code(Some(Severity::Info), false), 0);
        assert_eq!(code(Some(Severity::Warning), false), 1);
        assert_eq!(code(Some(Severity::Critical), false), 2);
        assert_eq!(code(None, true), 4);
        assert_eq!(code(Some(Severity::Warning), true), 5);
        assert_eq!(code(Some(Severity::Critical), true), 6);
        // Never collides with "node-doctor failed" or usage.
        for w in [None, Some(Severity::Warning), Some(Severity::Critical)] {
            for i in [false, true] {
                assert_ne!(code(w, i), AGENT_FAILED);
                assert!(code(w, i) < 64);
            }
        }
    }

    #[test]
    fn only_ok_is_complete() {
        assert!(!is_incomplete(&Status::Ok));
        assert!(!is_incomplete(&Status::Noted(
            "no legacy iptables table and no xtables lock: nft-only node".into()
        )));
        assert!(is_incomplete(&Status::Degraded("x".into())));
        assert!(is_incomplete(&Status::Unavailable("x".into())));
        assert!(is_incomplete(&Status::Error("timed out after 1s".into())));
    }

    #[test]
    fn host_root_must_hold_proc_stat() {
        let t = tempfile::tempdir().unwrap();
        let e = check_host_root(t.path()).unwrap_err();
        assert!(e.contains("does not look like a host's /"), "{e}");
        assert!(e.contains("proc/stat"), "{e}");
        let e = check_host_root(&t.path().join("missing")).unwrap_err();
        assert!(e.contains("not usable"), "{e}");
        std::fs::write(t.path().join("file"), "x").unwrap();
        assert!(check_host_root(&t.path().join("file"))
            .unwrap_err()
            .contains("not a directory"));
        std::fs::create_dir(t.path().join("proc")).unwrap();
        std::fs::write(t.path().join("proc/stat"), "cpu 1 2 3\n").unwrap();
        assert_eq!(check_host_root(t.path()), Ok(()));
    }
}
