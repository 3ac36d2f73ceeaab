//! The runtime collector's network probes ([`collectors::runtime::probe`]): the
//! collectors crate decides what to ask, this module asks. Docker's API is HTTP/1.1 over its
//! unix socket; containerd's API and the CRI are gRPC, which is HTTP/2 with length-prefixed
//! protobuf messages; the kubelet's `/healthz` is HTTP/1.1 over TCP.
//!
//! Built on what the agent already has: hyper's client connections (`hyper::client::conn`)
//! over a `tokio::net::UnixStream` or `TcpStream`, and `prost` derives for the few messages
//! (field numbers from containerd's `api/services/version/v1/version.proto`,
//! `api/services/tasks/v1/tasks.proto`, `api/types/task/task.proto` and the CRI's
//! `runtime/v1/api.proto`). tonic was not taken: it needs generated code (protoc at build
//! time, or vendored output) and a tower stack for four unary calls whose requests are
//! empty or one field; the gRPC framing they need is five bytes, written here.
//!
//! Each call runs on a current-thread tokio runtime built for the probe (the collector runs
//! on its own thread, outside the server's runtime), every target concurrently, each under
//! one deadline for all its calls. A daemon that accepts and never answers costs the
//! deadline and nothing more; the runtime is dropped with whatever it still holds.

use std::io::ErrorKind;
use std::path::Path;
use std::time::{Duration, Instant};

use collectors::runtime::probe::{
    ContainerdReply, CriCondition, CriReply, DockerReply, HealthzReply, Outcome, ProbePlan,
    ProbeReport, Reply, RuntimeProbe, Target, Task, TaskStatus,
};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::time::timeout_at;

/// Largest answers read: a ping, a version, a healthz body.
pub(crate) const SMALL_BODY: usize = 64 << 10;
/// `GET /containers/json` and `Tasks.List` on a node with hundreds of containers.
const LIST_BODY: usize = 16 << 20;
/// How much of an unexpected answer is kept for people.
const DETAIL_BYTES: usize = 200;

/// The agent's probe: real sockets under the host root, real TCP to the kubelet.
#[derive(Debug, Default, Clone, Copy)]
pub struct HostProbe;

impl RuntimeProbe for HostProbe {
    fn probe(&self, plan: &ProbePlan) -> ProbeReport {
        ProbeReport {
            replies: ask_all(&plan.targets, plan.timeout, ask, failed),
        }
    }
}

/// Asks every target at once, each by `ask` under `timeout`, on a current-thread tokio runtime
/// built for the call (the collectors run on threads of their own, outside the server's
/// runtime); `failed` answers for a target whose task could not run. The answers are in the
/// targets' order. Shared by the runtime and reach probes.
pub(crate) fn ask_all<T, R, Fut>(
    targets: &[T],
    timeout: Duration,
    ask: fn(T, Duration) -> Fut,
    failed: fn(&T, &str) -> R,
) -> Vec<R>
where
    T: Clone,
    R: Send + 'static,
    Fut: std::future::Future<Output = R> + Send + 'static,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let why = format!("cannot start the probe's runtime: {e}");
            return targets.iter().map(|t| failed(t, &why)).collect();
        }
    };
    let replies = rt.block_on(async {
        let handles: Vec<_> = targets
            .iter()
            .cloned()
            .map(|t| tokio::spawn(ask(t, timeout)))
            .collect();
        let mut out = Vec::with_capacity(handles.len());
        for (h, t) in handles.into_iter().zip(targets) {
            out.push(match h.await {
                Ok(r) => r,
                Err(e) => failed(t, &format!("probe task failed: {e}")),
            });
        }
        out
    });
    // Connections a hung daemon still holds are dropped with the runtime, at once.
    rt.shutdown_background();
    replies
}

