//! The HTTP server (hyper 1.x, HTTP/1.1 with keep-alive). Every request reads the latest
//! published snapshot; no request ever triggers collection.
//!
//! Anyone who reaches the port can open connections, so each one is bounded
//! ([`crate::connections`]): at most [`MAX_CONNECTIONS`] are open, and at the cap a new
//! connection closes the one that has been quiet longest; a connection costs no buffer until
//! its first byte arrives, must start a request within [`HEADER_READ_TIMEOUT`] and finish its
//! headers within as long again, may not send more than [`MAX_HEADER_BYTES`] of headers, and
//! is closed when its client stops reading a response for [`WRITE_STALL_TIMEOUT`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tower::ServiceBuilder;
use tower_http::compression::CompressionLayer;

use crate::api;
use crate::connections::{Clock, ConnState, ConnTable, Registration, Throttle, Tracked};
use crate::engine::Shared;
use crate::html;
use crate::token::Token;
use crate::view::{Filter, View};

/// How long a new connection may take to send its first byte, then to complete its request
/// headers; in hyper the same timer also closes a keep-alive connection idle this long
/// between requests. Clients of this server (Prometheus, curl, a browser) send a request in
/// one packet right after connecting; 5 s covers a slow link or a port-forward with room.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Open connections at most. Prometheus and a few people need a handful; 256 keeps a
/// load test's 64 connections (scripts/bench-serve.sh) far from the cap, and bounds the
/// HTTP buffers to 256 x 16 KiB = 4 MiB (docs/endpoints.md, Connection limits).
pub const MAX_CONNECTIONS: usize = 256;
/// Request line and headers at most; larger gets `431`. 8 KiB is hyper's smallest read
/// buffer and nginx's default limit for one header line; a bearer-token request is ~200 bytes.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;
/// A response write that makes no progress this long closes the connection.
pub const WRITE_STALL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight connections get to finish after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Connection shedding and accept errors are logged at most once per this period.
const LOG_EVERY: Duration = Duration::from_secs(60);

pub struct App {
    pub shared: Arc<Shared>,
    /// Bearer token required on /findings, /metrics, /explain, /history and /.
    pub token: Option<Arc<Token>>,
    /// The rules in force and the collectors' thresholds, for `/rules` (no node data there,
    /// so no token).
    pub rules: Arc<collectors::rules::RuleBook>,
    pub thresholds: Arc<crate::rules_page::Thresholds>,
}

type Resp = Response<Full<Bytes>>;

fn respond(status: StatusCode, content_type: &'static str, body: impl Into<Bytes>) -> Resp {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn text(status: StatusCode, body: impl Into<String>) -> Resp {
    respond(status, "text/plain; charset=utf-8", body.into())
}

/// Parses the query and rejects a `collector=` this agent does not run (as `check
/// --collector` does), so a typo is not read as "no findings".
fn checked_filter(
    query: Option<&str>,
    snapshot: &crate::state::Snapshot,
) -> Result<Filter, String> {
    let f = Filter::from_query(query)?;
    let known: Vec<&str> = snapshot
        .collectors
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    if let Some(bad) = f.collectors.iter().find(|c| !known.contains(&c.as_str())) {
        return Err(format!(
            "unknown collector {bad:?}; known collectors: {}",
            known.join(", ")
        ));
    }
    Ok(f)
}

fn authorized(app: &App, req: &Request<Incoming>) -> bool {
    let Some(token) = &app.token else {
        return true;
    };
    let Some(value) = req.headers().get(AUTHORIZATION) else {
        return false;
    };
    let value = value.as_bytes();
    let Some(given) = value
        .strip_prefix(b"Bearer ")
        .or_else(|| value.strip_prefix(b"bearer "))
    else {
        return false;
    };
    token.matches(given.trim_ascii())
}

