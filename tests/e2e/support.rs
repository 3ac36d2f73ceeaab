//! Helpers: the `node-doctor` binary under test, a fake host root, a running
//! `node-doctor serve`, a tiny HTTP/1.1 client and a Prometheus text-format parser.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The `node-doctor` binary Cargo built for this test run (`CARGO_BIN_EXE_node-doctor`: the
/// debug build under `cargo test`, the release build under `cargo test --release`).
pub fn node_doctor_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_node-doctor"))
}

/// The binary in the environment variable `var`, a path absolute or relative to the
/// workspace root; `None` when the variable is unset.
pub fn bin_from_env(var: &str) -> Option<PathBuf> {
    let p = std::env::var_os(var)?;
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p);
    assert!(p.is_file(), "{var}: no file {}", p.display());
    Some(p)
}

/// The binary the image ships, for the tests that run the agent as deployed: `$NODE_DOCTOR_BIN`
/// when set (`scripts/test.sh` builds `cargo build --release -p node-doctor` and sets it to
/// that), else [`node_doctor_bin`], with a note on stderr when that is a debug build.
pub fn shipped_bin() -> PathBuf {
    if let Some(p) = bin_from_env("NODE_DOCTOR_BIN") {
        return p;
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "note: NODE_DOCTOR_BIN is unset: running the debug build {} (scripts/test.sh runs the release build)",
            node_doctor_bin().display()
        );
    }
    node_doctor_bin()
}

/// True when the tests run as root (real-kernel tests need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// A host root with the /proc files of a quiet node (copied from this VM, kernel 6.18):
/// collectors that are merged later find sane values and report nothing alarming.
pub struct FakeRoot {
    pub dir: tempfile::TempDir,
}