fn failed(t: &Target, why: &str) -> Reply {
    let o = Outcome::Failed(why.to_string());
    match t {
        Target::Docker { .. } => Reply::Docker(DockerReply {
            ping: o,
            version: None,
            running: None,
        }),
        Target::Containerd { .. } => Reply::Containerd(ContainerdReply {
            version_call: o,
            version: None,
            tasks: None,
        }),
        Target::Cri { .. } => Reply::Cri(CriReply {
            version_call: o,
            runtime: None,
            conditions: None,
        }),
        Target::KubeletHealthz { .. } => Reply::Healthz(HealthzReply {
            outcome: o,
            status: None,
        }),
    }
}

async fn ask(t: Target, timeout: Duration) -> Reply {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    match t {
        Target::Docker {
            socket,
            list_running,
        } => Reply::Docker(docker(&socket, list_running, start, deadline).await),
        Target::Containerd {
            socket,
            tasks_namespace,
        } => Reply::Containerd(containerd(&socket, tasks_namespace, start, deadline).await),
        Target::Cri { socket } => Reply::Cri(cri(&socket, start, deadline).await),
        Target::KubeletHealthz { addr } => Reply::Healthz(healthz(addr, start, deadline).await),
    }
}

/// A failed connect in the probe's terms.
fn connect_error(e: &std::io::Error) -> Outcome {
    match e.kind() {
        ErrorKind::NotFound => Outcome::NoSocket,
        ErrorKind::ConnectionRefused => Outcome::Refused,
        _ if e.raw_os_error() == Some(nix::libc::ENOTSOCK) => Outcome::NotSocket,
        _ => Outcome::Failed(e.to_string()),
    }
}

fn timed_out(start: Instant, connected: bool) -> Outcome {
    Outcome::Timeout {
        after: start.elapsed(),
        connected,
    }
}

/// At most [`DETAIL_BYTES`] bytes of a daemon's text, and `…` when it was longer.
pub(crate) fn cut(s: &str) -> String {
    collectors::bounded::ellipsis(s, DETAIL_BYTES + '…'.len_utf8())
}

/// An HTTP/1.1 sender over a connected stream (its connection driven by a spawned task).
pub(crate) async fn http1<S>(
    io: S,
) -> Result<hyper::client::conn::http1::SendRequest<Full<Bytes>>, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Ok(sender)
}

/// `GET path` on an HTTP/1.1 sender: status and body (at most `limit` bytes).
pub(crate) async fn get(
    sender: &mut hyper::client::conn::http1::SendRequest<Full<Bytes>>,
    host: &str,
    path: &str,
    limit: usize,
) -> Result<(u16, Bytes), String> {
    sender.ready().await.map_err(|e| e.to_string())?;
    let req = hyper::Request::get(path)
        .header(hyper::header::HOST, host)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let body = Limited::new(resp.into_body(), limit)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, body))
}

async fn docker(
    socket: &Path,
    list_running: bool,
    start: Instant,
    deadline: tokio::time::Instant,
) -> DockerReply {
    let mut reply = DockerReply {
        ping: Outcome::Failed(String::new()),
        version: None,
        running: None,
    };
    let stream = match timeout_at(deadline, tokio::net::UnixStream::connect(socket)).await {
        Err(_) => {
            reply.ping = timed_out(start, false);
            return reply;
        }
        Ok(Err(e)) => {
            reply.ping = connect_error(&e);
            return reply;
        }
        Ok(Ok(s)) => s,
    };
    let mut sender = match timeout_at(deadline, http1(stream)).await {
        Err(_) => {
            reply.ping = timed_out(start, true);
            return reply;
        }
        Ok(Err(e)) => {
            reply.ping = Outcome::BadAnswer {
                latency: start.elapsed(),
                detail: cut(&e),
            };
            return reply;
        }
        Ok(Ok(s)) => s,
    };
    reply.ping = match timeout_at(deadline, get(&mut sender, "docker", "/_ping", SMALL_BODY)).await
    {
        Err(_) => timed_out(start, true),
        Ok(Err(e)) => Outcome::BadAnswer {
            latency: start.elapsed(),
            detail: cut(&e),
        },
        Ok(Ok((200, body))) if body.trim_ascii() == b"OK" => Outcome::Answered {
            latency: start.elapsed(),
        },
        Ok(Ok((status, body))) => Outcome::BadAnswer {
            latency: start.elapsed(),
            detail: cut(&format!(
                "HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            )),
        },
    };
    if !reply.ping.answered() {
        return reply;
    }
    if let Ok(Ok((200, body))) =
        timeout_at(deadline, get(&mut sender, "docker", "/version", SMALL_BODY)).await
    {
        reply.version = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("Version")?.as_str().map(cut));
    }
    if list_running {
        if let Ok(Ok((200, body))) = timeout_at(
            deadline,
            get(&mut sender, "docker", "/containers/json", LIST_BODY),
        )
        .await
        {
            reply.running = serde_json::from_slice::<Vec<serde_json::Value>>(&body)
                .ok()
                .map(|list| {
                    list.iter()
                        .filter_map(|c| c.get("Id")?.as_str().map(String::from))
                        .collect()
                });
        }
    }
    reply
}

// ------------------------------------------------------------------ gRPC

/// `containerd.services.version.v1.VersionResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct ContainerdVersion {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(string, tag = "2")]
    revision: String,
}

