//! Lines of the node's syslog files (`/var/log/messages` on CentOS/TencentOS, `/var/log/syslog`
//! on Ubuntu/Debian), as rsyslog and syslog-ng write them:
//!
//! - the traditional format (RFC 3164 style, rsyslog's `RSYSLOG_TraditionalFileFormat`, the
//!   default of CentOS 7/8, TencentOS and Ubuntu up to 22.04):
//!   `Nov 23 12:00:00 VM-0-7-centos kubelet[14109]: E1123 12:00:00.922965 ...` — local time of
//!   the node, no year;
//! - rsyslog's high-precision format (`RSYSLOG_FileFormat`, Ubuntu 24.04's default):
//!   `2026-11-23T12:00:00.123456+08:00 node-1 kubelet[14109]: ...` — RFC 3339 with an offset;
//! - RFC 5424 (`<30>1 2026-11-23T12:00:00.123+08:00 node-1 kubelet 14109 - - ...`), which
//!   some relays write to files.
//!
//! A traditional timestamp has no year: it is the year that puts the line nearest before `now`
//! (at most a day ahead, for clocks slightly out of step), so a December line read in January
//! is last year's and a `Jan 1 00:00:05` line read at `Dec 31 23:59:59` is next year's.

use jiff::civil::DateTime;
use jiff::tz::TimeZone;

/// One parsed line, borrowing from the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogLine<'a> {
    /// Unix seconds, `None` when the timestamp is not a valid time in the zone.
    pub time: Option<i64>,
    pub host: &'a str,
    /// The program (`kubelet`, `dockerd`, `containerd`), the tag before `[pid]:`.
    pub ident: &'a str,
    pub pid: Option<u32>,
    pub message: &'a str,
}

/// Lines may be a day ahead of the reader's clock (a writer whose clock runs ahead, a line
/// stamped just before midnight and read after it with a slow clock).
const FUTURE_SLACK_SECONDS: i64 = 86_400;

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Parses one line (without its newline). `now` (Unix seconds) and `tz` (the node's zone) date
/// a traditional timestamp. Returns `None` for a line in none of the formats.
pub fn parse<'a>(line: &'a str, tz: &TimeZone, now: i64) -> Option<SyslogLine<'a>> {
    let line = line.trim_end_matches(['\n', '\r']);
    if let Some(rest) = line.strip_prefix('<') {
        return parse_5424(rest);
    }
    let first = line.as_bytes().first()?;
    if first.is_ascii_digit() {
        let (ts, rest) = line.split_once(' ')?;
        let time = parse_rfc3339(ts);
        return rest_3164(time, rest);
    }
    // "Nov 23 12:00:00 " (day space-padded: "Nov  3").
    let month = MONTHS.iter().position(|m| line.starts_with(m))? as i8 + 1;
    let b = line.as_bytes();
    if b.get(3) != Some(&b' ') || line.len() < 16 {
        return None;
    }
    let day_text = line.get(4..6)?.trim_start();
    let day: i8 = day_text.parse().ok()?;
    let clock = line.get(7..15)?;
    if line.as_bytes().get(15) != Some(&b' ') {
        return None;
    }
    let (h, m, s) = parse_clock(clock)?;
    let time = date_3164(tz, now, month, day, h, m, s);
    rest_3164(time, &line[16..])
}

