//! The HTTP server's bounds against clients that hold connections open, send headers slowly
//! or send too much (agent/src/server.rs, agent/src/connections.rs): the agent's memory
//! stays bounded and a legitimate client is still answered.
//!
//! The flood tests measure whichever binary `support::agent_bin()` names: the debug build by
//! default, the release build with
//! `NODE_DOCTOR_E2E_BIN=target/release/node-doctor cargo test -p node-doctor --test e2e server_limits -- --nocapture`.
//! They print their figures (RssAnon and its peak, VmRSS, sockets held, /findings latency) to
//! stderr; the bounds hold RssAnon, what the agent allocates (support::Memory says why not
//! VmRSS).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use crate::support::{
    agent_bin, exclusive, parse_exposition, raise_nofile, AnonPeak, Conn, FakeRoot, Memory, Server,
};

/// The agent's anonymous memory (RssAnon: heap and stacks, what a flood grows) under a flood,
/// at its peak too: at most half the DaemonSet's 64 MiB memory limit.
const ANON_LIMIT_KIB: u64 = 32 * 1024;
/// `server::MAX_CONNECTIONS`.
const MAX_CONNECTIONS: usize = 256;

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// Opens `n` connections to `addr`, writing `first` on each (nothing when empty), and keeps
/// them open. The agent may close any of them at once (shedding); that is not an error.
fn flood(addr: SocketAddr, n: usize, first: &[u8]) -> Vec<TcpStream> {
    let mut v = Vec::with_capacity(n);
    for i in 0..n {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("flood connection {i} of {n}: {e}"));
        if !first.is_empty() {
            let _ = (&s).write_all(first);
        }
        v.push(s);
    }
    v
}

/// Raises RLIMIT_NOFILE so this process can hold `n` connections. As root (CI) that must
/// work; a user whose hard limit is lower skips, saying why (`test` names it).
fn can_hold(test: &str, n: usize) -> bool {
    let nofile = raise_nofile(n as u64 + 2048);
    if nofile >= n as u64 + 1024 {
        return true;
    }
    assert!(
        !crate::support::is_root(),
        "RLIMIT_NOFILE is {nofile} even for root: cannot hold {n} connections"
    );
    collectors::skip!(
        "SKIP {test}: RLIMIT_NOFILE hard limit {nofile} is too low for {n} connections (run as \
         root)"
    );
    false
}