/// `containerd.services.tasks.v1.ListTasksRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct ListTasksRequest {
    #[prost(string, tag = "1")]
    filter: String,
}

/// `containerd.services.tasks.v1.ListTasksResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct ListTasksResponse {
    #[prost(message, repeated, tag = "1")]
    tasks: Vec<Process>,
}

/// `containerd.v1.types.Process` (the fields used).
#[derive(Clone, PartialEq, prost::Message)]
struct Process {
    #[prost(string, tag = "1")]
    container_id: String,
    #[prost(string, tag = "2")]
    id: String,
    #[prost(uint32, tag = "3")]
    pid: u32,
    /// `containerd.v1.types.Status`.
    #[prost(int32, tag = "4")]
    status: i32,
}

/// `runtime.v1.VersionRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct CriVersionRequest {
    #[prost(string, tag = "1")]
    version: String,
}

/// `runtime.v1.VersionResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct CriVersion {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(string, tag = "2")]
    runtime_name: String,
    #[prost(string, tag = "3")]
    runtime_version: String,
    #[prost(string, tag = "4")]
    runtime_api_version: String,
}

/// `runtime.v1.StatusRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct CriStatusRequest {
    #[prost(bool, tag = "1")]
    verbose: bool,
}

/// `runtime.v1.StatusResponse` (its `info` map, tag 2, is skipped as unknown).
#[derive(Clone, PartialEq, prost::Message)]
struct CriStatus {
    #[prost(message, optional, tag = "1")]
    status: Option<CriRuntimeStatus>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CriRuntimeStatus {
    #[prost(message, repeated, tag = "1")]
    conditions: Vec<CriRuntimeCondition>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct CriRuntimeCondition {
    #[prost(string, tag = "1")]
    r#type: String,
    #[prost(bool, tag = "2")]
    status: bool,
    #[prost(string, tag = "3")]
    reason: String,
    #[prost(string, tag = "4")]
    message: String,
}

/// gRPC status `UNIMPLEMENTED`.
const GRPC_UNIMPLEMENTED: u32 = 12;

/// A failed gRPC call.
#[derive(Debug)]
enum CallError {
    /// The deadline passed.
    Timeout,
    /// A gRPC status other than OK (code, message).
    Status(u32, String),
    /// HTTP or framing went wrong.
    Protocol(String),
}

impl CallError {
    fn detail(&self) -> String {
        match self {
            CallError::Timeout => "timeout".into(),
            CallError::Status(c, m) => cut(&format!("gRPC status {c}: {m}")),
            CallError::Protocol(m) => cut(m),
        }
    }
}

type H2 = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// An HTTP/2 connection over a unix socket. `Err` is the outcome of a failed connect.
async fn h2(socket: &Path, start: Instant, deadline: tokio::time::Instant) -> Result<H2, Outcome> {
    let stream = match timeout_at(deadline, tokio::net::UnixStream::connect(socket)).await {
        Err(_) => return Err(timed_out(start, false)),
        Ok(Err(e)) => return Err(connect_error(&e)),
        Ok(Ok(s)) => s,
    };
    let handshake =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream));
    match timeout_at(deadline, handshake).await {
        Err(_) => Err(timed_out(start, true)),
        Ok(Err(e)) => Err(Outcome::BadAnswer {
            latency: start.elapsed(),
            detail: cut(&e.to_string()),
        }),
        Ok(Ok((sender, conn))) => {
            tokio::spawn(async move {
                let _ = conn.await;
            });
            Ok(sender)
        }
    }
}