/// `HH:MM:SS`.
fn parse_clock(t: &str) -> Option<(i8, i8, i8)> {
    let b = t.as_bytes();
    if b.len() != 8 || b[2] != b':' || b[5] != b':' {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<i8> {
        let s = t.get(r)?;
        if !s.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    Some((n(0..2)?, n(3..5)?, n(6..8)?))
}

/// The instant of a yearless local time: the latest year whose instant is not more than a day
/// after `now`.
pub fn date_3164(tz: &TimeZone, now: i64, month: i8, day: i8, h: i8, m: i8, s: i8) -> Option<i64> {
    let now_ts = jiff::Timestamp::from_second(now).ok()?;
    let year = tz.to_datetime(now_ts).year();
    // A leap second (":60") is read as :59.
    let s = s.min(59);
    [year.checked_add(1), Some(year), year.checked_sub(1)]
        .into_iter()
        .flatten()
        .filter_map(|y| {
            let dt = DateTime::new(y, month, day, h, m, s, 0).ok()?;
            Some(tz.to_timestamp(dt).ok()?.as_second())
        })
        .find(|t| *t <= now + FUTURE_SLACK_SECONDS)
}

/// `host ident[pid]: message` after the timestamp.
fn rest_3164(time: Option<i64>, rest: &str) -> Option<SyslogLine<'_>> {
    let (host, rest) = rest.split_once(' ')?;
    if host.is_empty() {
        return None;
    }
    // The tag ends at the first ':' or '[' ; a line without a tag ("last message repeated 3
    // times") has the whole rest as its message and no ident.
    let tag_end = rest.find([':', '[', ' ']).unwrap_or(rest.len());
    let ident = &rest[..tag_end];
    let after = &rest[tag_end..];
    let (pid, after) = match after.strip_prefix('[') {
        Some(p) => {
            let close = p.find(']')?;
            (p[..close].parse::<u32>().ok(), &p[close + 1..])
        }
        None => (None, after),
    };
    match after.strip_prefix(':') {
        Some(msg) => Some(SyslogLine {
            time,
            host,
            ident,
            pid,
            message: msg.strip_prefix(' ').unwrap_or(msg),
        }),
        None => Some(SyslogLine {
            time,
            host,
            ident: "",
            pid: None,
            message: rest,
        }),
    }
}

/// After `<`: `PRI>1 TIMESTAMP HOST APP PROCID MSGID SD MSG`.
fn parse_5424(rest: &str) -> Option<SyslogLine<'_>> {
    let close = rest.find('>')?;
    if close == 0 || close > 3 || !rest[..close].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let rest = rest[close + 1..].strip_prefix("1 ")?;
    let mut it = rest.splitn(6, ' ');
    let ts = it.next()?;
    let host = it.next()?;
    let app = it.next()?;
    let procid = it.next()?;
    let _msgid = it.next()?;
    let tail = it.next().unwrap_or("");
    // Structured data: "-" or one or more [..] elements; the message follows a space.
    let msg = if let Some(m) = tail.strip_prefix('-') {
        m.strip_prefix(' ').unwrap_or(m)
    } else if tail.starts_with('[') {
        let mut depth_end = None;
        let mut in_quote = false;
        let mut escaped = false;
        let b = tail.as_bytes();
        for (i, c) in b.iter().enumerate() {
            if escaped {
                escaped = false;
                continue;
            }
            match c {
                b'\\' if in_quote => escaped = true,
                b'"' => in_quote = !in_quote,
                b']' if !in_quote && b.get(i + 1) != Some(&b'[') => {
                    depth_end = Some(i + 1);
                    break;
                }
                _ => {}
            }
        }
        let end = depth_end?;
        tail[end..].strip_prefix(' ').unwrap_or(&tail[end..])
    } else {
        tail
    };
    let nil = |s: &'static str, v: &str| v == s;
    Some(SyslogLine {
        time: if nil("-", ts) {
            None
        } else {
            parse_rfc3339(ts)
        },
        host: if nil("-", host) { "" } else { host },
        ident: if nil("-", app) { "" } else { app },
        pid: procid.parse().ok(),
        message: msg.strip_prefix('\u{feff}').unwrap_or(msg),
    })
}