/// Waits until the agent holds no more sockets than `idle`; returns how long (printed, not
/// asserted). `within` is a failure guard, several times the agent's own 5 s timeouts.
fn wait_sockets_back_to(s: &Server, idle: usize, within: Duration) -> Duration {
    let t = Instant::now();
    loop {
        let n = s.open_sockets();
        if n <= idle {
            return t.elapsed();
        }
        assert!(
            t.elapsed() < within,
            "the agent still holds {} connections after {within:?}",
            n - idle
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh `GET /findings` on its own connection: must be a 200 with the JSON document.
fn timed_findings(s: &Server) -> Duration {
    let t = Instant::now();
    let r = s.get("/findings");
    let took = t.elapsed();
    let v = r.json();
    assert_eq!(v["node"], "e2e-node");
    took
}

/// A fresh `GET /findings` during a flood of sockets the agent holds (`idle` its own before):
/// answered, and answered *while* the flood is still held — not queued behind it until the
/// agent cuts or sheds it (ordering, not a wall-clock bound; the latency is only printed).
/// Returns the latency.
fn findings_while_flood_held(s: &Server, idle: usize) -> Duration {
    let latency = timed_findings(s);
    let held_after = s.open_sockets().saturating_sub(idle);
    assert!(
        held_after >= MAX_CONNECTIONS / 2,
        "/findings answered only after the flood let go: the agent holds {held_after} of its \
         connections afterwards (answered in {latency:?})"
    );
    latency
}

fn assert_bounded(what: &str, m: Memory) {
    assert!(
        m.anon_kib < ANON_LIMIT_KIB,
        "{what}: {m}, over the bound (RssAnon {} MiB)",
        ANON_LIMIT_KIB / 1024
    );
}

/// The peak RssAnon a flood reached (sampled every 2 ms while it lasted).
fn assert_peak_bounded(what: &str, peak_kib: u64) {
    assert!(
        peak_kib < ANON_LIMIT_KIB,
        "{what}: RssAnon peaked at {:.1} MiB, over the bound ({} MiB)",
        mib(peak_kib),
        ANON_LIMIT_KIB / 1024
    );
}

/// `node_doctor_http_connections_shed_total{reason}` as the agent exports it.
fn shed_count(s: &Server, reason: &str) -> f64 {
    let text = s.get("/metrics").text();
    let exp = parse_exposition(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    exp.find("node_doctor_http_connections_shed_total")
        .into_iter()
        .find(|m| m.labels.get("reason").map(String::as_str) == Some(reason))
        .map(|m| m.value)
        .unwrap_or_else(|| panic!("no shed counter for {reason}:\n{text}"))
}

/// 10,000 idle connections, twice: the agent keeps at most MAX_CONNECTIONS of them (closing
/// the longest-idle one to admit each new one), its memory stays under 32 MiB, a fresh
/// client is answered at once, and after each flood closes the agent is back where it was.
#[test]
fn an_idle_connection_flood_is_shed_and_the_agent_keeps_answering() {
    const FLOOD: usize = 10_000;
    let _machine = exclusive();
    if !can_hold(
        "an_idle_connection_flood_is_shed_and_the_agent_keeps_answering",
        FLOOD,
    ) {
        return;
    }
    let root = FakeRoot::quiet();
    let s = Server::start_bin(&agent_bin(), root.root(), &[]);
    s.wait_ready(30);
    let idle_sockets = s.open_sockets();
    let start = s.memory();
    let first = timed_findings(&s);
    eprintln!("flood: before: {start}, /findings {first:?}");

    let mut after_rounds = Vec::new();
    for round in 1..=2 {
        let peak = AnonPeak::start(s.pid());
        let t = Instant::now();
        let conns = flood(s.addr, FLOOD, b"");
        let opened = t.elapsed();
        std::thread::sleep(Duration::from_millis(500));
        let during = s.memory();
        let held = s.open_sockets().saturating_sub(idle_sockets);
        let latency = findings_while_flood_held(&s, idle_sockets);
        let peak = peak.stop();
        eprintln!(
            "flood round {round}: {FLOOD} idle connections opened in {opened:.2?}; agent holds \
             {held}; during: {during}, RssAnon peak {:.1} MiB; fresh GET /findings answered \
             in {latency:.2?}",
            mib(peak)
        );
        assert_bounded("during the idle flood", during);
        assert_peak_bounded("the idle flood", peak);
        assert!(
            held <= MAX_CONNECTIONS + 8,
            "the agent holds {held} connections (cap {MAX_CONNECTIONS})"
        );
        drop(conns);
        let drained = wait_sockets_back_to(&s, idle_sockets, Duration::from_secs(60));
        let latency = timed_findings(&s);
        let after = s.memory();
        eprintln!(
            "flood round {round}: closed; the agent released its connections in \
             {drained:.2?}; after: {after}; /findings {latency:.2?}"
        );
        assert_bounded("after the idle flood", after);
        after_rounds.push(after);
    }
    // A second flood costs nothing more: memory returned to the allocator is reused.
    let growth = after_rounds[1]
        .anon_kib
        .saturating_sub(after_rounds[0].anon_kib);
    assert!(
        growth < 2 * 1024,
        "RssAnon grew {:.1} MiB from one flood to the next ({} then {})",
        mib(growth),
        after_rounds[0],
        after_rounds[1]
    );
    // Every connection closed at the cap is counted: two floods of 10,000 into 256 places.
    let shed = shed_count(&s, "limit");
    assert!(
        shed >= (2 * (FLOOD - MAX_CONNECTIONS)) as f64,
        "node_doctor_http_connections_shed_total{{reason=\"limit\"}} is {shed}"
    );
    // Shedding is logged at most once a minute, never a line per connection.
    let logs = s.logs();
    let lines = logs
        .lines()
        .filter(|l| l.contains("at the connection limit"))
        .count();
    assert!(
        (1..=3).contains(&lines),
        "{lines} shedding log lines:\n{logs}"
    );
}

/// 2,000 connections that send the start of a request and never finish it: the agent holds
/// at most MAX_CONNECTIONS, stays under 32 MiB, answers a fresh client, and closes the
/// partial requests after the header timeout (5 s) although the clients keep them open.
#[test]
fn slow_partial_headers_are_bounded_and_cut_off() {
    const FLOOD: usize = 2_000;
    let _machine = exclusive();
    if !can_hold("slow_partial_headers_are_bounded_and_cut_off", FLOOD) {
        return;
    }
    let root = FakeRoot::quiet();
    let s = Server::start_bin(&agent_bin(), root.root(), &[]);
    s.wait_ready(30);
    let idle_sockets = s.open_sockets();
    let start = s.memory();

    let peak = AnonPeak::start(s.pid());
    let t = Instant::now();
    let conns = flood(s.addr, FLOOD, b"GET /findings HTTP/1.1\r\nX-A: ");
    let opened = t.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let during = s.memory();
    let held = s.open_sockets().saturating_sub(idle_sockets);
    let latency = findings_while_flood_held(&s, idle_sockets);
    let peak = peak.stop();
    eprintln!(
        "partial headers: before: {start}; {FLOOD} partial requests sent in {opened:.2?}; agent \
         holds {held}; during: {during}, RssAnon peak {:.1} MiB; fresh GET /findings answered \
         in {latency:.2?}",
        mib(peak)
    );
    assert_bounded("during the partial-header flood", during);
    assert_peak_bounded("the partial-header flood", peak);
    assert!(held <= MAX_CONNECTIONS + 8, "the agent holds {held}");
    // The clients keep their sockets open; the agent gives up on them by itself.
    let cut = wait_sockets_back_to(&s, idle_sockets, Duration::from_secs(60));
    let after = s.memory();
    eprintln!("partial headers: the agent closed them {cut:.2?} later; after: {after}");
    assert_bounded("after the partial-header flood", after);
    drop(conns);
    timed_findings(&s);
}

enum Outcome {
    Status(u16),
    /// Closed or reset before a status line arrived.
    Closed,
}

/// Sends `request` (ignoring a write cut short by the agent closing) and reads the status
/// line, if any.
fn send_raw(addr: SocketAddr, request: &[u8]) -> Outcome {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = s.write_all(request);
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(2).any(|w| w == b"\r\n") {
                    break;
                }
            }
        }
    }
    let line = String::from_utf8_lossy(&got);
    match line.split_whitespace().nth(1).and_then(|c| c.parse().ok()) {
        Some(code) => Outcome::Status(code),
        None if got.is_empty() => Outcome::Closed,
        None => panic!("not an HTTP response: {line:?}"),
    }
}

#[test]
fn oversized_or_too_many_headers_are_refused() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    let request = |headers: &str| {
        format!("GET /findings HTTP/1.1\r\nHost: x\r\n{headers}Connection: close\r\n\r\n")
    };
    // One 100 KB header, and one just over the 8 KiB limit: 431, or the connection closed
    // (the agent may reset it while the client is still sending); never served.
    for size in [100_000, 8 * 1024 + 1] {
        let big = request(&format!("X-Big: {}\r\n", "a".repeat(size)));
        match send_raw(s.addr, big.as_bytes()) {
            Outcome::Status(431) | Outcome::Closed => {}
            Outcome::Status(code) => panic!("a {size}-byte header got {code}"),
        }
    }
    // Many small headers (150, 1.7 KB in all; the limit is 100): 431.
    let many: String = (0..150).map(|i| format!("X-H{i}: 1\r\n")).collect();
    match send_raw(s.addr, request(&many).as_bytes()) {
        Outcome::Status(code) => assert_eq!(code, 431, "150 headers"),
        Outcome::Closed => panic!("150 headers: closed without a 431"),
    }
    // The limits leave room for a real client: a 4 KB header and 50 headers are served.
    let fine = request(&format!("X-Pad: {}\r\n", "a".repeat(4000)));
    assert_eq!(s.raw(&fine).status, 200);
    let fifty: String = (0..50).map(|i| format!("X-H{i}: 1\r\n")).collect();
    assert_eq!(s.raw(&request(&fifty)).status, 200);
    // The agent is unharmed.
    assert_eq!(s.get("/healthz").status, 200);
}