/// One unary gRPC call: `path` with `request`, decoded as `R`.
async fn call<R: prost::Message + Default>(
    sender: &mut H2,
    path: &str,
    request: &impl prost::Message,
    namespace: Option<&str>,
    limit: usize,
    deadline: tokio::time::Instant,
) -> Result<R, CallError> {
    let work = async {
        let msg = request.encode_to_vec();
        let len = u32::try_from(msg.len()).map_err(|e| CallError::Protocol(e.to_string()))?;
        let mut frame = Vec::with_capacity(5 + msg.len());
        frame.push(0);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&msg);
        let mut req = hyper::Request::post(format!("http://localhost{path}"))
            .header("content-type", "application/grpc")
            .header("te", "trailers");
        if let Some(ns) = namespace {
            req = req.header("containerd-namespace", ns);
        }
        let req = req
            .body(Full::new(Bytes::from(frame)))
            .map_err(|e| CallError::Protocol(e.to_string()))?;
        sender
            .ready()
            .await
            .map_err(|e| CallError::Protocol(e.to_string()))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| CallError::Protocol(e.to_string()))?;
        let (parts, body) = resp.into_parts();
        if parts.status != hyper::StatusCode::OK {
            return Err(CallError::Protocol(format!("HTTP {}", parts.status)));
        }
        // A trailers-only answer carries grpc-status in the headers.
        if let Some(code) = grpc_status(&parts.headers) {
            if code != 0 {
                return Err(CallError::Status(code, grpc_message(&parts.headers)));
            }
        }
        let collected = Limited::new(body, limit)
            .collect()
            .await
            .map_err(|e| CallError::Protocol(e.to_string()))?;
        if let Some(t) = collected.trailers() {
            if let Some(code) = grpc_status(t) {
                if code != 0 {
                    return Err(CallError::Status(code, grpc_message(t)));
                }
            }
        }
        let data = collected.to_bytes();
        decode_frame::<R>(&data)
    };
    match timeout_at(deadline, work).await {
        Err(_) => Err(CallError::Timeout),
        Ok(r) => r,
    }
}

fn grpc_status(h: &hyper::HeaderMap) -> Option<u32> {
    h.get("grpc-status")?.to_str().ok()?.trim().parse().ok()
}

