//! A real browser: Debian's `chromium`, headless, driven over the DevTools protocol. It talks
//! over `--remote-debugging-pipe` (the protocol's JSON messages, NUL-separated, on fds 3 and
//! 4) rather than a websocket: no port to find or leak, no client crate, and the pipe closes
//! when the browser dies. [`render`] opens a URL or a file and returns what a person would
//! see ([`Facts`]): the rendered DOM's findings, figures and widths, the fonts that drew its
//! Chinese text, every console error and request, and a screenshot. The node page's test
//! ([`check_node_page`]) and any other page's (the fleet report's) read the same facts.
//!
//! The browser and all its children run in a process group of their own, killed on drop
//! (also when a test fails), with a temporary profile.

use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long one protocol call may take (a page load on a busy 2-CPU machine included).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The browser binary, or why there is none (the caller prints SKIP).
pub fn chromium() -> Result<PathBuf, String> {
    for p in ["/usr/bin/chromium", "/usr/bin/chromium-browser"] {
        if Path::new(p).is_file() {
            return Ok(PathBuf::from(p));
        }
    }
    Err("no chromium (Debian's `chromium` package; scripts/test.sh installs it)".into())
}

/// One SVG as rendered.
#[derive(Debug, Clone, Default)]
pub struct Svg {
    pub kind: String,
    pub subject: String,
    /// Its box on the page, and the bounding box of what it drew.
    pub width: f64,
    pub bbox_width: f64,
    pub bbox_height: f64,
    /// Each path's class, the length of its `d` and its rendered length.
    pub paths: Vec<(String, usize, f64)>,
    pub dots: usize,
    /// The crossing ring's `data-t`, `cx`, `cy`.
    pub crossing: Option<(f64, f64, f64)>,
}

impl Svg {
    /// The rendered length of its path of class `class` (0 when it has none).
    pub fn drawn(&self, class: &str) -> f64 {
        self.paths
            .iter()
            .filter(|p| p.0 == class && p.1 > 0)
            .map(|p| p.2)
            .sum()
    }
}

/// What the browser rendered, at one viewport size.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub url: String,
    pub title: String,
    pub lang: String,
    pub viewport: (u32, u32),
    pub scroll_width: f64,
    pub client_width: f64,
    pub inner_height: f64,
    /// `data-finding` of every element that has one, in page order.
    pub findings: Vec<String>,
    pub headings: Vec<String>,
    pub svgs: Vec<Svg>,
    /// Bottom edge of `#overview` (page coordinates, unscrolled), when there is one.
    pub overview_bottom: Option<f64>,
    /// The first element whose own text holds CJK characters: its text, the rendered width of
    /// that text, and the platform fonts that drew it (family, glyphs).
    pub cjk_text: Option<String>,
    pub cjk_width: f64,
    pub cjk_fonts: Vec<(String, u64)>,
    /// Console errors, warnings from the browser's log, uncaught exceptions.
    pub console: Vec<String>,
    /// Every request the page made.
    pub requests: Vec<String>,
    /// The elements wider than the viewport (tag.class), for a failure message.
    pub too_wide: Vec<String>,
    pub text: String,
    pub screenshot: Option<PathBuf>,
}

/// A running headless chromium, killed with its children on drop.
pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: Receiver<Value>,
    next: u64,
    /// Events received while waiting for an answer.
    events: Vec<Value>,
    _profile: tempfile::TempDir,
}

impl Drop for Browser {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))
}