/// Routes one request.
pub fn handle(app: &App, req: &Request<Incoming>) -> Resp {
    let path = req.uri().path();
    let protected = match path {
        "/findings" | "/metrics" | "/" | "/explain" | "/history" => true,
        // The rule pages hold no node data: alerts and NodeConditions link to them.
        "/healthz" | "/readyz" | "/rules" | "/rules/" => false,
        p if p.starts_with("/rules/") => false,
        _ => return text(StatusCode::NOT_FOUND, format!("not found: {path}\n")),
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = text(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {} not allowed; use GET\n", req.method()),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if protected && !authorized(app, req) {
        let mut r = text(
            StatusCode::UNAUTHORIZED,
            "unauthorized: send Authorization: Bearer <token>\n",
        );
        r.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"node-doctor\""),
        );
        return r;
    }
    if let Some(rest) = path.strip_prefix("/rules") {
        return rules(app, rest, req.uri().query());
    }
    let published = app.shared.latest();
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            // The Kubernetes reporter's state is detail, not readiness: an unreachable API
            // server must not take every agent of the cluster out of its Service.
            let reporter = crate::kube_stats::readyz_detail()
                .map(|l| format!("{l}\n"))
                .unwrap_or_default();
            if published.snapshot.ready {
                text(StatusCode::OK, format!("ready\n{reporter}"))
            } else {
                let waiting: Vec<&str> = published
                    .snapshot
                    .collectors
                    .iter()
                    .filter(|c| c.last_run.is_none())
                    .map(|c| c.name.as_str())
                    .collect();
                text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!(
                        "not ready: waiting for the first run of {}\n{reporter}",
                        waiting.join(", ")
                    ),
                )
            }
        }
        "/explain" => {
            // A catalogue lookup (no host read, no collection); bounded in crate::explain_cmd.
            let (status, body) = crate::explain_cmd::http_response(req.uri().query().unwrap_or(""));
            let mut bytes = serde_json::to_vec_pretty(&body).unwrap_or_default();
            bytes.push(b'\n');
            respond(
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                "application/json",
                bytes,
            )
        }
        "/metrics" => respond(
            StatusCode::OK,
            crate::metrics::CONTENT_TYPE,
            crate::metrics::with_process(published.generation, published.metrics()),
        ),
        "/history" => respond(
            StatusCode::OK,
            "application/json",
            crate::history::to_json(&published.snapshot.node, &app.shared.figures()),
        ),
        "/findings" => match checked_filter(req.uri().query(), &published.snapshot) {
            Err(msg) => text(StatusCode::BAD_REQUEST, format!("{msg}\n")),
            Ok(f) if f.is_unfiltered() => respond(
                StatusCode::OK,
                "application/json",
                published.json(f.lang).clone(),
            ),
            Ok(f) => respond(
                StatusCode::OK,
                "application/json",
                api::to_json(&View::new(&published.snapshot, &f)),
            ),
        },
        _ => match checked_filter(req.uri().query(), &published.snapshot) {
            Err(msg) => text(StatusCode::BAD_REQUEST, format!("{msg}\n")),
            Ok(f) => respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                html::page(&View::new(&published.snapshot, &f), &app.shared.figures()),
            ),
        },
    }
}

/// `/rules` (the index) and `/rules/<id>` (a rule's page), in `?lang=`'s language.
fn rules(app: &App, rest: &str, query: Option<&str>) -> Resp {
    let lang = match Filter::from_query(query) {
        Ok(f) => f.lang,
        Err(msg) => return text(StatusCode::BAD_REQUEST, format!("{msg}\n")),
    };
    let html = "text/html; charset=utf-8";
    match rest.strip_prefix('/').unwrap_or(rest) {
        "" => respond(
            StatusCode::OK,
            html,
            crate::rules_page::index(&app.rules, lang),
        ),
        id => match crate::rules_page::page(&app.rules, id, lang, &app.thresholds) {
            Some(p) => respond(StatusCode::OK, html, p),
            None => text(
                StatusCode::NOT_FOUND,
                format!(
                    "no rule {:?}; the rules are listed at /rules\n",
                    collectors::bounded::prefix(id, 128)
                ),
            ),
        },
    }
}

/// Pending connections the kernel queues for `accept` (tokio's default is 128). During a
/// flood of connects the accept loop can fall behind for a moment; with a short queue the
/// kernel then drops SYNs, and a legitimate client waits a full second for its retransmit.
pub const LISTEN_BACKLOG: u32 = 1024;

/// Binds the listening socket (SO_REUSEADDR, as `TcpListener::bind`) with [`LISTEN_BACKLOG`].
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

fn http1_builder() -> http1::Builder {
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .keep_alive(true)
        .max_buf_size(MAX_HEADER_BYTES)
        .max_header_size(MAX_HEADER_BYTES);
    b
}

