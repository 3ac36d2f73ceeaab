//! One excerpt file (`excerpts/<name>.toml`) and its lines, split into where each was logged
//! (the kernel log or a daemon's syslog tag), when (relative to the excerpt's last line) and
//! what it said.

use std::path::Path;

use serde::Deserialize;

/// What the excerpt's author's node showed, as a competent SRE reads it: one problem.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    pub rule: String,
    pub severity: String,
    #[serde(default)]
    pub subject: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    source: String,
    #[serde(default)]
    version: String,
    outcome: String,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    ident: Option<String>,
    #[serde(default)]
    collector: Option<String>,
    #[serde(default)]
    mixed: bool,
    #[serde(default)]
    known_miss: Option<String>,
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    processes: Vec<Process>,
    expect: Vec<Expect>,
    log: String,
}

/// A process the author's node still had when the post was written (a task still hung: state
/// `D`), staged as `/proc/<pid>/stat`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Process {
    pub pid: u32,
    pub comm: String,
    pub state: String,
}

/// Where a line goes when it carries no syslog tag of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Kmsg,
    Syslog,
}

#[derive(Debug)]
pub struct Excerpt {
    pub name: String,
    pub stage: Stage,
    /// The syslog tag of untagged lines of a `syslog` excerpt.
    pub ident: String,
    pub collector: Option<String>,
    pub mixed: bool,
    pub known_miss: Option<String>,
    pub processes: Vec<Process>,
    pub expect: Vec<Expect>,
    pub log: String,
}

impl Excerpt {
    /// No problem above info in it.
    pub fn benign(&self) -> bool {
        self.expect.iter().all(|e| e.severity == "info")
    }

    /// Several problems, or a problem among other lines (`mixed = true`).
    pub fn mixed(&self) -> bool {
        self.expect.iter().filter(|e| e.severity != "info").count() >= 2
            || (self.mixed && !self.benign())
    }

    /// The collector this build lacks that the excerpt needs (its `collector`, or an expected
    /// rule's), if any.
    pub fn pending(&self, known: &[&str]) -> Option<String> {
        let mut needed: Vec<&str> = self.expect.iter().map(|e| collector_of(&e.rule)).collect();
        needed.extend(self.collector.as_deref());
        needed
            .into_iter()
            .find(|c| !known.contains(c))
            .map(str::to_string)
    }
}

pub fn collector_of(rule: &str) -> &str {
    rule.split_once('.').map_or(rule, |(c, _)| c)
}

/// Every excerpt of the directory, sorted by name; a file that does not parse fails the test
/// with its name.
pub fn load_all(dir: &Path) -> Vec<Excerpt> {
    let mut paths: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("read corpus dir").path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p)).collect()
}

fn load(path: &Path) -> Excerpt {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let f: File = toml::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(
        f.source.starts_with("https://") || f.source.starts_with("http://"),
        "{name}: source must be the public address"
    );
    assert!(!f.outcome.trim().is_empty(), "{name}: outcome in words");
    let _ = (&f.version, &f.note);
    for e in &f.expect {
        assert!(
            ["info", "warning", "critical"].contains(&e.severity.as_str()),
            "{name}: severity {:?}",
            e.severity
        );
    }
    let stage = match f.stage.as_deref().unwrap_or("kmsg") {
        "kmsg" => Stage::Kmsg,
        "syslog" => Stage::Syslog,
        s => panic!("{name}: stage {s:?} is kmsg or syslog"),
    };
    Excerpt {
        name,
        stage,
        ident: f.ident.unwrap_or_else(|| "kubelet".into()),
        collector: f.collector,
        mixed: f.mixed,
        known_miss: f.known_miss,
        processes: f.processes,
        expect: f.expect,
        log: f.log,
    }
}

/// syslogd's console broadcast header (`Message from syslogd@host at Dec 10 05:25:44 ...`):
/// the line after it is the log's, this one is not.
pub fn is_wall_header(line: &str) -> bool {
    line.trim_start().starts_with("Message from syslogd@")
}

/// One line of an excerpt with its prefixes taken apart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// The syslog tag (`kernel`, `kubelet`, …) when the line has a syslog prefix.
    pub ident: Option<String>,
    pub pid: Option<u32>,
    /// The kernel's priority when the line shows it (`<3>[ …]`).
    pub level: Option<u8>,
    /// Seconds of the wall-clock time of day the line shows (syslog, `dmesg -T`).
    pub clock: Option<f64>,
    /// Seconds since boot the line shows (`[  123.456789]`).
    pub uptime: Option<f64>,
    pub message: String,
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Takes a line apart: an optional `<N>` priority, `dmesg` stamps (`[ 12.3]`, `[Tue Nov 20
/// 22:30:22 2018]`), a syslog prefix (traditional or RFC 3339, with host and tag), and the
/// kernel's own stamp after a `kernel:` tag.
pub fn split(raw: &str) -> Line {
    let mut line = Line {
        ident: None,
        pid: None,
        level: None,
        clock: None,
        uptime: None,
        message: String::new(),
    };
    // A post's Markdown indentation (a four-space code block) is not the log's.
    let mut rest = match raw.trim_start() {
        t if t.starts_with(['[', '<']) => t.trim_end(),
        _ => raw.trim_end(),
    };
    if let Some((lvl, r)) = priority(rest) {
        line.level = Some(lvl);
        rest = r;
    }
    // syslogd's console broadcast glues the tag to the text (` kernel:[ 12.3] …`), and
    // `journalctl -o short` lines cut by the poster start at the tag.
    if let Some(r) = rest.trim_start().strip_prefix("kernel:") {
        line.ident = Some("kernel".into());
        rest = r.trim_start();
    }
    if let Some((c, r)) = syslog_prefix(rest) {
        line.clock = Some(c.0);
        line.ident = Some(c.1);
        line.pid = c.2;
        rest = r;
    }
    if let Some((lvl, r)) = priority(rest) {
        line.level = Some(lvl);
        rest = r;
    }
    rest = stamps(rest, &mut line);
    line.message = rest.to_string();
    line
}