impl Browser {
    pub fn launch() -> Result<Browser, String> {
        let bin = chromium()?;
        let profile = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (cmd_r, cmd_w) = pipe()?;
        let (out_r, out_w) = pipe()?;
        let (cr, ow) = (cmd_r.as_raw_fd(), out_w.as_raw_fd());
        let mut cmd = Command::new(bin);
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(profile.path().join("stderr.log")).map_err(|e| e.to_string())?,
        )
        .process_group(0);
        // SAFETY: only dup2 (async-signal-safe) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                // Out of the way first: either pipe may already sit on fd 3 or 4.
                let high = [
                    sys::fcntl(cr, sys::F_DUPFD, 10),
                    sys::fcntl(ow, sys::F_DUPFD, 10),
                ];
                for (from, to) in high.into_iter().zip([3, 4]) {
                    if from < 0 || sys::dup2(from, to) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("spawn chromium: {e}"))?;
        drop((cmd_r, out_w));
        let (tx, from) = std::sync::mpsc::channel();
        let reader = std::fs::File::from(out_r);
        std::thread::spawn(move || {
            let mut r = BufReader::new(reader);
            let mut buf = Vec::new();
            while r.read_until(0, &mut buf).is_ok_and(|n| n > 0) {
                if buf.last() == Some(&0) {
                    buf.pop();
                }
                if let Ok(v) = serde_json::from_slice::<Value>(&buf) {
                    if tx.send(v).is_err() {
                        break;
                    }
                }
                buf.clear();
            }
        });
        Ok(Browser {
            child,
            to: std::fs::File::from(cmd_w),
            from,
            next: 0,
            events: Vec::new(),
            _profile: profile,
        })
    }

    /// The end of chromium's stderr (why it stopped).
    fn stderr_tail(&self) -> String {
        let log =
            std::fs::read_to_string(self._profile.path().join("stderr.log")).unwrap_or_default();
        let start = log.len().saturating_sub(2000);
        log.get(start..).unwrap_or_default().to_string()
    }

    /// Sends one command (to a page's session when given) and waits for its answer.
    pub fn call(
        &mut self,
        session: Option<&str>,
        method: &str,
        params: Value,
    ) -> Result<Value, String> {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).map_err(|e| e.to_string())?;
        bytes.push(0);
        self.to
            .write_all(&bytes)
            .map_err(|e| format!("{method}: write to chromium: {e}: {}", self.stderr_tail()))?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let v = self.recv(deadline, method)?;
            if v["id"] == json!(id) {
                if let Some(e) = v.get("error") {
                    return Err(format!("{method}: {e}"));
                }
                return Ok(v["result"].clone());
            }
            self.events.push(v);
        }
    }

    fn recv(&mut self, deadline: Instant, what: &str) -> Result<Value, String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.from.recv_timeout(left) {
            Ok(v) => Ok(v),
            Err(RecvTimeoutError::Timeout) => Err(format!("{what}: chromium did not answer")),
            Err(RecvTimeoutError::Disconnected) => {
                Err(format!("{what}: chromium exited: {}", self.stderr_tail()))
            }
        }
    }

    /// Waits for the event `method` of `session`.
    fn wait_event(&mut self, session: &str, method: &str) -> Result<Value, String> {
        let is = |v: &Value| v["method"] == method && v["sessionId"] == session;
        if let Some(i) = self.events.iter().position(is) {
            return Ok(self.events.remove(i));
        }
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            let v = self.recv(deadline, method)?;
            if is(&v) {
                return Ok(v);
            }
            self.events.push(v);
        }
    }

    /// Opens `target` (a URL, or a file path) in a new tab of `width` x `height` CSS pixels
    /// (a phone's when narrower than 600), and reads what it rendered; the screenshot goes to
    /// `screenshot` when given.
    pub fn open(
        &mut self,
        target: &str,
        (width, height): (u32, u32),
        screenshot: Option<&Path>,
    ) -> Result<Facts, String> {
        let url = if target.starts_with('/') {
            format!("file://{target}")
        } else {
            target.to_string()
        };
        let t = self.call(None, "Target.createTarget", json!({"url": "about:blank"}))?;
        let target_id = t["targetId"].as_str().unwrap_or_default().to_string();
        let a = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        )?;
        let session = a["sessionId"].as_str().unwrap_or_default().to_string();
        let s = Some(session.as_str());
        for domain in ["Page", "Runtime", "Log", "Network", "DOM", "CSS"] {
            self.call(s, &format!("{domain}.enable"), json!({}))?;
        }
        self.events.clear();
        self.call(
            s,
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600}),
        )?;
        let nav = self.call(s, "Page.navigate", json!({"url": url}))?;
        if let Some(e) = nav.get("errorText") {
            return Err(format!("navigate to {url}: {e}"));
        }
        self.wait_event(&session, "Page.loadEventFired")?;
        let mut facts = self.read_facts(s)?;
        facts.url = url;
        facts.viewport = (width, height);
        self.fonts(s, &mut facts)?;
        if let Some(path) = screenshot {
            let shot = self.call(s, "Page.captureScreenshot", json!({"format": "png"}))?;
            let png = decode_base64(shot["data"].as_str().unwrap_or_default())?;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
            }
            std::fs::write(path, png).map_err(|e| format!("{}: {e}", path.display()))?;
            facts.screenshot = Some(path.to_path_buf());
        }
        self.collect_events(&session, &mut facts);
        self.call(None, "Target.closeTarget", json!({"targetId": target_id}))?;
        Ok(facts)
    }

    fn read_facts(&mut self, s: Option<&str>) -> Result<Facts, String> {
        let r = self.call(
            s,
            "Runtime.evaluate",
            json!({"expression": FACTS_JS, "returnByValue": true}),
        )?;
        if let Some(e) = r.get("exceptionDetails") {
            return Err(format!("reading the page: {e}"));
        }
        let v = &r["result"]["value"];
        let strings = |k: &str| -> Vec<String> {
            v[k].as_array()
                .map(|a| {
                    a.iter()
                        .map(|x| x.as_str().unwrap_or_default().to_string())
                        .collect()
                })
                .unwrap_or_default()
        };
        let num = |x: &Value| x.as_f64().unwrap_or(0.0);
        let svgs = v["svgs"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|s| Svg {
                        kind: s["kind"].as_str().unwrap_or_default().into(),
                        subject: s["subject"].as_str().unwrap_or_default().into(),
                        width: num(&s["width"]),
                        bbox_width: num(&s["bboxWidth"]),
                        bbox_height: num(&s["bboxHeight"]),
                        paths: s["paths"]
                            .as_array()
                            .map(|ps| {
                                ps.iter()
                                    .map(|p| {
                                        (
                                            p["cls"].as_str().unwrap_or_default().to_string(),
                                            p["d"].as_u64().unwrap_or(0) as usize,
                                            num(&p["length"]),
                                        )
                                    })
                                    .collect()
                            })
                            .unwrap_or_default(),
                        dots: s["dots"].as_u64().unwrap_or(0) as usize,
                        crossing: s["crossing"]
                            .as_object()
                            .map(|c| (num(&c["t"]), num(&c["cx"]), num(&c["cy"]))),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(Facts {
            title: v["title"].as_str().unwrap_or_default().into(),
            lang: v["lang"].as_str().unwrap_or_default().into(),
            scroll_width: num(&v["scrollWidth"]),
            client_width: num(&v["clientWidth"]),
            inner_height: num(&v["innerHeight"]),
            findings: strings("findings"),
            headings: strings("headings"),
            svgs,
            overview_bottom: v["overviewBottom"].as_f64(),
            cjk_text: v["cjk"].as_str().map(String::from),
            cjk_width: num(&v["cjkWidth"]),
            too_wide: strings("tooWide"),
            text: v["text"].as_str().unwrap_or_default().into(),
            ..Facts::default()
        })
    }

    /// The platform fonts that drew the first CJK text (marked by the facts script).
    fn fonts(&mut self, s: Option<&str>, facts: &mut Facts) -> Result<(), String> {
        if facts.cjk_text.is_none() {
            return Ok(());
        }
        let doc = self.call(s, "DOM.getDocument", json!({"depth": 0}))?;
        let node = self.call(
            s,
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "[data-cjk-probe]"}),
        )?;
        let fonts = self.call(
            s,
            "CSS.getPlatformFontsForNode",
            json!({"nodeId": node["nodeId"]}),
        )?;
        facts.cjk_fonts = fonts["fonts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|f| {
                        (
                            f["familyName"].as_str().unwrap_or_default().to_string(),
                            f["glyphCount"].as_u64().unwrap_or(0),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(())
    }

    /// Console errors, the browser log's errors and warnings, exceptions, and requests of
    /// session `s` received so far.
    fn collect_events(&mut self, s: &str, facts: &mut Facts) {
        for e in self.events.drain(..).filter(|e| e["sessionId"] == s) {
            let p = &e["params"];
            match e["method"].as_str().unwrap_or_default() {
                "Runtime.consoleAPICalled"
                    if matches!(p["type"].as_str(), Some("error" | "assert" | "warning")) =>
                {
                    facts
                        .console
                        .push(format!("console.{}: {}", p["type"], p["args"]));
                }
                "Log.entryAdded"
                    if matches!(p["entry"]["level"].as_str(), Some("error" | "warning")) =>
                {
                    facts.console.push(format!(
                        "log {}: {} {}",
                        p["entry"]["level"], p["entry"]["text"], p["entry"]["url"]
                    ));
                }
                "Runtime.exceptionThrown" => {
                    facts
                        .console
                        .push(format!("exception: {}", p["exceptionDetails"]));
                }
                "Network.requestWillBeSent" => {
                    facts
                        .requests
                        .push(p["request"]["url"].as_str().unwrap_or_default().to_string());
                }
                _ => {}
            }
        }
    }
}

/// The two calls made between fork and exec (async-signal-safe, on raw descriptor numbers).
mod sys {
    pub const F_DUPFD: i32 = 0;
    extern "C" {
        pub fn dup2(oldfd: i32, newfd: i32) -> i32;
        pub fn fcntl(fd: i32, cmd: i32, ...) -> i32;
    }
}

/// Standard base64 (the screenshot's PNG).
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let clean: Vec<u8> = s
        .bytes()
        .filter(|c| *c != b'=' && !c.is_ascii_whitespace())
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= val(*c).ok_or("bad base64")? << (18 - 6 * i);
        }
        let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&bytes[..chunk.len().saturating_sub(1)]);
    }
    Ok(out)
}