/// An RFC 3339 timestamp (`2026-11-23T12:00:00.123456+08:00`, `...Z`) in Unix seconds.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    s.parse::<jiff::Timestamp>().ok().map(|t| t.as_second())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// UTC+8 without DST (Asia/Shanghai), built without tzdata.
    fn shanghai() -> TimeZone {
        TimeZone::fixed(jiff::tz::offset(8))
    }

    fn at(s: &str) -> i64 {
        parse_rfc3339(s).unwrap()
    }

    #[test]
    fn the_handbooks_kubelet_line_in_local_time() {
        let now = at("2026-09-27T14:40:00+08:00");
        let l = parse(
            "Sep 27 14:37:21 VM_0_7_centos kubelet[14109]: E0927 14:37:21.922965 14109 remote_runtime.go:250] RemoveContainer",
            &shanghai(),
            now,
        )
        .unwrap();
        assert_eq!(l.time, Some(at("2026-09-27T14:37:21+08:00")));
        assert_eq!(
            (l.host, l.ident, l.pid),
            ("VM_0_7_centos", "kubelet", Some(14109))
        );
        assert!(l.message.starts_with("E0927 14:37:21.922965"));
    }

    #[test]
    fn padded_day_and_tag_without_pid() {
        let now = at("2026-11-03T10:00:00Z");
        let l = parse(
            "Nov  3 09:00:00 node-1 containerd: msg",
            &TimeZone::UTC,
            now,
        )
        .unwrap();
        assert_eq!(l.time, Some(at("2026-11-03T09:00:00Z")));
        assert_eq!((l.ident, l.pid, l.message), ("containerd", None, "msg"));
        let l = parse(
            "Nov  3 09:00:00 node-1 last message repeated 3 times",
            &TimeZone::UTC,
            now,
        )
        .unwrap();
        assert_eq!(l.ident, "");
    }

    #[test]
    fn year_rolls_over_both_ways() {
        let tz = shanghai();
        // A December line read in January is last year's.
        let jan = at("2027-01-02T08:00:00+08:00");
        let l = parse("Dec 31 23:59:00 n kubelet[1]: x", &tz, jan).unwrap();
        assert_eq!(l.time, Some(at("2026-12-31T23:59:00+08:00")));
        // A line a few seconds ahead of the reader across New Year is next year's.
        let eve = at("2026-12-31T23:59:59+08:00");
        let l = parse("Jan  1 00:00:05 n kubelet[1]: x", &tz, eve).unwrap();
        assert_eq!(l.time, Some(at("2027-01-01T00:00:05+08:00")));
        // Feb 29 exists only in leap years: read in March 2029, it is 2028's.
        let l = parse("Feb 29 12:00:00 n k: x", &tz, at("2029-03-01T00:00:00Z")).unwrap();
        assert_eq!(l.time, Some(at("2028-02-29T12:00:00+08:00")));
        // The same day read later the same year is this year's.
        let l = parse(
            "Nov 23 12:00:00 n k: x",
            &tz,
            at("2026-11-23T13:00:00+08:00"),
        )
        .unwrap();
        assert_eq!(l.time, Some(at("2026-11-23T12:00:00+08:00")));
    }

    #[test]
    fn dst_folds_and_gaps_resolve() {
        let tz = TimeZone::tzif(
            "America/New_York",
            include_bytes!("../../tests/fixtures/zoneinfo/America/New_York"),
        )
        .unwrap();
        let now = at("2026-11-02T12:00:00Z");
        // 01:30 on the fall-back day happens twice: the earlier (EDT) instant.
        let l = parse("Nov  1 01:30:00 n k: x", &tz, now).unwrap();
        assert_eq!(l.time, Some(at("2026-11-01T01:30:00-04:00")));
        // 02:30 on the spring-forward day does not exist: read after the gap.
        let l = parse("Mar  8 02:30:00 n k: x", &tz, now).unwrap();
        assert_eq!(l.time, Some(at("2026-03-08T03:30:00-04:00")));
    }

    #[test]
    fn high_precision_and_rfc5424() {
        let l = parse(
            "2026-11-23T12:00:00.123456+08:00 node-1 kubelet[2054]: I1123 hello",
            &TimeZone::UTC,
            0,
        )
        .unwrap();
        assert_eq!(l.time, Some(at("2026-11-23T04:00:00Z")));
        assert_eq!((l.host, l.ident, l.pid), ("node-1", "kubelet", Some(2054)));
        let l = parse(
            "<30>1 2026-11-23T12:00:00.123+08:00 node-1 dockerd 812 - [meta a=\"]\"] level=error msg=x",
            &TimeZone::UTC,
            0,
        )
        .unwrap();
        assert_eq!(
            (l.ident, l.pid, l.message),
            ("dockerd", Some(812), "level=error msg=x")
        );
        let l = parse("<30>1 - - - - - - plain", &TimeZone::UTC, 0).unwrap();
        assert_eq!((l.time, l.message), (None, "plain"));
    }

    #[test]
    fn rejects_what_is_not_syslog() {
        for bad in [
            "",
            "hello world",
            "Nov 23 12:00 n k: x",
            "Nov 99 12:00:00 n k: x",
            "Xyz 23 12:00:00 n k: x",
            "<999999>1 x",
        ] {
            let p = parse(bad, &TimeZone::UTC, 0);
            assert!(p.is_none() || p.unwrap().time.is_none(), "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,120}", now in -10_000_000_000i64..10_000_000_000i64) {
            let _ = parse(&s, &TimeZone::UTC, now);
        }

        #[test]
        fn traditional_lines_never_panic(
            m in 0usize..12, d in 0u8..40, h in 0u8..30, mi in 0u8..70, s in 0u8..70,
            rest in "[ -~]{0,40}", now in 0i64..4_000_000_000i64,
        ) {
            let line = format!("{} {:>2} {:02}:{:02}:{:02} {rest}", MONTHS[m], d, h, mi, s);
            let _ = parse(&line, &TimeZone::fixed(jiff::tz::offset(-11)), now);
        }

        /// A line as rsyslog writes it in each format (traditional `%b %e %H:%M:%S` in the
        /// node's zone, read up to 300 days later; `RSYSLOG_FileFormat`'s RFC 3339 with
        /// microseconds and offset; RFC 5424 with `-` or an SD element): time, host, ident,
        /// pid and message read back.
        #[test]
        fn parses_what_rsyslog_writes(
            t in 946_684_800i64..4_102_444_800, micros in 0u32..1_000_000,
            zone in -12i8..=14, later in 0i64..300 * 86_400, format in 0u8..4,
            host in "[a-zA-Z0-9][a-zA-Z0-9_.-]{0,19}", ident in "kubelet|dockerd|containerd|[a-z][a-z0-9_.-]{0,10}",
            pid in proptest::option::of(1u32..=4_194_304), message in "[ -~]{0,60}",
        ) {
            let tz = TimeZone::fixed(jiff::tz::offset(zone));
            let Ok(ts) = jiff::Timestamp::from_second(t) else { return Ok(()) };
            let dt = tz.to_datetime(ts);
            let rfc3339 = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{micros:06}{}{:02}:00",
                dt.year(), dt.month(), dt.day(), dt.hour(), dt.minute(), dt.second(),
                if zone < 0 { '-' } else { '+' }, zone.unsigned_abs(),
            );
            let tag = pid.map_or(ident.clone(), |p| format!("{ident}[{p}]"));
            let line = match format {
                0 => format!(
                    "{} {:>2} {:02}:{:02}:{:02} {host} {tag}: {message}",
                    MONTHS[dt.month() as usize - 1], dt.day(), dt.hour(), dt.minute(), dt.second(),
                ),
                1 => format!("{rfc3339} {host} {tag}: {message}"),
                2 => format!("<30>1 {rfc3339} {host} {ident} {} - - {message}", pid.map_or("-".into(), |p| p.to_string())),
                _ => format!(
                    "<30>1 {rfc3339} {host} {ident} {} ID47 [origin ip=\"10.0.0.7\" software=\"x\\\"]\"] {message}",
                    pid.map_or("-".into(), |p| p.to_string()),
                ),
            };
            let want = SyslogLine { time: Some(t), host: &host, ident: &ident, pid, message: &message };
            proptest::prop_assert_eq!(parse(&line, &tz, t + later), Some(want));
        }
    }
}