fn grpc_message(h: &hyper::HeaderMap) -> String {
    h.get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// The message of one gRPC length-prefixed frame (uncompressed).
fn decode_frame<R: prost::Message + Default>(data: &[u8]) -> Result<R, CallError> {
    if data.len() < 5 {
        return Err(CallError::Protocol(format!(
            "a gRPC answer of {} bytes",
            data.len()
        )));
    }
    if data[0] != 0 {
        return Err(CallError::Protocol("a compressed gRPC answer".into()));
    }
    let len = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
    let msg = data
        .get(5..5 + len)
        .ok_or_else(|| CallError::Protocol("a truncated gRPC answer".into()))?;
    R::decode(msg).map_err(|e| CallError::Protocol(format!("protobuf: {e}")))
}

/// A call error as the first call's outcome.
fn call_outcome(e: &CallError, start: Instant) -> Outcome {
    match e {
        CallError::Timeout => timed_out(start, true),
        other => Outcome::BadAnswer {
            latency: start.elapsed(),
            detail: other.detail(),
        },
    }
}

async fn containerd(
    socket: &Path,
    namespace: Option<String>,
    start: Instant,
    deadline: tokio::time::Instant,
) -> ContainerdReply {
    let mut reply = ContainerdReply {
        version_call: Outcome::Failed(String::new()),
        version: None,
        tasks: None,
    };
    let mut sender = match h2(socket, start, deadline).await {
        Err(o) => {
            reply.version_call = o;
            return reply;
        }
        Ok(s) => s,
    };
    match call::<ContainerdVersion>(
        &mut sender,
        "/containerd.services.version.v1.Version/Version",
        &(),
        None,
        SMALL_BODY,
        deadline,
    )
    .await
    {
        Ok(v) => {
            reply.version_call = Outcome::Answered {
                latency: start.elapsed(),
            };
            reply.version = Some(cut(&v.version));
        }
        Err(e) => {
            reply.version_call = call_outcome(&e, start);
            return reply;
        }
    }
    if let Some(ns) = namespace {
        if let Ok(list) = call::<ListTasksResponse>(
            &mut sender,
            "/containerd.services.tasks.v1.Tasks/List",
            &ListTasksRequest::default(),
            Some(&ns),
            LIST_BODY,
            deadline,
        )
        .await
        {
            reply.tasks = Some(
                list.tasks
                    .into_iter()
                    // The tasks service names an init process by its task id, the
                    // container's id (`ID`), and leaves `container_id` empty.
                    .map(|p| Task {
                        container_id: if p.id.is_empty() {
                            p.container_id
                        } else {
                            p.id
                        },
                        status: TaskStatus::from_i32(p.status),
                    })
                    .collect(),
            );
        }
    }
    reply
}

async fn cri(socket: &Path, start: Instant, deadline: tokio::time::Instant) -> CriReply {
    let mut reply = CriReply {
        version_call: Outcome::Failed(String::new()),
        runtime: None,
        conditions: None,
    };
    let mut sender = match h2(socket, start, deadline).await {
        Err(o) => {
            reply.version_call = o;
            return reply;
        }
        Ok(s) => s,
    };
    // runtime.v1 (containerd 1.6+, Kubernetes 1.23+), else the older v1alpha2.
    let mut api = "runtime.v1";
    let request = CriVersionRequest {
        version: "v1".into(),
    };
    let mut version = call::<CriVersion>(
        &mut sender,
        "/runtime.v1.RuntimeService/Version",
        &request,
        None,
        SMALL_BODY,
        deadline,
    )
    .await;
    if matches!(version, Err(CallError::Status(GRPC_UNIMPLEMENTED, _))) {
        api = "runtime.v1alpha2";
        version = call::<CriVersion>(
            &mut sender,
            "/runtime.v1alpha2.RuntimeService/Version",
            &request,
            None,
            SMALL_BODY,
            deadline,
        )
        .await;
    }
    match version {
        Ok(v) => {
            reply.version_call = Outcome::Answered {
                latency: start.elapsed(),
            };
            reply.runtime = Some((cut(&v.runtime_name), cut(&v.runtime_version)));
        }
        Err(e) => {
            reply.version_call = call_outcome(&e, start);
            return reply;
        }
    }
    if let Ok(s) = call::<CriStatus>(
        &mut sender,
        &format!("/{api}.RuntimeService/Status"),
        &CriStatusRequest { verbose: false },
        None,
        SMALL_BODY,
        deadline,
    )
    .await
    {
        reply.conditions = Some(
            s.status
                .map(|st| st.conditions)
                .unwrap_or_default()
                .into_iter()
                .map(|c| CriCondition {
                    kind: cut(&c.r#type),
                    status: c.status,
                    reason: cut(&c.reason),
                    message: cut(&c.message),
                })
                .collect(),
        );
    }
    reply
}

async fn healthz(
    addr: std::net::SocketAddr,
    start: Instant,
    deadline: tokio::time::Instant,
) -> HealthzReply {
    let stream = match timeout_at(deadline, tokio::net::TcpStream::connect(addr)).await {
        Err(_) => {
            return HealthzReply {
                outcome: timed_out(start, false),
                status: None,
            }
        }
        Ok(Err(e)) => {
            return HealthzReply {
                outcome: connect_error(&e),
                status: None,
            }
        }
        Ok(Ok(s)) => s,
    };
    let host = addr.to_string();
    let work = async {
        let mut sender = http1(stream).await?;
        get(&mut sender, &host, "/healthz", SMALL_BODY).await
    };
    match timeout_at(deadline, work).await {
        Err(_) => HealthzReply {
            outcome: timed_out(start, true),
            status: None,
        },
        Ok(Err(e)) => HealthzReply {
            outcome: Outcome::BadAnswer {
                latency: start.elapsed(),
                detail: cut(&e),
            },
            status: None,
        },
        Ok(Ok((200, body))) if body.trim_ascii() == b"ok" => HealthzReply {
            outcome: Outcome::Answered {
                latency: start.elapsed(),
            },
            status: Some(200),
        },
        Ok(Ok((status, body))) => HealthzReply {
            outcome: Outcome::BadAnswer {
                latency: start.elapsed(),
                detail: cut(&format!(
                    "HTTP {status}: {}",
                    String::from_utf8_lossy(&body).trim()
                )),
            },
            status: Some(status),
        },
    }
}

/// A socket path for a test server (kept short: unix socket paths are limited to 108 bytes).
#[cfg(test)]
fn test_socket(dir: &Path, name: &str) -> std::path::PathBuf {
    dir.join(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn plan(targets: Vec<Target>, ms: u64) -> ProbePlan {
        ProbePlan {
            targets,
            timeout: Duration::from_millis(ms),
        }
    }

    /// Serves `answer` (raw HTTP) to every connection on a unix socket, from a thread.
    fn serve_unix(path: &Path, answer: &'static str) -> std::thread::JoinHandle<()> {
        let l = std::os::unix::net::UnixListener::bind(path).unwrap();
        std::thread::spawn(move || {
            use std::io::{Read, Write};
            for s in l.incoming().take(1) {
                let mut s = s.unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                let _ = s.write_all(answer.as_bytes());
            }
        })
    }

    #[test]
    fn docker_ping_states() {
        let t = tempfile::tempdir().unwrap();
        let gone = test_socket(t.path(), "gone.sock");
        let stale = test_socket(t.path(), "stale.sock");
        // A socket nobody listens on: bound, then the listener dropped.
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        let file = t.path().join("file");
        std::fs::write(&file, "x").unwrap();
        let hung = test_socket(t.path(), "hung.sock");
        let _hung = std::os::unix::net::UnixListener::bind(&hung).unwrap();
        let bad = test_socket(t.path(), "bad.sock");
        let server = serve_unix(
            &bad,
            "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 5\r\n\r\nboom!",
        );
        let d = |socket: PathBuf| Target::Docker {
            socket,
            list_running: true,
        };
        // That the targets are asked together is `targets_are_asked_together`'s to show.
        let r = HostProbe.probe(&plan(
            vec![d(gone), d(stale), d(file), d(hung), d(bad)],
            1000,
        ));
        let pings: Vec<Outcome> = (0..5).map(|i| r.docker(i).unwrap().ping.clone()).collect();
        assert_eq!(pings[0], Outcome::NoSocket);
        assert_eq!(pings[1], Outcome::Refused);
        assert!(
            matches!(pings[2], Outcome::Refused | Outcome::NotSocket),
            "{:?}",
            pings[2]
        );
        assert!(
            matches!(
                pings[3],
                Outcome::Timeout {
                    connected: true,
                    ..
                }
            ),
            "{:?}",
            pings[3]
        );
        match &pings[4] {
            Outcome::BadAnswer { detail, .. } => assert_eq!(detail, "HTTP 500: boom!"),
            other => panic!("{other:?}"),
        }
        server.join().unwrap();
    }

    /// Three daemons that answer their ping only once all three have been asked: every ping
    /// is answered only if the probe holds the three connections open at once (asked in
    /// turn, the first would wait for the others until its deadline). No clock is read: the
    /// deadline is long, a failure guard only.
    #[test]
    fn targets_are_asked_together() {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicUsize, Ordering};
        const N: usize = 3;
        let t = tempfile::tempdir().unwrap();
        let arrived = Arc::new(AtomicUsize::new(0));
        let mut servers = Vec::new();
        let mut targets = Vec::new();
        for i in 0..N {
            let sock = test_socket(t.path(), &format!("gate{i}.sock"));
            let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
            let arrived = Arc::clone(&arrived);
            servers.push(std::thread::spawn(move || {
                let (mut s, _) = l.accept().unwrap();
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf);
                arrived.fetch_add(1, Ordering::SeqCst);
                // The failure guard: give up well after the probe's own deadline.
                for _ in 0..12_000 {
                    if arrived.load(Ordering::SeqCst) == N {
                        let _ = s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nOK");
                        let _ = s.read(&mut buf);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }));
            targets.push(Target::Docker {
                socket: sock,
                list_running: false,
            });
        }
        let r = HostProbe.probe(&plan(targets, 30_000));
        for i in 0..N {
            let ping = &r.docker(i).unwrap().ping;
            assert!(ping.answered(), "daemon {i}: {ping:?}");
        }
        for s in servers {
            s.join().unwrap();
        }
    }

    #[test]
    fn docker_answers_ping_version_and_containers() {
        let t = tempfile::tempdir().unwrap();
        let sock = test_socket(t.path(), "d.sock");
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let server = std::thread::spawn(move || {
            use std::io::{BufRead, BufReader, Write};
            let (s, _) = l.accept().unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut w = s;
            for _ in 0..3 {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    if h == "\r\n" || h.is_empty() {
                        break;
                    }
                }
                let body = if line.starts_with("GET /_ping") {
                    "OK".to_string()
                } else if line.starts_with("GET /version") {
                    r#"{"Version":"20.10.24+dfsg1","ApiVersion":"1.41"}"#.to_string()
                } else {
                    r#"[{"Id":"e890c05ecd92d61fe2e4bb1898a2d78bd5b11b2794f47c805c4033feaa5974cf","State":"running"}]"#.to_string()
                };
                write!(
                    w,
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .unwrap();
            }
        });
        let r = HostProbe.probe(&plan(
            vec![Target::Docker {
                socket: sock,
                list_running: true,
            }],
            2000,
        ));
        let d = r.docker(0).unwrap();
        assert!(d.ping.answered(), "{:?}", d.ping);
        assert_eq!(d.version.as_deref(), Some("20.10.24+dfsg1"));
        assert_eq!(
            d.running.as_deref(),
            Some(
                &["e890c05ecd92d61fe2e4bb1898a2d78bd5b11b2794f47c805c4033feaa5974cf".to_string()][..]
            )
        );
        server.join().unwrap();
    }

    #[test]
    fn healthz_over_tcp() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (ok, bad, refused) = rt.block_on(async {
            let ok = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let bad = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let refused = {
                let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
                l.local_addr().unwrap()
            };
            (ok, bad, refused)
        });
        let (ok_addr, bad_addr) = (ok.local_addr().unwrap(), bad.local_addr().unwrap());
        let answers: Arc<[(tokio::net::TcpListener, &'static str); 2]> = Arc::new([
            (ok, "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"),
            (bad, "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 33\r\n\r\n[-]syncloop failed: reason withheld"),
        ]);
        let server = std::thread::spawn(move || {
            rt.block_on(async move {
                for (l, a) in answers.iter() {
                    let (mut s, _) = l.accept().await.unwrap();
                    let mut buf = [0u8; 2048];
                    let _ = s.read(&mut buf).await;
                    s.write_all(a.as_bytes()).await.unwrap();
                    let _ = s.shutdown().await;
                }
            })
        });
        let r = HostProbe.probe(&plan(
            vec![
                Target::KubeletHealthz { addr: ok_addr },
                Target::KubeletHealthz { addr: bad_addr },
                Target::KubeletHealthz { addr: refused },
            ],
            2000,
        ));
        assert!(
            r.healthz(0).unwrap().outcome.answered(),
            "{:?}",
            r.healthz(0)
        );
        let b = r.healthz(1).unwrap();
        assert_eq!(b.status, Some(500));
        assert!(
            matches!(&b.outcome, Outcome::BadAnswer { detail, .. } if detail.starts_with("HTTP 500: [-]syncloop failed")),
            "{b:?}"
        );
        assert_eq!(r.healthz(2).unwrap().outcome, Outcome::Refused);
        server.join().unwrap();
    }

    #[test]
    fn grpc_frames_and_messages() {
        let v = ContainerdVersion {
            version: "1.6.20~ds1".into(),
            revision: "1.6.20~ds1-1".into(),
        };
        let msg = prost::Message::encode_to_vec(&v);
        let mut frame = vec![0];
        frame.extend_from_slice(&(msg.len() as u32).to_be_bytes());
        frame.extend_from_slice(&msg);
        assert_eq!(decode_frame::<ContainerdVersion>(&frame).unwrap(), v);
        assert!(decode_frame::<ContainerdVersion>(&frame[..4]).is_err());
        assert!(decode_frame::<ContainerdVersion>(&frame[..frame.len() - 1]).is_err());
        frame[0] = 1;
        assert!(decode_frame::<ContainerdVersion>(&frame).is_err());
        // A CRI Status answer with the info map (tag 2) the decoder skips.
        let status = CriStatus {
            status: Some(CriRuntimeStatus {
                conditions: vec![CriRuntimeCondition {
                    r#type: "NetworkReady".into(),
                    status: false,
                    reason: "NetworkPluginNotReady".into(),
                    message: "Network plugin returns error: cni plugin not initialized".into(),
                }],
            }),
        };
        let mut bytes = prost::Message::encode_to_vec(&status);
        bytes.extend_from_slice(&[0x12, 0x06, 0x0a, 0x01, b'k', 0x12, 0x01, b'v']);
        let back: CriStatus = prost::Message::decode(&bytes[..]).unwrap();
        assert_eq!(back, status);
        // containerd's Process with its other fields (stdin, exited_at…) skipped.
        let p = Process {
            container_id: "e890c05ecd92".into(),
            id: "e890c05ecd92".into(),
            pid: 26401,
            status: 2,
        };
        let mut bytes = prost::Message::encode_to_vec(&ListTasksResponse {
            tasks: vec![p.clone()],
        });
        bytes.extend_from_slice(&[0x2a, 0x00]);
        let back: ListTasksResponse = prost::Message::decode(&bytes[..]).unwrap();
        assert_eq!(back.tasks, vec![p]);
    }

    #[test]
    fn grpc_against_a_server_that_never_answers() {
        let t = tempfile::tempdir().unwrap();
        let sock = test_socket(t.path(), "c.sock");
        // Accepts and reads, never writes: the HTTP/2 handshake itself never completes.
        let l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let keep = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 1024];
            use std::io::Read;
            while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
        });
        // The 300 ms timeout ends the call; without it the call would wait for ever.
        let p = plan(
            vec![Target::Containerd {
                socket: sock.clone(),
                tasks_namespace: Some("moby".into()),
            }],
            300,
        );
        let r = crate::scheduler::fakes::within_30s("a gRPC call to a silent server", move || {
            HostProbe.probe(&p)
        });
        assert!(
            matches!(
                r.containerd(0).unwrap().version_call,
                Outcome::Timeout {
                    connected: true,
                    ..
                }
            ),
            "{:?}",
            r.containerd(0)
        );
        drop(r);
        // The probe's runtime is gone: the connection is closed and the server thread ends.
        keep.join().unwrap();
    }
}