/// Opens `target` at each viewport size in one browser; `shots` names each screenshot
/// (`<dir>/<stem>-<width>.png`). `Err` when the browser cannot run (the caller skips) or a
/// page did not load.
pub fn render(
    target: &str,
    sizes: &[(u32, u32)],
    shots: Option<(&Path, &str)>,
) -> Result<Vec<Facts>, String> {
    let mut b = Browser::launch()?;
    sizes
        .iter()
        .map(|size| {
            let shot = shots.map(|(dir, stem)| dir.join(format!("{stem}-{}.png", size.0)));
            b.open(target, *size, shot.as_deref())
        })
        .collect()
}

/// Where the tests keep their screenshots: `target/browser-screenshots/`.
pub fn artefacts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/browser-screenshots")
}

/// A laptop's and a phone's viewports.
pub const DESKTOP: (u32, u32) = (1280, 800);
pub const PHONE: (u32, u32) = (390, 844);

/// What a node page must show.
#[derive(Debug, Clone, Default)]
pub struct Expect {
    /// Every finding's id, as `/findings` lists them.
    pub findings: Vec<String>,
    /// Kinds of figures that must be drawn (a path of class `series` with a length).
    pub figures: Vec<String>,
    /// Chinese text the page must render with glyphs (the `?lang=zh` page).
    pub cjk: Option<String>,
    /// The only origin requests may go to (`http://127.0.0.1:port`; `file://` for a file).
    pub origin: String,
}

