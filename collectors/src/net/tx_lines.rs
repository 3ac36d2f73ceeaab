//! Kernel-log lines that say a NIC stopped transmitting: the network stack's transmit
//! watchdog (`dev_watchdog`, `net/sched/sch_generic.c`) and the ENA driver's missing Tx
//! completions. A pure parser: one record's message to a [`TxLine`], or `None`.
//!
//! The watchdog's wordings by kernel:
//!
//! ```text
//! NETDEV WATCHDOG: eth0 (e1000e): transmit queue 0 timed out                    3.x–6.1
//! NETDEV WATCHDOG: eth0 (r8169): transmit queue 0 timed out 5376 ms             6.2–6.7
//! r8125 0000:22:04.0 eth4: NETDEV WATCHDOG: CPU: 3: transmit queue 0 timed out 5010 ms   6.8+
//! ena 0000:00:05.0 eth0: Found a Tx that wasn't completed on time, qid 5, index 475.
//! ```
//!
//! What a reader would get wrong: before 6.8 the line sits inside a `cut here` WARNING block
//! (its stack is not an oops); from 6.8 the device comes first, in the `netdev_crit` prefix
//! (`<driver> <bus id> <interface>: `), and there is no WARNING.

/// One transmit-hang line: the interface it names, its driver and queue when printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxLine {
    pub interface: String,
    pub driver: Option<String>,
    pub queue: Option<u32>,
    pub kind: TxKind,
}

/// Which report the line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// The stack's watchdog: a queue stopped for longer than the driver's `watchdog_timeo`.
    Watchdog,
    /// ENA: a transmitted packet whose completion did not come back in time.
    EnaMissing,
}

const WATCHDOG: &str = "NETDEV WATCHDOG: ";
const QUEUE: &str = "transmit queue ";
const ENA: &str = ": Found a Tx that wasn't completed on time";
/// Longest driver name kept (the kernel's are under 32).
const MAX_DRIVER: usize = 32;

/// Parses one kernel-log message.
pub fn parse(message: &str) -> Option<TxLine> {
    let m = message.trim();
    if let Some(at) = m.find(WATCHDOG) {
        return watchdog(&m[..at], &m[at + WATCHDOG.len()..]);
    }
    let at = m.find(ENA)?;
    let (driver, interface) = prefix(&m[..at])?;
    let rest = &m[at + ENA.len()..];
    let queue = rest
        .split_once("qid ")
        .and_then(|(_, q)| number(q.split(|c: char| !c.is_ascii_digit()).next()?));
    Some(TxLine {
        interface,
        driver,
        queue,
        kind: TxKind::EnaMissing,
    })
}

/// The watchdog's line: `before` is the `netdev_crit` prefix (6.8+, else empty), `after` what
/// follows `NETDEV WATCHDOG: `.
fn watchdog(before: &str, after: &str) -> Option<TxLine> {
    let queue_at = after.find(QUEUE)?;
    let queue = number(
        after[queue_at + QUEUE.len()..]
            .split(|c: char| !c.is_ascii_digit())
            .next()?,
    );
    if !after[queue_at..].contains("timed out") {
        return None;
    }
    let head = after[..queue_at].trim_end();
    let (driver, interface) = if before.trim().is_empty() {
        // `eth0 (e1000e):`
        let head = head.strip_suffix(':')?;
        let (name, driver) = match head.split_once(" (") {
            Some((name, d)) => (name, d.strip_suffix(')').and_then(driver_name)),
            None => (head, None),
        };
        (driver, interface_name(name)?)
    } else {
        prefix(before)?
    };
    Some(TxLine {
        interface,
        driver,
        queue,
        kind: TxKind::Watchdog,
    })
}

/// `<driver> <bus id> <interface>:` (the `netdev_printk` prefix, its colon already cut or
/// not): the driver when the device has a parent, and the interface.
fn prefix(p: &str) -> Option<(Option<String>, String)> {
    let p = p.trim().trim_end_matches(':');
    let words: Vec<&str> = p.split_whitespace().collect();
    let interface = interface_name(words.last()?)?;
    let driver = (words.len() >= 3).then(|| driver_name(words[0])).flatten();
    Some((driver, interface))
}

/// A valid interface name as the kernel allows it (`dev_valid_name`: 1–15 bytes, no `/`,
/// `:` or white space, not `.` or `..`), printable.
fn interface_name(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= 15
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != ':');
    ok.then(|| s.to_string())
}

fn driver_name(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= MAX_DRIVER
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    ok.then(|| s.to_string())
}

fn number(s: &str) -> Option<u32> {
    s.parse().ok()
}

#[cfg(test)]
mod tests;
