//! Generators shared by the readers' well-formed-input properties: each reader's test module
//! builds typed values from these, renders them the way the kernel prints them, parses the
//! text and compares. Random text (`\PC*`) seldom gets past a parser's first check; these
//! inputs exercise the path that reads valid files.

use proptest::prelude::*;

/// A kernel object name as `/proc` prints it: devices (`vda1`, `nvme0n1p2`, `dm-0`), zones,
/// interfaces. Starts with a letter, no spaces.
pub fn kernel_name() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_-]{0,11}"
}

/// A fixed-point value the kernel prints as `%lu.%02lu` (load averages, PSI averages,
/// uptime), held as hundredths so the expected `f64` is exact to compare.
pub fn hundredths(max_whole: u64) -> impl Strategy<Value = u64> {
    0..=max_whole * 100 + 99
}

/// `%lu.%02lu` of a value in hundredths.
pub fn fmt_hundredths(h: u64) -> String {
    format!("{}.{:02}", h / 100, h % 100)
}

/// What a parser that reads `%lu.%02lu` into an `f64` should return for it.
pub fn hundredths_f64(h: u64) -> f64 {
    h as f64 / 100.0
}

/// A counter name as `/proc` tables print them (`nr_free_pages`, `pgmajfault`).
pub fn kernel_key() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9_]{0,23}"
}

/// Per-CPU statistics rows as `net/*` statistics files print them: one line per CPU, every
/// column `%08x` (wider values print in full, as `%08lx` does).
pub fn hex_rows(rows: &[Vec<u64>]) -> String {
    let mut text = String::new();
    for row in rows {
        let cols: Vec<String> = row.iter().map(|v| format!("{v:08x}")).collect();
        text += &cols.join(" ");
        text.push('\n');
    }
    text
}

/// A `net/stat/*` table: the header line naming the columns, then [`hex_rows`].
pub fn hex_cpu_table(header: &str, rows: &[Vec<u64>]) -> String {
    format!("{header}\n{}", hex_rows(rows))
}

/// An address as `/proc/net/{tcp,udp}{,6}` print it: each 32-bit word of the network-order
/// address as `%08X` of the word the host reads (bytes swapped on little-endian), `:%04X` port.
pub fn proc_net_address(a: std::net::SocketAddr) -> String {
    let words = |b: &[u8]| -> String {
        b.chunks_exact(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect()
    };
    let ip = match a.ip() {
        std::net::IpAddr::V4(v4) => words(&v4.octets()),
        std::net::IpAddr::V6(v6) => words(&v6.octets()),
    };
    format!("{ip}:{:04X}", a.port())
}

/// A socket address of one family (`v6`): any address and port, no flow or scope.
pub fn socket_addr(v6: bool) -> BoxedStrategy<std::net::SocketAddr> {
    if v6 {
        (any::<std::net::Ipv6Addr>(), any::<u16>())
            .prop_map(|(ip, port)| std::net::SocketAddr::new(ip.into(), port))
            .boxed()
    } else {
        (any::<std::net::Ipv4Addr>(), any::<u16>())
            .prop_map(|(ip, port)| std::net::SocketAddr::new(ip.into(), port))
            .boxed()
    }
}

/// One line of `/proc/net/{tcp,udp}{,6}` up to the inode (`%5d: %s %s %02X %08X:%08X
/// %02X:%08lX %08X %5u %8d %lu`), then `tail`, the protocol's own columns.
pub fn proc_net_socket_line(
    sl: u32,
    (local, remote): (std::net::SocketAddr, std::net::SocketAddr),
    state: u8,
    (uid, inode): (u32, u64),
    tail: &str,
) -> String {
    format!(
        "{sl:5}: {} {} {state:02X} 00000000:00000000 00:00000000 00000000 {uid:5} {:8} {inode} {tail}\n",
        proc_net_address(local),
        proc_net_address(remote),
        0,
    )
}

/// A task's `comm` (at most 15 bytes) in the shapes kernel threads and daemons give it:
/// `kworker/u8:2`, `jbd2/vda1-8`, `runc:[1:CHILD]`, `mysqld`.
pub fn comm() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_.-]{1,6}([/:][a-z0-9.-]{1,4}){0,2}|runc:\\[[0-2]:(PARENT|CHILD)\\]"
}

/// A block device name as the drivers make them (`sda1`, `vdb`, `nvme0n1p2`, `dm-0`, `loop3`).
pub fn block_device() -> impl Strategy<Value = String> {
    "(sd|vd|xvd)[a-z][0-9]{0,2}|nvme[0-9]n[1-9](p[1-9])?|dm-[0-9]{1,2}|loop[0-9]{1,2}|md[0-9]{1,3}"
}

/// An RFC 3339 timestamp of Unix second `t` in the fixed zone `offset_hours`, with `frac`
/// (`""`, `".123"`, `".123456789"`) after the seconds and `Z` for UTC when `zulu`.
pub fn rfc3339(t: i64, frac: &str, offset_hours: i8, zulu: bool) -> String {
    let tz = jiff::tz::TimeZone::fixed(jiff::tz::offset(offset_hours));
    let dt = jiff::Timestamp::from_second(t)
        .map_or_else(|_| jiff::civil::DateTime::ZERO, |ts| tz.to_datetime(ts));
    let zone = if zulu && offset_hours == 0 {
        "Z".to_string()
    } else {
        let sign = if offset_hours < 0 { '-' } else { '+' };
        format!("{sign}{:02}:00", offset_hours.unsigned_abs())
    };
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{frac}{zone}",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
    )
}