impl FakeRoot {
    pub fn quiet() -> FakeRoot {
        let r = FakeRoot {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        r.write("/etc/hostname", "fake-host\n");
        r.write("/proc/loadavg", "0.12 0.10 0.05 1/94 21971\n");
        r.write("/proc/uptime", "86400.00 170000.00\n");
        r.write(
            "/proc/meminfo",
            "MemTotal:       24684084 kB\nMemFree:        21874744 kB\nMemAvailable:   24117824 kB\n\
Buffers:           43032 kB\nCached:          2411032 kB\nSwapCached:            0 kB\n\
Active:           902224 kB\nInactive:        1669952 kB\nSwapTotal:             0 kB\n\
SwapFree:              0 kB\nDirty:               124 kB\nSlab:             180412 kB\n\
SReclaimable:     121968 kB\nSUnreclaim:        58444 kB\n",
        );
        r.write(
            "/proc/stat",
            "cpu  1000 0 500 100000 10 0 5 0 0 0\ncpu0 500 0 250 50000 5 0 3 0 0 0\n\
cpu1 500 0 250 50000 5 0 2 0 0 0\nctxt 123456\nbtime 1763798400\nprocesses 22000\n\
procs_running 1\nprocs_blocked 0\n",
        );
        r.write("/sys/devices/system/cpu/online", "0-1\n");
        r
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, host_path: &str) -> PathBuf {
        self.dir.path().join(host_path.trim_start_matches('/'))
    }

    pub fn write(&self, host_path: &str, text: &str) {
        let p = self.path(host_path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, text).expect("write fake host file");
    }

    /// Writes `prefix` (believable text) and extends the file sparsely to `len` bytes: it reads
    /// as `len` bytes (zeros after the prefix) and costs no disk space.
    pub fn oversized(&self, host_path: &str, prefix: &str, len: u64) {
        self.write(host_path, prefix);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(self.path(host_path))
            .expect("open oversized file");
        f.set_len(len).expect("extend oversized file");
    }

    /// Replaces a host file by a FIFO with no writer: opening it blocks forever.
    pub fn fifo(&self, host_path: &str) {
        let p = self.path(host_path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        let _ = std::fs::remove_file(&p);
        nix::unistd::mkfifo(&p, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .unwrap_or_else(|e| panic!("mkfifo {}: {e}", p.display()));
    }
}

/// A loopback port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// A running `node-doctor serve`, killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: PathBuf,
    _logs: tempfile::TempDir,
}

impl Server {
    /// Starts `serve` against `root` and waits until /healthz answers.
    pub fn start(root: &Path, extra: &[&str]) -> Server {
        Server::start_bin(&node_doctor_bin(), root, extra)
    }

    /// As [`Server::start`], running the binary at `bin`.
    pub fn start_bin(bin: &Path, root: &Path, extra: &[&str]) -> Server {
        let mut args = vec!["--node-name", "e2e-node", "--log-format", "json"];
        args.extend_from_slice(extra);
        Server::spawn(bin, root, &args, |_| {})
    }

    /// Starts `serve --listen <free port> --host-root <root> <args>` (no node name unless
    /// `args` gives one, `NODE_NAME` unset), after `configure` has adjusted the command, and
    /// waits until /healthz answers.
    pub fn start_with(root: &Path, args: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        Server::spawn(&node_doctor_bin(), root, args, configure)
    }

    fn spawn(
        bin: &Path,
        root: &Path,
        args: &[&str],
        configure: impl FnOnce(&mut Command),
    ) -> Server {
        let logs = tempfile::tempdir().expect("tempdir");
        let stderr = logs.path().join("stderr.log");
        let port = free_port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg("--listen")
            .arg(addr.to_string())
            .arg("--host-root")
            .arg(root)
            .args(args)
            .env_remove("NODE_NAME")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"));
        configure(&mut cmd);
        let child = cmd.spawn().expect("spawn node-doctor serve");
        let mut s = Server {
            child,
            addr,
            stderr,
            _logs: logs,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = s.try_get("/healthz") {
                assert_eq!(r.status, 200);
                return s;
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                panic!("node-doctor serve exited early ({st}):\n{}", s.logs());
            }
            assert!(
                Instant::now() < deadline,
                "serve did not answer /healthz:\n{}",
                s.logs()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn try_get(&self, path: &str) -> std::io::Result<Response> {
        let mut c = Conn::open(self.addr)?;
        c.send(&format!(
            "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        ))?;
        c.read_response()
    }

    pub fn get(&self, path: &str) -> Response {
        self.try_get(path)
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.logs()))
    }

    /// Sends a raw request (with `Connection: close`) and reads one response.
    pub fn raw(&self, request: &str) -> Response {
        let mut c = Conn::open(self.addr).expect("connect");
        c.send(request).expect("send");
        c.head_only = request.starts_with("HEAD ");
        c.read_response().expect("response")
    }

    /// Polls /findings until `cond` holds on its JSON (up to `secs`).
    pub fn wait_findings(
        &self,
        secs: u64,
        what: &str,
        cond: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.get("/findings").json();
            if cond(&v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; last /findings:\n{v:#}\nlogs:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_ready(&self, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.get("/readyz").status != 200 {
            assert!(Instant::now() < deadline, "never ready:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, sig).expect("send a signal to node-doctor");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The running agent's memory (see [`memory_of`]).
    pub fn memory(&self) -> Memory {
        memory_of(self.pid())
            .unwrap_or_else(|| panic!("no memory figures of the agent\n{}", self.logs()))
    }

    /// How many sockets the agent has open (its listener, connections, and any others).
    pub fn open_sockets(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .expect("list the agent's fds")
            .filter_map(Result::ok)
            .filter(|e| {
                std::fs::read_link(e.path())
                    .map(|t| t.to_string_lossy().starts_with("socket:"))
                    .unwrap_or(false)
            })
            .count()
    }

    /// True while the process has not exited.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits until the logs contain `needle` (up to `secs`); returns the logs.
    pub fn wait_log(&self, secs: u64, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let logs = self.logs();
            if logs.contains(needle) {
                return logs;
            }
            assert!(
                Instant::now() < deadline,
                "no log line with {needle:?}:\n{logs}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the process to exit (up to `secs`).
    pub fn wait_exit(&mut self, secs: u64) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                return st;
            }
            assert!(Instant::now() < deadline, "did not exit:\n{}", self.logs());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Memory of a process, in KiB, from /proc/<pid>/status. Bounds are asserted on `anon_kib`
/// alone: VmRSS and VmHWM add the binary's file-backed pages, which the kernel faults in and
/// reclaims as it likes (an agent's VmRSS grew 7.8 MiB from one idle-connection flood to the
/// next while its RssAnon stayed at 4.0 MiB); they are printed, never bounded.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    pub rss_kib: u64,
    pub hwm_kib: u64,
    /// RssAnon: what the process allocated (heap and stacks), the figure bounds hold.
    pub anon_kib: u64,
}

/// The memory of process `pid`; `None` once it has exited (or on a kernel without these
/// fields).
pub fn memory_of(pid: u32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kib = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()
    };
    Some(Memory {
        rss_kib: kib("VmRSS:")?,
        hwm_kib: kib("VmHWM:")?,
        anon_kib: kib("RssAnon:")?,
    })
}

/// The highest RssAnon of a running process, read every 2 ms on a thread of its own until
/// [`AnonPeak::stop`]: /proc has a high-water mark of VmRSS (VmHWM, file pages included) but
/// none of RssAnon.
pub struct AnonPeak {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl AnonPeak {
    pub fn start(pid: u32) -> AnonPeak {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut peak = 0;
            while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                match memory_of(pid) {
                    Some(m) => peak = peak.max(m.anon_kib),
                    None => break,
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            peak
        });
        AnonPeak {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops sampling; the highest RssAnon seen, in KiB.
    pub fn stop(mut self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread
            .take()
            .map(|t| t.join().expect("the sampling thread"))
            .unwrap_or(0)
    }
}

impl Drop for AnonPeak {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

impl std::fmt::Display for Memory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "VmRSS {:.1} MiB, VmHWM {:.1} MiB, RssAnon {:.1} MiB",
            self.rss_kib as f64 / 1024.0,
            self.hwm_kib as f64 / 1024.0,
            self.anon_kib as f64 / 1024.0
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 connection (keep-alive capable).
pub struct Conn {
    reader: BufReader<TcpStream>,
    /// The request was HEAD: the response has headers only.
    pub head_only: bool,
}

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    /// Lower-cased names.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub fn json(&self) -> serde_json::Value {
        assert_eq!(self.status, 200, "body: {}", self.text());
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
}

impl Conn {
    pub fn open(addr: SocketAddr) -> std::io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn {
            reader: BufReader::new(s),
            head_only: false,
        })
    }

    pub fn send(&mut self, raw: &str) -> std::io::Result<()> {
        self.reader.get_mut().write_all(raw.as_bytes())
    }

    pub fn read_response(&mut self) -> std::io::Result<Response> {
        let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(bad("connection closed before a response"));
        }
        let status: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(&format!("bad status line {line:?}")))?;
        let mut headers = BTreeMap::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
            }
        }
        let chunked = headers
            .get("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let body = if self.head_only {
            Vec::new()
        } else if chunked {
            self.read_chunked()?
        } else {
            let len: usize = headers
                .get("content-length")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad("no content-length"))?;
            let mut body = vec![0; len];
            self.reader.read_exact(&mut body)?;
            body
        };
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

impl Conn {
    /// A chunked body (RFC 9112 §7.1): size lines in hex, the chunks, a zero-size last chunk
    /// and an empty trailer.
    fn read_chunked(&mut self) -> std::io::Result<Vec<u8>> {
        let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        let mut body = Vec::new();
        loop {
            let mut line = String::new();
            self.reader.read_line(&mut line)?;
            let size = line.trim_end().split(';').next().unwrap_or("");
            let n = usize::from_str_radix(size, 16)
                .map_err(|e| bad(format!("bad chunk size {line:?}: {e}")))?;
            if n == 0 {
                // Trailer lines up to the empty one.
                loop {
                    line.clear();
                    self.reader.read_line(&mut line)?;
                    if line.trim_end().is_empty() {
                        return Ok(body);
                    }
                }
            }
            let start = body.len();
            body.resize(start + n, 0);
            self.reader.read_exact(&mut body[start..])?;
            line.clear();
            self.reader.read_line(&mut line)?;
        }
    }
}

/// One sample of a parsed exposition.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// A parsed Prometheus / OpenMetrics text exposition.
#[derive(Debug, Default)]
pub struct Exposition {
    /// family name -> type
    pub types: BTreeMap<String, String>,
    pub helps: BTreeMap<String, String>,
    pub samples: Vec<Sample>,
}

impl Exposition {
    pub fn find(&self, name: &str) -> Vec<&Sample> {
        self.samples.iter().filter(|s| s.name == name).collect()
    }
}

fn is_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(ch) if ch.is_ascii_alphabetic() || ch == '_' || ch == ':')
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == ':')
}

/// Parses the text format strictly enough to catch encoding mistakes: valid names, quoted
/// and escaped label values, numeric values, TYPE before samples, every sample's family
/// typed, no duplicate series, and (OpenMetrics) `# EOF` last.
pub fn parse_exposition(text: &str) -> Result<Exposition, String> {
    let mut e = Exposition::default();
    let mut seen = std::collections::BTreeSet::new();
    let mut eof = false;
    for (n, line) in text.lines().enumerate() {
        let at = |m: String| format!("line {}: {m}: {line:?}", n + 1);
        if eof {
            return Err(at("content after # EOF".into()));
        }
        if line == "# EOF" {
            eof = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let kind = parts.next().unwrap_or("");
            let name = parts.next().unwrap_or("");
            let arg = parts.next().unwrap_or("");
            if !is_name(name) {
                return Err(at("bad family name".into()));
            }
            match kind {
                "TYPE" => {
                    let valid = [
                        "counter",
                        "gauge",
                        "histogram",
                        "summary",
                        "untyped",
                        "unknown",
                        "info",
                        "stateset",
                        "gaugehistogram",
                    ];
                    if !valid.contains(&arg) {
                        return Err(at("bad type".into()));
                    }
                    if e.types.insert(name.to_string(), arg.to_string()).is_some() {
                        return Err(at("duplicate TYPE".into()));
                    }
                }
                "HELP" => {
                    e.helps.insert(name.to_string(), arg.to_string());
                }
                "UNIT" => {}
                _ => return Err(at("unknown comment".into())),
            }
            continue;
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // name{labels} value [timestamp]
        let name_end = line.find(['{', ' ']).ok_or_else(|| at("no value".into()))?;
        let name = &line[..name_end];
        if !is_name(name) {
            return Err(at("bad metric name".into()));
        }
        let mut rest = &line[name_end..];
        let mut labels = BTreeMap::new();
        if let Some(r) = rest.strip_prefix('{') {
            let mut chars = r.char_indices().peekable();
            let mut end = None;
            loop {
                // label name
                let start = match chars.peek() {
                    Some(&(i, '}')) => {
                        end = Some(i + 1);
                        break;
                    }
                    Some(&(i, _)) => i,
                    None => break,
                };
                let mut eq = None;
                for (i, c) in chars.by_ref() {
                    if c == '=' {
                        eq = Some(i);
                        break;
                    }
                }
                let eq = eq.ok_or_else(|| at("label without =".into()))?;
                let lname = &r[start..eq];
                if !is_name(lname) {
                    return Err(at(format!("bad label name {lname:?}")));
                }
                if chars.next().map(|x| x.1) != Some('"') {
                    return Err(at("unquoted label value".into()));
                }
                let mut val = String::new();
                let mut closed = false;
                while let Some((_, c)) = chars.next() {
                    match c {
                        '\\' => match chars.next().map(|x| x.1) {
                            Some('n') => val.push('\n'),
                            Some('\\') => val.push('\\'),
                            Some('"') => val.push('"'),
                            other => return Err(at(format!("bad escape {other:?}"))),
                        },
                        '"' => {
                            closed = true;
                            break;
                        }
                        c => val.push(c),
                    }
                }
                if !closed {
                    return Err(at("unterminated label value".into()));
                }
                if labels.insert(lname.to_string(), val).is_some() {
                    return Err(at("duplicate label".into()));
                }
                match chars.next().map(|x| x.1) {
                    Some(',') => continue,
                    Some('}') => {
                        end = Some(chars.peek().map(|x| x.0).unwrap_or(r.len()));
                        break;
                    }
                    _ => return Err(at("expected , or }".into())),
                }
            }
            let end = end.ok_or_else(|| at("unterminated label set".into()))?;
            rest = &r[end..];
        }
        let mut fields = rest.split_whitespace();
        let value = fields.next().ok_or_else(|| at("no value".into()))?;
        let value: f64 = match value {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            v => v.parse().map_err(|_| at("bad value".into()))?,
        };
        if let Some(ts) = fields.next() {
            ts.parse::<f64>().map_err(|_| at("bad timestamp".into()))?;
        }
        if fields.next().is_some() {
            return Err(at("trailing fields".into()));
        }
        let family_typed = e.types.contains_key(name)
            || ["_total", "_created", "_bucket", "_sum", "_count", "_info"]
                .iter()
                .any(|suf| {
                    name.strip_suffix(suf)
                        .is_some_and(|base| e.types.contains_key(base))
                });
        if !family_typed {
            return Err(at("sample before its # TYPE".into()));
        }
        if !seen.insert(format!("{name}{labels:?}")) {
            return Err(at("duplicate series".into()));
        }
        e.samples.push(Sample {
            name: name.to_string(),
            labels,
            value,
        });
    }
    if text.contains("# EOF") && !eof {
        return Err("# EOF not on its own line".into());
    }
    Ok(e)
}

/// What [`run_measured`] saw of one run.
#[derive(Debug)]
pub struct Measured {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The child's peak RssAnon (see [`Memory`]), read every 2 ms, in KiB.
    pub peak_anon_kib: u64,
    pub took: Duration,
}

/// Runs `node-doctor <args>` (`NODE_NAME` unset, `env` added) to completion with stdout and
/// stderr in files, and measures its peak anonymous memory: RssAnon (what it allocates; see
/// [`Memory`]) read every 2 ms until the process exits. `wait4`'s `ru_maxrss` would not do: it
/// counts file pages, and Linux folds the forking parent's own peak into the child's at
/// `exec`. Kills the child and fails after `timeout`; a guard kills and reaps it if the
/// test fails meanwhile.
pub fn run_measured(args: &[&str], env: &[(&str, &str)], timeout: Duration) -> Measured {
    struct Reaper(Child);
    impl Drop for Reaper {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (out_path, err_path) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let mut c = Command::new(node_doctor_bin());
    c.args(args)
        .env_remove("NODE_NAME")
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"));
    for (k, v) in env {
        c.env(k, v);
    }
    let started = Instant::now();
    let mut child = Reaper(c.spawn().expect("run node-doctor"));
    let pid = child.0.id();
    let mut peak = 0;
    let status = loop {
        // Read the figure before asking whether it exited: the last reading is at most 2 ms
        // before the exit.
        if let Some(m) = memory_of(pid) {
            peak = peak.max(m.anon_kib);
        }
        if let Some(st) = child.0.try_wait().expect("try_wait") {
            break st;
        }
        assert!(
            started.elapsed() < timeout,
            "node-doctor {args:?} did not finish within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(2));
    };
    drop(child);
    Measured {
        status,
        stdout: std::fs::read(&out_path).expect("read stdout"),
        stderr: std::fs::read(&err_path).expect("read stderr"),
        peak_anon_kib: peak,
        took: started.elapsed(),
    }
}

/// A FUSE connection whose server never answers: every file mounted from it blocks whoever
/// touches it (`stat`, `open`, `read`), as a hung NFS or FUSE mount does. [`HungFs::mount_in`]
/// mounts it over a host file in the child's own mount namespace, so nothing else on the
/// machine sees it. Dropping it closes the connection, which fails the blocked calls.
/// Needs root and `/dev/fuse`.
pub struct HungFs {
    dev: std::fs::File,
}

impl HungFs {
    /// Opens `/dev/fuse`; `Err` says why not (not root, no FUSE).
    pub fn open() -> Result<HungFs, String> {
        if !is_root() {
            return Err("needs root to mount FUSE".into());
        }
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .map(|dev| HungFs { dev })
            .map_err(|e| format!("cannot open /dev/fuse: {e}"))
    }

    /// Makes `cmd`'s child, before it runs, enter a new mount namespace and mount this
    /// connection over `file` (an existing regular file): in the child, `file` blocks.
    pub fn mount_in(&self, cmd: &mut Command, file: &Path) {
        use std::ffi::CString;
        use std::os::fd::AsRawFd;
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        // Everything is allocated before fork: the hook runs only system calls.
        let target = CString::new(file.as_os_str().as_bytes()).expect("path without NUL");
        let opts = CString::new(format!(
            "fd={},rootmode=100000,user_id=0,group_id=0",
            self.dev.as_raw_fd()
        ))
        .expect("options");
        let (source, fstype, slash) = (c"node-doctor-e2e", c"fuse", c"/");
        let hook = move || {
            use nix::libc::{mount, unshare, CLONE_NEWNS, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_REC};
            let err = std::io::Error::last_os_error;
            // SAFETY: plain system calls on NUL-terminated strings that live in the closure.
            unsafe {
                if unshare(CLONE_NEWNS) != 0 {
                    return Err(err());
                }
                // Mounts made here must not propagate back to the test's namespace.
                let none = std::ptr::null();
                if mount(
                    none,
                    slash.as_ptr(),
                    none,
                    MS_REC | MS_PRIVATE,
                    std::ptr::null(),
                ) != 0
                {
                    return Err(err());
                }
                if mount(
                    source.as_ptr(),
                    target.as_ptr(),
                    fstype.as_ptr(),
                    MS_NOSUID | MS_NODEV,
                    opts.as_ptr().cast(),
                ) != 0
                {
                    return Err(err());
                }
            }
            Ok(())
        };
        // SAFETY: the hook allocates nothing and calls only async-signal-safe functions.
        unsafe {
            cmd.pre_exec(hook);
        }
    }
}

/// Runs `node-doctor <args>` to completion.
pub fn run(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut c = Command::new(node_doctor_bin());
    c.args(args).env_remove("NODE_NAME");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run node-doctor")
}

/// The agent binary for tests that measure it: `$NODE_DOCTOR_E2E_BIN` when set (e.g.
/// `target/release/node-doctor`, relative to the workspace root, to measure the release
/// build with the same test), else the debug build every other test runs.
pub fn agent_bin() -> PathBuf {
    bin_from_env("NODE_DOCTOR_E2E_BIN").unwrap_or_else(node_doctor_bin)
}

/// Raises this process's open-file limit to at least `n` (children inherit it). Root may
/// raise the hard limit too; otherwise up to the hard limit. Returns the new soft limit.
pub fn raise_nofile(n: u64) -> u64 {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft >= n {
        return soft;
    }
    if setrlimit(Resource::RLIMIT_NOFILE, n, hard.max(n)).is_ok() {
        return n;
    }
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    getrlimit(Resource::RLIMIT_NOFILE)
        .map(|l| l.0)
        .unwrap_or(soft)
}

/// Runs `node-doctor <args>`, killing it after `timeout`. Returns its output and how long
/// it ran, or `None` (after killing it) when it was still running at the timeout.
pub fn run_with_timeout(
    args: &[&str],
    timeout: Duration,
) -> Option<(std::process::Output, Duration)> {
    let dir = tempfile::tempdir().expect("tempdir");
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    /// Kills the child when the caller returns or panics.
    struct Reaped(Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let started = Instant::now();
    let mut child = Reaped(
        Command::new(node_doctor_bin())
            .args(args)
            .env_remove("NODE_NAME")
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&err).expect("stderr file"))
            .spawn()
            .expect("spawn node-doctor"),
    );
    let status = loop {
        if let Some(st) = child.0.try_wait().expect("try_wait") {
            break st;
        }
        if started.elapsed() > timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let output = std::process::Output {
        status,
        stdout: std::fs::read(&out).unwrap_or_default(),
        stderr: std::fs::read(&err).unwrap_or_default(),
    };
    Some((output, started.elapsed()))
}

#[test]
fn the_exposition_parser_rejects_broken_text() {
    let good = "# HELP a_total A.\n# TYPE a counter\na_total{x=\"1\",y=\"q\\\"\"} 3.0\n# TYPE b gauge\nb 1\n# EOF\n";
    let e = parse_exposition(good).unwrap();
    assert_eq!(e.samples.len(), 2);
    assert_eq!(e.samples[0].labels["y"], "q\"");
    for bad in [
        "b 1\n",
        "# TYPE b gauge\nb{x=1} 1\n",
        "# TYPE b gauge\nb{x=\"1\" 1\n",
        "# TYPE b gauge\nb one\n",
        "# TYPE b gauge\nb 1\nb 1\n",
        "# TYPE b gauge\n# EOF\nb 1\n",
        "# TYPE b bogus\n",
        "# TYPE 1b gauge\n",
    ] {
        assert!(parse_exposition(bad).is_err(), "{bad:?}");
    }
}

/// Serialises the tests that load the machine (fio's direct writes) with the tests that time
/// the agent's answers (the 100 ms bound while a collector hangs): on a 2-core CI machine the
/// first would otherwise make the second measure CPU starvation, not the agent.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the memory bounds measure: a process that maps and reads a 64 MiB file grows its
/// VmRSS by the file's pages but not its RssAnon; allocating 64 MiB grows RssAnon, and
/// [`AnonPeak`] sees the allocation even after it is freed. The process is Python's
/// (`python3`, which scripts/test.sh's APT_PACKAGES installs).
#[test]
fn memory_counts_what_a_process_allocates_not_its_file_pages() {
    const TEST: &str = "memory_counts_what_a_process_allocates_not_its_file_pages";
    const MIB: u64 = 1024;
    const SCRIPT: &str = "import mmap, sys, time\n\
        f = open(sys.argv[1], 'rb')\n\
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)\n\
        s = sum(m[i] for i in range(0, len(m), 4096))\n\
        print('mapped', s, flush=True)\n\
        sys.stdin.readline()\n\
        b = b'\\x01' * (64 << 20)\n\
        time.sleep(0.2)\n\
        del b\n\
        print('freed', flush=True)\n\
        sys.stdin.readline()\n";
    struct Reaped(Child);
    impl Drop for Reaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("data");
    std::fs::write(&file, vec![7u8; 64 << 20]).expect("write the file");
    let child = Command::new("python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(&file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => Reaped(c),
        Err(e) => {
            collectors::skip!("SKIP {TEST}: python3 does not run ({e})");
            return;
        }
    };
    let pid = child.0.id();
    let mut out = BufReader::new(child.0.stdout.take().expect("stdout"));
    let mut input = child.0.stdin.take().expect("stdin");
    let mut line = String::new();
    out.read_line(&mut line).expect("read");
    assert!(line.starts_with("mapped"), "{line:?}");
    let mapped = memory_of(pid).expect("the child's memory");
    assert!(
        mapped.rss_kib >= mapped.anon_kib + 60 * MIB,
        "the file's pages are not in VmRSS: {mapped}"
    );
    assert!(mapped.anon_kib < 48 * MIB, "{mapped}");

    let peak = AnonPeak::start(pid);
    writeln!(input, "go").expect("write");
    line.clear();
    out.read_line(&mut line).expect("read");
    assert_eq!(line, "freed\n");
    let peak = peak.stop();
    let freed = memory_of(pid).expect("the child's memory");
    println!("{TEST}: mapped: {mapped}; RssAnon peak {peak} KiB; freed: {freed}");
    assert!(
        peak >= mapped.anon_kib + 60 * MIB,
        "the 64 MiB allocation was not seen: peak {peak} KiB, {mapped}"
    );
    assert!(
        freed.anon_kib + 32 * MIB < peak,
        "{freed} after a peak of {peak} KiB"
    );
}

/// (busy, total) CPU ticks of /proc/stat's `cpu` line (busy: all but idle and iowait).
pub fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let v: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .take(8)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// `(comm, utime+stime in seconds)` of a `stat` file's text.
pub fn parse_stat(text: &str, tick: f64) -> Option<(String, f64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // After the comm: state is field 3, utime 14, stime 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, (utime + stime) as f64 / tick))
}