fn at(f: &Facts) -> String {
    format!("{} at {}x{}", f.url, f.viewport.0, f.viewport.1)
}

/// What is wrong with any rendered page of the agent: console errors, requests to another
/// origin than `origin` (`data:` aside), a page wider than the screen.
pub fn check_page(f: &Facts, origin: &str) -> Vec<String> {
    let at = at(f);
    let mut bad = Vec::new();
    if !f.console.is_empty() {
        bad.push(format!("{at}: console errors: {:?}", f.console));
    }
    for r in &f.requests {
        let own = r.starts_with(origin) || r.starts_with("data:") || r == "about:blank";
        if !own {
            bad.push(format!("{at}: a request left the agent: {r}"));
        }
    }
    if f.scroll_width > f.client_width {
        bad.push(format!(
            "{at}: scrolls sideways ({} > {} px; too wide: {:?})",
            f.scroll_width, f.client_width, f.too_wide
        ));
    }
    bad
}

/// What is wrong with the Chinese text of a page: `text` absent, nothing Chinese drawn, or
/// drawn by no font that has Chinese glyphs.
pub fn check_cjk(f: &Facts, text: &str) -> Vec<String> {
    let at = at(f);
    let mut bad = Vec::new();
    if !f.text.contains(text) {
        bad.push(format!(
            "{at}: the Chinese text {text:?} is not on the page"
        ));
    }
    if f.cjk_text.is_none() || f.cjk_width <= 0.0 {
        bad.push(format!(
            "{at}: no Chinese text rendered ({:?}, {} px)",
            f.cjk_text, f.cjk_width
        ));
    } else if !f
        .cjk_fonts
        .iter()
        .any(|(family, glyphs)| *glyphs > 0 && is_cjk_font(family))
    {
        bad.push(format!(
            "{at}: no font with Chinese glyphs drew {:?}: {:?}",
            f.cjk_text, f.cjk_fonts
        ));
    }
    bad
}