/// Serves until `shutdown` resolves, then lets open connections finish for up to
/// [`SHUTDOWN_GRACE`].
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let clock = Clock::new();
    let table = Arc::new(Mutex::new(ConnTable::new(MAX_CONNECTIONS)));
    let http = Arc::new(http1_builder());
    // Each connection holds a receiver; `closed()` resolves once every one has ended.
    let (stop_tx, _) = watch::channel(());
    let mut shed_log = Throttle::new(LOG_EVERY);
    let mut accept_error_log = Throttle::new(LOG_EVERY);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer): (_, SocketAddr) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        if let Some(n) = accept_error_log.hit(clock.now_ms()) {
                            tracing::warn!(error = %e, errors = n, "accept failed");
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let now = clock.now_ms();
                let admitted = table
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .admit(now);
                if admitted.evicted.is_some() {
                    crate::connections::SHED.limit.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    tracing::debug!(peer = %peer, "at the connection limit: closed the longest-idle connection");
                    if let Some(n) = shed_log.hit(now) {
                        tracing::warn!(
                            max_connections = MAX_CONNECTIONS,
                            closed = n,
                            "at the connection limit: closing the longest-idle connections to admit new ones (logged at most once a minute)"
                        );
                    }
                }
                let conn = Conn {
                    stream,
                    peer,
                    state: admitted.state,
                    _registration: Registration::new(Arc::clone(&table), admitted.id),
                    stop: stop_tx.subscribe(),
                    clock,
                };
                tokio::spawn(conn.run(Arc::clone(&app), Arc::clone(&http)));
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down: no new connections");
    let _ = stop_tx.send(());
    if tokio::time::timeout(SHUTDOWN_GRACE, stop_tx.closed())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_seconds = SHUTDOWN_GRACE.as_secs(),
            "connections still open after the grace period; closing them"
        );
    }
}

/// Response compression: gzip only (what Prometheus, curl `--compressed` and browsers all
/// accept), at tower-http's default level, for bodies over tower-http's default minimum
/// (32 bytes; `/healthz`'s `ok` stays as it is).
fn compression() -> CompressionLayer {
    CompressionLayer::new().gzip(true)
}

/// One accepted connection.
struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    state: Arc<ConnState>,
    _registration: Registration,
    stop: watch::Receiver<()>,
    clock: Clock,
}

impl Conn {
    async fn run(mut self, app: Arc<App>, http: Arc<http1::Builder>) {
        // Until the client sends something, hold only the socket: no hyper buffers (16 KiB
        // a connection), so idle connections cost little even before the cap sheds them.
        let mut first = [0u8; 1];
        let arrived = tokio::select! {
            r = tokio::time::timeout(HEADER_READ_TIMEOUT, self.stream.peek(&mut first)) => r,
            _ = self.state.close.notified() => return,
            _ = self.stop.changed() => return,
        };
        match arrived {
            Ok(Ok(n)) if n > 0 => self.state.touch(self.clock.now_ms()),
            Err(_elapsed) => {
                crate::connections::SHED
                    .no_request
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return;
            }
            // Closed by the client, or a socket error: nothing to answer.
            _ => return,
        }
        let _ = self.stream.set_nodelay(true);
        let state = Arc::clone(&self.state);
        // gzip when the client asks (`Accept-Encoding`; Prometheus always does): tower-http's
        // layer over the handler, which also sets `Vary: accept-encoding`.
        let service =
            TowerToHyperService::new(ServiceBuilder::new().layer(compression()).service_fn(
                move |req: Request<Incoming>| {
                    state.mark_served();
                    let resp = handle(&app, &req);
                    async move { Ok::<_, Infallible>(resp) }
                },
            ));
        let io = Tracked::new(
            self.stream,
            Arc::clone(&self.state),
            self.clock,
            WRITE_STALL_TIMEOUT,
        );
        // Boxed: the task of a connection still waiting for its first byte stays small.
        let mut conn = Box::pin(http.serve_connection(TokioIo::new(io), service));
        let ended = tokio::select! {
            r = conn.as_mut() => r,
            _ = self.state.close.notified() => return,
            _ = self.stop.changed() => {
                // Finish the request in flight, if any; an idle connection closes at once.
                conn.as_mut().graceful_shutdown();
                tokio::select! {
                    r = conn.as_mut() => r,
                    _ = self.state.close.notified() => return,
                }
            }
        };
        if let Err(e) = ended {
            tracing::debug!(peer = %self.peer, error = %e, "connection ended with an error");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Connections the agent has not accepted yet wait in the kernel's queue instead of
    /// having their SYNs dropped: 600 connects to a listener that accepts none all complete
    /// (tokio's default backlog of 128 would leave the rest retransmitting for a second).
    #[tokio::test]
    async fn the_listen_queue_holds_a_burst_of_connects() {
        let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(4096);
        let burst = somaxconn.min(600);
        if burst <= 129 {
            collectors::skip!(
                "SKIP the_listen_queue_holds_a_burst_of_connects: net.core.somaxconn is {somaxconn}, the kernel caps the backlog"
            );
            return;
        }
        let listener = listen("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = listener.local_addr().unwrap();
        let mut held = Vec::new();
        for i in 0..burst {
            let c = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500))
                .unwrap_or_else(|e| panic!("connect {i} of {burst} while none is accepted: {e}"));
            held.push(c);
        }
        drop(listener);
    }

    #[test]
    fn the_builder_accepts_the_limits() {
        // max_buf_size panics below hyper's minimum (8 KiB); this catches a smaller limit.
        let _ = http1_builder();
    }
}
