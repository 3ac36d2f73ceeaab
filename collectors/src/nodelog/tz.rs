//! The node's local time zone: `<root>/etc/localtime`, a TZif file (RFC 8536), usually a
//! symbolic link into `/usr/share/zoneinfo` that [`HostPaths::resolve`] re-roots under the host
//! root. Syslog files stamp their lines in this zone (rsyslog's and syslog-ng's traditional
//! format has no offset), so the host's file is read, never the agent's: a DaemonSet image has
//! no zone or UTC. The TZif data is handed to `jiff`, which parses it and does the
//! civil-time-to-instant arithmetic (DST gaps and folds included).

use jiff::tz::TimeZone;

use crate::host::HostPaths;
use crate::hostfs;

/// `etc/localtime` of the host.
pub const LOCALTIME: &str = "/etc/localtime";

/// Largest TZif file read. Real ones: `Asia/Shanghai` 393 B, `America/New_York` 3.5 KiB, the
/// largest zone of tzdata 2024 (`America/Detroit` fat build) under 4 KiB; a version-3 file with
/// every transition up to 2037 stays well under 16 KiB. 64 KiB is far above any of them.
pub const TZIF_CAP: usize = 64 << 10;

/// The zone the node's syslog timestamps are in, and how it was found.
#[derive(Debug, Clone)]
pub struct LocalZone {
    pub tz: TimeZone,
    /// The zone's name when `etc/localtime` links into a zoneinfo tree (`Asia/Shanghai`), else
    /// `localtime`; `UTC` when there is no file.
    pub name: String,
    /// Why the file could not be used (the zone is then UTC, as glibc does without one).
    pub problem: Option<String>,
}

impl LocalZone {
    pub fn utc() -> LocalZone {
        LocalZone {
            tz: TimeZone::UTC,
            name: "UTC".into(),
            problem: None,
        }
    }

    /// Reads `<root>/etc/localtime`. A missing file is UTC (glibc's rule), not a problem; an
    /// unreadable or invalid one is UTC with the reason in `problem`.
    pub fn read(host: &HostPaths) -> LocalZone {
        let path = host.resolve(LOCALTIME);
        let name = host
            .host_side(&path)
            .and_then(|p| {
                let s = p.to_string_lossy().into_owned();
                s.split_once("/zoneinfo/").map(|(_, n)| n.to_string())
            })
            .filter(|n| {
                !n.is_empty()
                    && n.len() <= 64
                    && n.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"/_+-".contains(&b))
            })
            .unwrap_or_else(|| "localtime".into());
        match hostfs::read_bytes(&path, TZIF_CAP) {
            Ok(bytes) => match TimeZone::tzif(&name, &bytes) {
                Ok(tz) => LocalZone {
                    tz,
                    name,
                    problem: None,
                },
                Err(e) => LocalZone {
                    problem: Some(format!(
                        "{}: not a TZif file ({e}); syslog times are read as UTC",
                        path.display()
                    )),
                    ..LocalZone::utc()
                },
            },
            Err(e) if e.is_not_found() => LocalZone::utc(),
            Err(e) => LocalZone {
                problem: Some(format!("{e}; syslog times are read as UTC")),
                ..LocalZone::utc()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_hosts_zone_through_its_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let host = HostPaths::new(dir.path());
        // No file: UTC, no problem.
        let z = LocalZone::read(&host);
        assert_eq!((z.name.as_str(), z.problem.is_none()), ("UTC", true));
        // Debian's tzdata file (tests/fixtures/zoneinfo), put under the fake root and linked
        // as hosts do.
        let sh = include_bytes!("../../tests/fixtures/zoneinfo/Asia/Shanghai");
        std::fs::create_dir_all(dir.path().join("usr/share/zoneinfo/Asia")).unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("usr/share/zoneinfo/Asia/Shanghai"), sh).unwrap();
        std::os::unix::fs::symlink(
            "/usr/share/zoneinfo/Asia/Shanghai",
            dir.path().join("etc/localtime"),
        )
        .unwrap();
        let z = LocalZone::read(&host);
        assert_eq!(z.name, "Asia/Shanghai");
        assert!(z.problem.is_none(), "{:?}", z.problem);
        let ts = jiff::Timestamp::from_second(0).unwrap();
        assert_eq!(z.tz.to_offset(ts).seconds(), 8 * 3600);
    }

    #[test]
    fn garbage_is_utc_with_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        std::fs::write(dir.path().join("etc/localtime"), b"not a zone").unwrap();
        let z = LocalZone::read(&HostPaths::new(dir.path()));
        assert_eq!(z.name, "UTC");
        assert!(z.problem.unwrap().contains("not a TZif file"));
    }
}