fn priority(s: &str) -> Option<(u8, &str)> {
    let r = s.strip_prefix('<')?;
    let (n, r) = r.split_once('>')?;
    let n: u8 = n.parse().ok()?;
    Some((n & 7, r))
}

/// `[ 12.345678]` (uptime) or `[Tue Nov 20 22:30:22 2018]` (time of day), once each.
fn stamps<'a>(mut s: &'a str, line: &mut Line) -> &'a str {
    for _ in 0..2 {
        let Some(r) = s.strip_prefix('[') else { break };
        let Some((inside, after)) = r.split_once(']') else {
            break;
        };
        let t = inside.trim();
        if let Ok(secs) = t.parse::<f64>() {
            line.uptime = Some(secs);
        } else if let Some(c) = t.split(' ').find_map(time_of_day) {
            line.clock.get_or_insert(c);
        } else {
            break;
        }
        s = after.strip_prefix(' ').unwrap_or(after);
    }
    s
}

fn time_of_day(s: &str) -> Option<f64> {
    let mut parts = s.split(':');
    let (h, m, sec) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || h.len() > 2 || m.len() != 2 {
        return None;
    }
    let sec: f64 = sec.parse().ok()?;
    Some(h.parse::<f64>().ok()? * 3600.0 + m.parse::<f64>().ok()? * 60.0 + sec)
}

type Prefix = (f64, String, Option<u32>);

/// `Nov 23 14:32:51 host tag[pid]: ` or `2026-05-28T12:21:57.303295+00:00 host tag: `.
fn syslog_prefix(s: &str) -> Option<(Prefix, &str)> {
    let (clock, rest) = if MONTHS.iter().any(|m| s.starts_with(m)) {
        let day_and_time = s.get(4..)?.trim_start();
        let (_day, r) = day_and_time.split_once(' ')?;
        let (t, r) = r.split_once(' ')?;
        (time_of_day(t)?, r)
    } else if s.len() > 19 && s.as_bytes()[4] == b'-' && s.as_bytes()[10] == b'T' {
        let (stamp, r) = s.split_once(' ')?;
        let t = stamp.get(11..)?;
        let t = t.split(['+', 'Z']).next()?;
        let t = match t.rfind('-') {
            Some(i) if i > 5 => &t[..i],
            _ => t,
        };
        (time_of_day(t)?, r)
    } else {
        return None;
    };
    // A poster may have cut the host name (`Feb 23 03:28:16 kernel: …`).
    let rest = rest.trim_start();
    let first = rest.split(' ').next().unwrap_or("");
    let r = if first.ends_with(':') {
        rest
    } else {
        rest.split_once(' ')?.1
    };
    let (tag, msg) = r
        .split_once(": ")
        .or_else(|| r.strip_suffix(':').map(|t| (t, "")))?;
    if tag.contains(' ') || tag.is_empty() {
        return None;
    }
    let (ident, pid) = match tag.split_once('[') {
        Some((i, p)) => (i, p.trim_end_matches(']').parse().ok()),
        None => (tag, None),
    };
    Some(((clock, ident.to_string(), pid), msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_taken_apart() {
        let l = split("Nov 23 14:32:51 ci3 kernel: [387120.141130] unregister_netdevice: x");
        assert_eq!(l.ident.as_deref(), Some("kernel"));
        assert_eq!(l.uptime, Some(387120.141130));
        assert_eq!(l.clock, Some(14.0 * 3600.0 + 32.0 * 60.0 + 51.0));
        assert_eq!(l.message, "unregister_netdevice: x");
        let l = split("[Tue Nov 20 22:30:22 2018] nf_conntrack: table full, dropping packet");
        assert_eq!(l.clock, Some(22.0 * 3600.0 + 30.0 * 60.0 + 22.0));
        assert_eq!(l.message, "nf_conntrack: table full, dropping packet");
        let l = split("2026-05-28T12:21:57.303295+00:00 vm-1 kernel:  ret_from_fork+0x44/0x70");
        assert_eq!(l.ident.as_deref(), Some("kernel"));
        assert_eq!(l.message, " ret_from_fork+0x44/0x70");
        let l = split("Dec 03 20:30:12 b-dok1 kubelet[206517]: I1203 20:30:12.198232  x");
        assert_eq!((l.ident.as_deref(), l.pid), (Some("kubelet"), Some(206517)));
        let l = split("Feb 23 03:28:16  kernel: EDAC MC1: 1 CE memory scrubbing error");
        assert_eq!(l.ident.as_deref(), Some("kernel"));
        assert_eq!(l.message, "EDAC MC1: 1 CE memory scrubbing error");
        let l = split("<3>[39291577.009543] Memory cgroup out of memory");
        assert_eq!((l.level, l.uptime), (Some(3), Some(39291577.009543)));
        let l = split("[  907.567979] systemd[14776]: launchpadlib");
        assert_eq!(l.message, "systemd[14776]: launchpadlib");
    }
}
