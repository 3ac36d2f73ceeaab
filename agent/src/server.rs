//! The HTTP server (hyper 1.x, HTTP/1.1 with keep-alive). Every request reads the latest
//! published snapshot; no request ever triggers collection.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ALLOW, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;

use crate::engine::Shared;
use crate::html;
use crate::report::{self, Filter};

/// How long a client may take to send its request headers.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long in-flight connections get to finish after SIGTERM.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

pub struct App {
    pub shared: Arc<Shared>,
    /// Bearer token required on /findings, /metrics and /.
    pub token: Option<Vec<u8>>,
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

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    diff == 0
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
    constant_time_eq(given.trim_ascii(), token)
}

/// Routes one request.
pub fn handle(app: &App, req: &Request<Incoming>) -> Resp {
    let path = req.uri().path();
    let protected = match path {
        "/findings" | "/metrics" | "/" | "/explain" => true,
        "/healthz" | "/readyz" => false,
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
    let published = app.shared.latest();
    match path {
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            if published.snapshot.ready {
                text(StatusCode::OK, "ready\n")
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
                        "not ready: waiting for the first run of {}\n",
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
            published.metrics.clone(),
        ),
        "/findings" => match checked_filter(req.uri().query(), &published.snapshot) {
            Err(msg) => text(StatusCode::BAD_REQUEST, format!("{msg}\n")),
            Ok(f) if f.is_unfiltered() => respond(
                StatusCode::OK,
                "application/json",
                match f.lang {
                    collectors::Lang::En => published.json_en.clone(),
                    collectors::Lang::Zh => published.json_zh.clone(),
                },
            ),
            Ok(f) => respond(
                StatusCode::OK,
                "application/json",
                report::to_json(&published.snapshot, &f),
            ),
        },
        _ => match checked_filter(req.uri().query(), &published.snapshot) {
            Err(msg) => text(StatusCode::BAD_REQUEST, format!("{msg}\n")),
            Ok(f) => respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                html::page(&published.snapshot, &f),
            ),
        },
    }
}

/// Serves until `shutdown` resolves, then lets open connections finish for up to
/// [`SHUTDOWN_GRACE`].
pub async fn serve(
    listener: TcpListener,
    app: Arc<App>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer): (_, SocketAddr) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let app = Arc::clone(&app);
                let service = service_fn(move |req: Request<Incoming>| {
                    let resp = handle(&app, &req);
                    async move { Ok::<_, Infallible>(resp) }
                });
                let conn = http1::Builder::new()
                    .timer(TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(stream), service);
                let conn = graceful.watch(conn);
                tokio::spawn(async move {
                    if let Err(e) = conn.await {
                        tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
                    }
                });
            }
            _ = &mut shutdown => break,
        }
    }
    drop(listener);
    tracing::info!("shutting down: no new connections");
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_seconds = SHUTDOWN_GRACE.as_secs(),
            "connections still open after the grace period; closing them"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }
}