/// A connection that sends nothing, and a keep-alive connection idle after its response,
/// are both closed after the 5 s header timeout.
#[test]
fn idle_connections_are_closed_after_the_header_timeout() {
    let root = FakeRoot::quiet();
    let s = Server::start(root.root(), &[]);
    let mut silent = TcpStream::connect(s.addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let opened = Instant::now();
    let mut kept = Conn::open(s.addr).unwrap();
    kept.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert_eq!(kept.read_response().unwrap().status, 200);
    let answered = Instant::now();

    let mut buf = [0u8; 64];
    let read = silent.read(&mut buf);
    let waited = opened.elapsed();
    // Closed by the agent (end of file), not our 20 s read timeout: the order of the two
    // timeouts, not a wall-clock bound. Not before the 5 s either (load only delays a close).
    assert!(
        matches!(read, Ok(0)),
        "the silent connection was not closed by the agent: {read:?} ({:?})",
        buf
    );
    assert!(
        waited >= Duration::from_millis(4500),
        "a silent connection closed after {waited:?}"
    );
    // The keep-alive connection's next read sees the close (it may already have happened),
    // not its own 10 s read timeout.
    let next = kept.read_response().map(|r| r.status);
    assert!(
        matches!(&next, Err(e) if !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        "the idle keep-alive connection was not closed: {next:?}"
    );
    // The silent one is counted as shed (the keep-alive one had its request: hyper's own
    // idle timeout, not shedding); the other reason stays at 0.
    assert_eq!(shed_count(&s, "no_request"), 1.0);
    assert_eq!(shed_count(&s, "limit"), 0.0);
    let idle = answered.elapsed();
    assert!(
        idle >= Duration::from_millis(4500),
        "an idle keep-alive connection closed after {idle:?}"
    );
}