/// What is wrong with a rendered node page (empty: nothing): [`check_page`], every expected
/// finding and figure, the Chinese text ([`check_cjk`]), the overview on the first screen.
pub fn check_node_page(f: &Facts, want: &Expect) -> Vec<String> {
    let at = at(f);
    let mut bad = check_page(f, &want.origin);
    let mut shown = f.findings.clone();
    for id in &want.findings {
        match shown.iter().position(|s| s == id) {
            Some(i) => {
                shown.remove(i);
            }
            None => bad.push(format!("{at}: finding {id} is not on the page")),
        }
    }
    for kind in &want.figures {
        let drawn = f.svgs.iter().any(|s| {
            s.kind == *kind && s.drawn("series") > 0.0 && s.bbox_width > 0.0 && s.bbox_height > 0.0
        });
        if !drawn {
            bad.push(format!("{at}: no drawn figure {kind} (svgs: {:?})", f.svgs));
        }
    }
    for s in &f.svgs {
        if s.width <= 0.0 || s.paths.iter().any(|p| p.1 == 0) {
            bad.push(format!("{at}: an empty figure {s:?}"));
        }
    }
    if let Some(text) = &want.cjk {
        bad.extend(check_cjk(f, text));
    }
    match f.overview_bottom {
        Some(b) if b <= f.inner_height => {}
        other => bad.push(format!(
            "{at}: the overview is not on the first screen (bottom {other:?}, screen {} px)",
            f.inner_height
        )),
    }
    bad
}

/// A font family that has Chinese glyphs (the ones Debian packages: Noto CJK, WenQuanYi,
/// Droid Sans Fallback, AR PL, Source Han).
pub fn is_cjk_font(family: &str) -> bool {
    let f = family.to_ascii_lowercase();
    [
        "cjk",
        "wenquanyi",
        "wqy",
        "droid sans fallback",
        "ar pl",
        "source han",
        "han sans",
        "han serif",
    ]
    .iter()
    .any(|k| f.contains(k))
}

/// Reads the rendered page (run in the page by `Runtime.evaluate`).
const FACTS_JS: &str = r#"(() => {
  const se = document.scrollingElement || document.documentElement;
  const ov = document.getElementById('overview');
  const cjkRe = /[\u3400-\u9fff]/;
  let cjk = null, cjkWidth = 0;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (cjkRe.test(n.data) && n.parentElement && n.parentElement.closest('body') && !n.parentElement.closest('svg')) {
      const r = document.createRange(); r.selectNodeContents(n);
      cjk = n.data; cjkWidth = r.getBoundingClientRect().width;
      n.parentElement.setAttribute('data-cjk-probe', '');
      break;
    }
  }
  const svgs = [...document.querySelectorAll('svg')].map(s => {
    const b = s.getBBox(), r = s.getBoundingClientRect();
    const c = s.querySelector('circle.crossing');
    return {
      kind: s.getAttribute('data-kind') || '', subject: s.getAttribute('data-subject') || '',
      width: r.width, bboxWidth: b.width, bboxHeight: b.height,
      paths: [...s.querySelectorAll('path')].map(p => ({cls: p.getAttribute('class') || '', d: (p.getAttribute('d') || '').length, length: p.getTotalLength()})),
      dots: s.querySelectorAll('circle.pt').length,
      crossing: c ? {t: +c.getAttribute('data-t'), cx: +c.getAttribute('cx'), cy: +c.getAttribute('cy')} : null,
    };
  });
  const cw = se.clientWidth;
  const tooWide = [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > cw + 1).slice(0, 8).map(e => e.tagName + '.' + e.className);
  return {
    title: document.title, lang: document.documentElement.lang,
    scrollWidth: se.scrollWidth, clientWidth: cw, innerHeight: window.innerHeight,
    findings: [...document.querySelectorAll('[data-finding]')].map(e => e.getAttribute('data-finding')),
    headings: [...document.querySelectorAll('h1,h2,h3')].map(e => e.textContent),
    svgs, overviewBottom: ov ? ov.getBoundingClientRect().bottom + window.scrollY : null,
    cjk, cjkWidth, tooWide, text: document.body.innerText,
  };
})()"#;
