//! A stand-in for the Kubernetes API server, for node-doctor's reporter tests and its scale
//! simulation. There is no real API server on the project's machines; this one behaves like
//! the real one for everything node-doctor uses:
//!
//! - **HTTPS** with a CA made at start (`rcgen`), the server certificate for `127.0.0.1` and
//!   `localhost` signed by it; [`StandIn::kubeconfig`] writes a kubeconfig that trusts it.
//! - **Bearer tokens**: an unknown or missing token is `401`; a known token is the
//!   ServiceAccount `node-doctor/node-doctor`, whose requests are authorized by RBAC read from
//!   the shipped manifests ([`rbac::Rbac`]): a request they do not allow is `403`.
//! - **Nodes**: `GET /api/v1/nodes/{name}`; `PATCH /api/v1/nodes/{name}/status` with the four
//!   patch content types ([`patch`]) — strategic merge (conditions merged by `type`), JSON
//!   merge (lists replaced), JSON patch, and server-side apply (`fieldManager` required;
//!   conditions owned per manager, a manager's dropped conditions removed, a conflict with
//!   another manager's value `409` unless `force=true`); other types `415`. Only `status`
//!   changes through the subresource (spec and metadata of the patch are dropped, as the
//!   status strategy does); a `metadata.resourceVersion` in the patch that is not the
//!   current one is `409`; unknown nodes are `404`; a patch that changes nothing does not
//!   bump the resourceVersion.
//! - **Events** (`core/v1`): `POST /api/v1/namespaces/{ns}/events` and
//!   `PATCH …/events/{name}` (strategic merge or merge patch). The object's namespace must
//!   match the request's (`400`); the legacy validation of the real server applies: for an
//!   event about a cluster-scoped object (`involvedObject.namespace` empty) the event's
//!   namespace must be `default` (or, for an event with `eventTime`, `default` or
//!   `kube-system`), else `422`; `metadata.name` or `generateName` is required (`422`); an
//!   existing name is `409 AlreadyExists`; a patch of a missing event is `404`.
//! - **Every object stored** (a node after a status patch, an event after create or patch) is
//!   validated against the official Kubernetes OpenAPI schemas (kubernetes-validate's strict
//!   JSON schemas, vendored in `schemas/`); a violation is `422` and is recorded in
//!   [`StandIn::schema_errors`] so tests fail loudly.
//! - **Lists** (`GET /api/v1/nodes`, `GET /api/v1/namespaces/{ns}/events`, as
//!   `node-doctor fleet` reads them): `limit` and `continue` paginate in name order, with
//!   `metadata.continue` and `remainingItemCount`; a `continue` with a `resourceVersion` other
//!   than `0` is `400`, as on the real server; [`StandIn::ignore_list_limit`] makes a
//!   `resourceVersion=0` list answer everything at once, as the watch cache of older servers
//!   does; events take the real server's `fieldSelector` fields (`involvedObject.kind`,
//!   `involvedObject.name`, `reason`, `source`, `type`, `reportingComponent`; `=`, `==`,
//!   `!=`), others `400`. [`StandIn::put_node`] and [`StandIn::put_event`] stage whole objects.
//! - **Faults**: [`StandIn::fault`] queues answers for matching requests: any status with an
//!   optional `Retry-After` (`429`, `500`, `503`), or a stall before answering.
//!
//! Everything it receives is logged ([`StandIn::requests`]) with the authorizer's view of it.

pub mod describe;
pub mod fleet_stage;
mod list;
pub mod patch;
pub mod rbac;
pub mod schema;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use time::OffsetDateTime;

pub use rbac::{Attributes, Rbac};

/// The ServiceAccount the manifests create and the stand-in's token stands for.
pub const SA_NAMESPACE: &str = "node-doctor";
pub const SA_NAME: &str = "node-doctor";

/// Largest request body accepted (the real server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// How the stand-in starts.
#[derive(Clone)]
pub struct Options {
    /// Bearer tokens accepted (each is the ServiceAccount node-doctor/node-doctor).
    pub tokens: Vec<String>,
    /// RBAC applied to the ServiceAccount; `None` allows everything an authenticated
    /// ServiceAccount asks.
    pub rbac: Option<Rbac>,
    /// Keep the bodies of requests in the log (off for the scale simulation).
    pub record_bodies: bool,
    /// Tokio worker threads serving requests.
    pub workers: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            tokens: vec![DEFAULT_TOKEN.to_string()],
            rbac: None,
            record_bodies: true,
            workers: 1,
        }
    }
}

/// The token of [`Options::default`].
pub const DEFAULT_TOKEN: &str = "standin-token-0123456789abcdef";

/// The repository's `manifests/base`, for RBAC from the shipped manifests.
pub fn shipped_manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests/base")
}

/// One request as the stand-in saw it.
#[derive(Debug, Clone)]
pub struct Record {
    pub method: String,
    pub path: String,
    pub query: String,
    pub content_type: String,
    pub user_agent: String,
    /// The authorizer's attributes (None for paths outside the API).
    pub attributes: Option<Attributes>,
    pub status: u16,
    pub body: Option<Value>,
}

impl Record {
    /// A write (anything but GET).
    pub fn is_write(&self) -> bool {
        self.method != "GET"
    }
}

/// What a queued fault does to a matching request.
#[derive(Debug, Clone)]
pub enum FaultAction {
    /// Answer with this status (a Kubernetes `Status` body) and, when set, `Retry-After`.
    Status { code: u16, retry_after: Option<u64> },
    /// Wait this long, then handle the request normally.
    Stall(Duration),
    /// Wait until [`StandIn::release_held`], then handle the request normally: the test
    /// decides when the answer comes, so it can show what happened while it was awaited.
    /// [`StandIn::held`] counts the requests waiting.
    Hold,
}

/// A queued fault: applies to the next `times` requests whose method matches (when set) and
/// whose path contains `path_contains`.
#[derive(Debug, Clone)]
pub struct Fault {
    pub method: Option<String>,
    pub path_contains: String,
    pub times: usize,
    pub action: FaultAction,
}

/// Counters the scale simulation reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    pub node_gets: u64,
    pub status_patches: u64,
    pub event_creates: u64,
    pub event_patches: u64,
    /// List requests (`GET` of a collection), answered or not.
    pub node_lists: u64,
    pub event_lists: u64,
    pub errors: u64,
}

#[derive(Default)]
struct Cluster {
    nodes: BTreeMap<String, Value>,
    events: BTreeMap<(String, String), Value>,
    /// node -> condition type -> field manager that last set it.
    owners: BTreeMap<String, BTreeMap<String, String>>,
    rv: u64,
    uid: u64,
    log: Vec<Record>,
    faults: Vec<Fault>,
    schema_errors: Vec<String>,
    counts: Counts,
    /// A `resourceVersion=0` list answers everything, ignoring `limit`.
    ignore_limit: bool,
}

impl Cluster {
    fn next_rv(&mut self) -> String {
        self.rv += 1;
        self.rv.to_string()
    }
    fn next_uid(&mut self) -> String {
        self.uid += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.uid)
    }
}

struct Inner {
    opts: Options,
    cluster: Mutex<Cluster>,
    schemas: schema::Schemas,
    /// True once the test released the held requests (later ones pass at once).
    released: tokio::sync::watch::Sender<bool>,
    /// Requests waiting in a [`FaultAction::Hold`] now.
    held: std::sync::atomic::AtomicUsize,
}

/// Counts one held request while it waits (its future may also be dropped, when the client
/// goes away).
struct Holding<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> Holding<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Holding<'a> {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Holding(n)
    }
}

impl Drop for Holding<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A running stand-in. Dropping it stops the server.
pub struct StandIn {
    pub addr: SocketAddr,
    /// PEM of the CA that signed the server certificate.
    pub ca_pem: String,
    inner: Arc<Inner>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A CA and a server certificate for 127.0.0.1/localhost signed by it (PEM).
pub struct Pki {
    pub ca_pem: String,
    pub cert_pem: String,
    pub key_pem: String,
}

/// Makes a fresh CA and a server certificate signed by it.
pub fn make_pki() -> Result<Pki, String> {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose,
        SanType,
    };
    let e = |e: rcgen::Error| e.to_string();
    let ca_key = KeyPair::generate().map_err(e)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(e)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "kube-standin test CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).map_err(e)?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().map_err(e)?;
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(e)?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let cert = params.signed_by(&key, &issuer).map_err(e)?;
    Ok(Pki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    })
}

fn tls_config(pki: &Pki) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = vec![CertificateDer::from_pem_slice(pki.cert_pem.as_bytes())
        .map_err(|e| format!("server certificate: {e}"))?];
    let key = PrivateKeyDer::from_pem_slice(pki.key_pem.as_bytes())
        .map_err(|e| format!("server key: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| e.to_string())?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

impl StandIn {
    /// Starts on 127.0.0.1 (a free port) with its own CA.
    pub fn start(opts: Options) -> StandIn {
        let pki = make_pki().expect("make the stand-in's CA and certificate");
        let tls = Arc::new(tls_config(&pki).expect("TLS configuration"));
        let inner = Arc::new(Inner {
            schemas: schema::Schemas::load(),
            cluster: Mutex::new(Cluster::default()),
            opts: opts.clone(),
            released: tokio::sync::watch::Sender::new(false),
            held: std::sync::atomic::AtomicUsize::new(0),
        });
        let std_listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind the stand-in's port");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("local address");
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let served = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("kube-standin".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(opts.workers.max(1))
                    .enable_all()
                    .build()
                    .expect("stand-in runtime");
                rt.block_on(serve(std_listener, tls, served, stop_rx));
                rt.shutdown_timeout(Duration::from_millis(200));
            })
            .expect("start the stand-in thread");
        StandIn {
            addr,
            ca_pem: pki.ca_pem,
            inner,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Writes `ca.pem` and a kubeconfig (`kubeconfig`) that trusts it and sends `token`, into
    /// `dir`; returns the kubeconfig's path.
    pub fn kubeconfig(&self, dir: &Path, token: &str) -> PathBuf {
        write_kubeconfig(dir, &self.url(), &self.ca_pem, token)
    }

    fn cluster(&self) -> std::sync::MutexGuard<'_, Cluster> {
        self.inner.cluster.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a node (as the kubelet would) with these conditions; returns its uid.
    pub fn add_node(&self, name: &str, conditions: Vec<Value>) -> String {
        let mut c = self.cluster();
        let uid = c.next_uid();
        let rv = c.next_rv();
        let node = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "uid": uid,
                "resourceVersion": rv,
                "creationTimestamp": now_rfc3339(),
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
            },
            "spec": {},
            "status": {"conditions": conditions}
        });
        if let Err(e) = self.inner.schemas.check("Node", &node) {
            panic!("add_node: the stand-in's own node is invalid: {e}");
        }
        let owners = c.owners.entry(name.to_string()).or_default();
        for cond in node["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
        {
            if let Some(t) = cond.get("type").and_then(Value::as_str) {
                owners.insert(t.to_string(), "kubelet".to_string());
            }
        }
        c.nodes.insert(name.to_string(), node);
        uid
    }

    /// The stored node.
    pub fn node(&self, name: &str) -> Option<Value> {
        self.cluster().nodes.get(name).cloned()
    }

    /// One condition of a stored node.
    pub fn condition(&self, node: &str, ctype: &str) -> Option<Value> {
        self.node(node)?
            .pointer("/status/conditions")?
            .as_array()?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(ctype))
            .cloned()
    }

    /// Every stored event, oldest name first.
    pub fn events(&self) -> Vec<Value> {
        self.cluster().events.values().cloned().collect()
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Record> {
        self.cluster().log.clone()
    }

    pub fn clear_requests(&self) {
        self.cluster().log.clear();
    }

    pub fn counts(&self) -> Counts {
        self.cluster().counts.clone()
    }

    /// Objects that failed schema validation (should stay empty).
    pub fn schema_errors(&self) -> Vec<String> {
        self.cluster().schema_errors.clone()
    }

    /// Queues a fault.
    pub fn fault(&self, f: Fault) {
        self.cluster().faults.push(f);
    }

    /// Requests waiting in a [`FaultAction::Hold`] now (not yet answered, client still there
    /// or not yet noticed gone).
    pub fn held(&self) -> usize {
        self.inner.held.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Lets the held requests, and every later one a `Hold` fault catches, be answered.
    pub fn release_held(&self) {
        self.inner.released.send_replace(true);
    }

    pub fn clear_faults(&self) {
        self.cluster().faults.clear();
    }

    /// Sets one condition of a stored node (merged by type) as field manager `manager` would:
    /// it owns that type afterwards (another agent, such as the EKS node monitoring agent).
    pub fn set_condition_as(&self, node: &str, manager: &str, condition: Value) {
        let mut c = self.cluster();
        let rv = c.next_rv();
        let Some(t) = condition
            .get("type")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            return;
        };
        if let Some(n) = c.nodes.get_mut(node) {
            let list = n["status"]["conditions"]
                .as_array_mut()
                .map(std::mem::take)
                .unwrap_or_default();
            let mut list: Vec<Value> = list
                .into_iter()
                .filter(|x| x.get("type").and_then(Value::as_str) != Some(t.as_str()))
                .collect();
            list.push(condition);
            n["status"]["conditions"] = Value::Array(list);
            n["metadata"]["resourceVersion"] = Value::String(rv);
        }
        c.owners
            .entry(node.to_string())
            .or_default()
            .insert(t, manager.to_string());
    }

    /// Stores a whole Node object (labels, `status.nodeInfo`, conditions as given); its uid and
    /// resourceVersion are the stand-in's. Not schema-checked: a test stages thousands.
    pub fn put_node(&self, mut node: Value) {
        let mut c = self.cluster();
        let Some(name) = node
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .map(str::to_string)
        else {
            panic!("put_node: the node has no metadata.name");
        };
        node["metadata"]["uid"] = Value::String(c.next_uid());
        node["metadata"]["resourceVersion"] = Value::String(c.next_rv());
        c.nodes.insert(name, node);
    }

    /// Stores an Event in namespace `ns` as it is given (its `metadata.name` is the key).
    pub fn put_event(&self, ns: &str, mut ev: Value) {
        let mut c = self.cluster();
        let name = ev
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        ev["metadata"]["namespace"] = Value::String(ns.to_string());
        ev["metadata"]["resourceVersion"] = Value::String(c.next_rv());
        c.events.insert((ns.to_string(), name), ev);
    }

    /// With `true`, a list with `resourceVersion=0` answers every object at once whatever its
    /// `limit`, without `continue` (the watch cache of older API servers).
    pub fn ignore_list_limit(&self, on: bool) {
        self.cluster().ignore_limit = on;
    }

    /// Replaces a stored node's conditions as another writer would (e.g. the kubelet).
    pub fn set_conditions(&self, node: &str, conditions: Vec<Value>) {
        let mut c = self.cluster();
        let rv = c.next_rv();
        if let Some(n) = c.nodes.get_mut(node) {
            n["status"]["conditions"] = Value::Array(conditions);
            n["metadata"]["resourceVersion"] = Value::String(rv);
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes `ca.pem` and `kubeconfig` into `dir` for a server at `url`.
pub fn write_kubeconfig(dir: &Path, url: &str, ca_pem: &str, token: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("kubeconfig dir");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, ca_pem).expect("write ca.pem");
    let cfg = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: {url}\n    certificate-authority: {}\nusers:\n- name: node-doctor\n  user:\n    token: {token}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    user: node-doctor\ncurrent-context: standin\n",
        ca.display()
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, cfg).expect("write kubeconfig");
    path
}

/// RFC 3339, seconds, UTC: the format of `metav1.Time`.
pub fn now_rfc3339() -> String {
    rfc3339(OffsetDateTime::now_utc())
}

pub fn rfc3339(t: OffsetDateTime) -> String {
    let t = t.replace_nanosecond(0).unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

async fn serve(
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    inner: Arc<Inner>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((tcp, _)) = accepted else { continue };
                let acceptor = acceptor.clone();
                let inner = Arc::clone(&inner);
                tokio::spawn(async move {
                    // A client that does not trust our CA fails the handshake here.
                    let Ok(stream) = acceptor.accept(tcp).await else { return };
                    let svc = service_fn(move |req| {
                        let inner = Arc::clone(&inner);
                        async move { Ok::<_, Infallible>(handle(inner, req).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        }
    }
}

type Resp = Response<Full<Bytes>>;

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code
    })
}

fn respond(code: u16, body: &Value) -> Resp {
    let mut r = Response::new(Full::new(Bytes::from(
        serde_json::to_vec(body).unwrap_or_default(),
    )));
    *r.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    r
}

fn failure(code: u16, reason: &str, message: &str) -> Resp {
    respond(code, &status_body(code, reason, message))
}

/// The parts of an API path node-doctor can use.
#[derive(Debug, Clone, PartialEq)]
enum Route {
    Nodes,
    Node(String),
    NodeStatus(String),
    Events(String),
    Event(String, String),
    Other,
}

fn route(path: &str) -> Route {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api", "v1", "nodes"] => Route::Nodes,
        ["api", "v1", "nodes", n] => Route::Node(n.to_string()),
        ["api", "v1", "nodes", n, "status"] => Route::NodeStatus(n.to_string()),
        ["api", "v1", "namespaces", ns, "events"] => Route::Events(ns.to_string()),
        ["api", "v1", "namespaces", ns, "events", name] => {
            Route::Event(ns.to_string(), name.to_string())
        }
        _ => Route::Other,
    }
}

fn verb_of(method: &Method, has_name: bool) -> &'static str {
    match *method {
        Method::GET if has_name => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PATCH => "patch",
        Method::PUT => "update",
        Method::DELETE => "delete",
        _ => "unknown",
    }
}

/// The authorizer's view of any core-group path:
/// `/api/v1/[namespaces/<ns>/]<resource>[/<name>[/<subresource>]]`.
fn attributes(method: &Method, path: &str) -> Option<Attributes> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match parts.as_slice() {
        ["api", "v1", rest @ ..] => rest,
        _ => return None,
    };
    let (ns, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (resource, name) = match rest {
        [r] => (r.to_string(), None),
        [r, n] => (r.to_string(), Some(n.to_string())),
        [r, n, sub] => (format!("{r}/{sub}"), Some(n.to_string())),
        _ => return None,
    };
    Some(Attributes {
        verb: verb_of(method, name.is_some()).to_string(),
        api_group: String::new(),
        resource,
        namespace: ns,
        name,
    })
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| v.to_string())
    })
}

async fn handle(inner: Arc<Inner>, req: Request<Incoming>) -> Resp {
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let header = |name: hyper::header::HeaderName| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let content_type = header(hyper::header::CONTENT_TYPE);
    let user_agent = header(hyper::header::USER_AGENT);
    let auth = header(hyper::header::AUTHORIZATION);
    let r = route(&path);
    let attrs = attributes(&method, &path);
    let fault = take_fault(&inner, &method, &path);
    let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();

    let resp = match fault {
        Some(FaultAction::Status { code, retry_after }) => injected_status(code, retry_after),
        other => {
            match other {
                Some(FaultAction::Stall(d)) => tokio::time::sleep(d).await,
                Some(FaultAction::Hold) => {
                    let _holding = Holding::new(&inner.held);
                    let mut released = inner.released.subscribe();
                    let _ = released.wait_for(|r| *r).await;
                }
                _ => {}
            }
            match refusal(&inner, &auth, attrs.as_ref()) {
                Some(refused) => refused,
                None => dispatch(
                    &inner,
                    &method,
                    &r,
                    &query,
                    &content_type,
                    &user_agent,
                    &body,
                ),
            }
        }
    };
    let status = resp.status().as_u16();
    let mut c = inner.cluster.lock().unwrap_or_else(|e| e.into_inner());
    if status >= 400 {
        c.counts.errors += 1;
    }
    c.log.push(Record {
        method: method.to_string(),
        path,
        query,
        content_type,
        user_agent,
        attributes: attrs,
        status,
        body: if inner.opts.record_bodies {
            parsed
        } else {
            None
        },
    });
    resp
}

/// The first queued fault for this request, counted down (and dropped at zero).
fn take_fault(inner: &Inner, method: &Method, path: &str) -> Option<FaultAction> {
    let mut c = inner.cluster.lock().unwrap_or_else(|e| e.into_inner());
    let i = c.faults.iter().position(|f| {
        f.times > 0
            && f.method.as_deref().is_none_or(|m| m == method.as_str())
            && path.contains(&f.path_contains)
    })?;
    c.faults[i].times -= 1;
    let a = c.faults[i].action.clone();
    if c.faults[i].times == 0 {
        c.faults.remove(i);
    }
    Some(a)
}

/// An injected error status, with `Retry-After` (header and details) when the fault has one.
fn injected_status(code: u16, retry_after: Option<u64>) -> Resp {
    let reason = match code {
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        _ => "Unknown",
    };
    let mut body = status_body(code, reason, "injected by the stand-in");
    if let Some(s) = retry_after {
        body["details"] = json!({"retryAfterSeconds": s});
    }
    let mut resp = respond(code, &body);
    if let Some(s) = retry_after {
        if let Ok(v) = hyper::header::HeaderValue::from_str(&s.to_string()) {
            resp.headers_mut().insert(hyper::header::RETRY_AFTER, v);
        }
    }
    resp
}

/// 401 without a known bearer token; 403 when RBAC is on and does not allow the request;
/// `None` when it may proceed.
fn refusal(inner: &Inner, auth: &str, attrs: Option<&Attributes>) -> Option<Resp> {
    let token = auth
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| inner.opts.tokens.iter().any(|k| k == t));
    if token.is_none() {
        return Some(failure(401, "Unauthorized", "Unauthorized"));
    }
    let (Some(rbac), Some(a)) = (&inner.opts.rbac, attrs) else {
        return None;
    };
    if rbac.allows(a) {
        return None;
    }
    let resource = a.resource.replace('/', "\" in \"");
    Some(failure(
        403,
        "Forbidden",
        &format!(
            "{:?} is forbidden: User \"system:serviceaccount:{SA_NAMESPACE}:{SA_NAME}\" cannot {} resource \"{resource}\" in API group \"\"{}",
            a.name.as_deref().unwrap_or(""),
            a.verb,
            a.namespace.as_deref().map(|n| format!(" in the namespace \"{n}\"")).unwrap_or_else(|| " at the cluster scope".into())
        ),
    ))
}

fn dispatch(
    inner: &Inner,
    method: &Method,
    r: &Route,
    query: &str,
    content_type: &str,
    user_agent: &str,
    body: &[u8],
) -> Resp {
    let mut c = inner.cluster.lock().unwrap_or_else(|e| e.into_inner());
    match (method, r) {
        (&Method::GET, Route::Node(name)) => {
            c.counts.node_gets += 1;
            match c.nodes.get(name) {
                Some(n) => respond(200, &with_managed_fields(n, c.owners.get(name))),
                None => not_found("nodes", name),
            }
        }
        (&Method::GET, Route::Nodes) => {
            c.counts.node_lists += 1;
            let ignore = c.ignore_limit;
            list::answer(
                "NodeList",
                c.rv,
                c.nodes.iter().map(|(k, v)| (k.as_str(), v)),
                query,
                ignore,
                list::node_field,
            )
        }
        (&Method::GET, Route::Events(ns)) => {
            c.counts.event_lists += 1;
            let ignore = c.ignore_limit;
            list::answer(
                "EventList",
                c.rv,
                c.events
                    .iter()
                    .filter(|((n, _), _)| n == ns)
                    .map(|((_, k), v)| (k.as_str(), v)),
                query,
                ignore,
                list::event_field,
            )
        }
        (&Method::PATCH, Route::NodeStatus(name)) => {
            c.counts.status_patches += 1;
            patch_node_status(inner, &mut c, name, query, content_type, user_agent, body)
        }
        (&Method::POST, Route::Events(ns)) => {
            c.counts.event_creates += 1;
            create_event(inner, &mut c, ns, body)
        }
        (&Method::PATCH, Route::Event(ns, name)) => {
            c.counts.event_patches += 1;
            patch_event(inner, &mut c, ns, name, content_type, body)
        }
        (_, Route::Other) => failure(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ),
        _ => failure(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ),
    }
}

/// The node as the real server returns it: `metadata.managedFields` names, per field manager,
/// the conditions it owns (`f:status` / `f:conditions` / `k:{"type":"…"}`, as FieldsV1 does).
fn with_managed_fields(node: &Value, owners: Option<&BTreeMap<String, String>>) -> Value {
    let mut by_manager: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
    for (t, m) in owners.into_iter().flatten() {
        let key = format!("k:{}", json!({ "type": t }));
        let fields = json!({".": {}, "f:type": {}, "f:status": {}, "f:reason": {},
            "f:message": {}, "f:lastHeartbeatTime": {}, "f:lastTransitionTime": {}});
        by_manager
            .entry(m.as_str())
            .or_default()
            .insert(key, fields);
    }
    let entries: Vec<Value> = by_manager
        .into_iter()
        .map(|(m, conds)| {
            json!({
                "manager": m,
                "operation": "Update",
                "apiVersion": "v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:status": {"f:conditions": conds}},
                "subresource": "status",
            })
        })
        .collect();
    let mut out = node.clone();
    if !entries.is_empty() {
        out["metadata"]["managedFields"] = Value::Array(entries);
    }
    out
}

fn not_found(resource: &str, name: &str) -> Resp {
    let mut b = status_body(404, "NotFound", &format!("{resource} \"{name}\" not found"));
    b["details"] = json!({"name": name, "kind": resource});
    respond(404, &b)
}

const SMP: &str = "application/strategic-merge-patch+json";
const MERGE: &str = "application/merge-patch+json";
const JSON_PATCH: &str = "application/json-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

fn media_type(content_type: &str) -> &str {
    content_type.split(';').next().unwrap_or("").trim()
}

fn manager_of(query: &str, user_agent: &str) -> String {
    query_param(query, "fieldManager")
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| {
            // The real server derives an update's manager from the User-Agent's program name.
            user_agent
                .split('/')
                .next()
                .unwrap_or("unknown")
                .to_string()
        })
}

fn condition_types(node: &Value) -> Vec<String> {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("type").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Why a request is refused: the status code, the reason and the message of [`failure`].
type Refusal = (u16, &'static str, String);

fn refuse((code, reason, message): Refusal) -> Resp {
    failure(code, reason, &message)
}

fn patch_node_status(
    inner: &Inner,
    c: &mut Cluster,
    name: &str,
    query: &str,
    content_type: &str,
    user_agent: &str,
    body: &[u8],
) -> Resp {
    let Some(old) = c.nodes.get(name).cloned() else {
        return not_found("nodes", name);
    };
    let media = media_type(content_type);
    let manager = manager_of(query, user_agent);
    let patch = match decode_patch(media, body) {
        Ok(p) => p,
        Err(r) => return refuse(r),
    };
    if let Err(r) = resource_version_holds(name, &patch, &old) {
        return refuse(r);
    }
    let mut new = old.clone();
    let before_types = condition_types(&old);
    let patched = match media {
        SMP => patch::strategic(&mut new, &patch).map_err(patch_refusal),
        MERGE => {
            patch::merge(&mut new, &patch);
            Ok(())
        }
        JSON_PATCH => patch::json_patch(&mut new, &patch).map_err(patch_refusal),
        _ => server_side_apply(c, name, query, &manager, &patch, &old, &mut new),
    };
    if let Err(r) = patched {
        return refuse(r);
    }
    // The status subresource changes status only.
    new["spec"] = old["spec"].clone();
    new["metadata"] = old["metadata"].clone();
    new["apiVersion"] = old["apiVersion"].clone();
    new["kind"] = old["kind"].clone();
    if media != APPLY {
        let owners = c.owners.entry(name.to_string()).or_default();
        update_owners(owners, media, &manager, &patch, &before_types, &new);
    }
    if new == old {
        return respond(200, &new);
    }
    if let Err(e) = inner.schemas.check("Node", &new) {
        c.schema_errors.push(format!("node {name}: {e}"));
        return failure(422, "Invalid", &format!("Node \"{name}\" is invalid: {e}"));
    }
    if let Err(e) = validate_conditions(&new) {
        return failure(422, "Invalid", &format!("Node \"{name}\" is invalid: {e}"));
    }
    let rv = c.next_rv();
    new["metadata"]["resourceVersion"] = Value::String(rv);
    c.nodes.insert(name.to_string(), new.clone());
    respond(200, &new)
}

/// The patch document of a `media` type: YAML for apply, JSON for the others.
fn decode_patch(media: &str, body: &[u8]) -> Result<Value, Refusal> {
    match media {
        APPLY => serde_yaml::from_slice::<Value>(body)
            .map_err(|e| (400, "BadRequest", format!("error decoding YAML: {e}"))),
        SMP | MERGE | JSON_PATCH => serde_json::from_slice(body)
            .map_err(|e| (400, "BadRequest", format!("error decoding patch: {e}"))),
        _ => Err((
            415,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: {JSON_PATCH}, {MERGE}, {SMP}, {APPLY}"),
        )),
    }
}

/// A resourceVersion in the patch is a precondition: it must be the stored one.
fn resource_version_holds(name: &str, patch: &Value, old: &Value) -> Result<(), Refusal> {
    if let Some(rv) = patch
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
    {
        if Some(rv)
            != old
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
        {
            return Err((
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on nodes \"{name}\": the object has been modified; please apply your changes to the latest version and try again"),
            ));
        }
    }
    Ok(())
}

fn patch_refusal(e: patch::PatchError) -> Refusal {
    let reason = if e.code == 400 {
        "BadRequest"
    } else {
        "Invalid"
    };
    (e.code, reason, e.message)
}

/// Server-side apply of `patch` onto `new` by `manager`: refused on a condition another
/// manager owns with other values (unless forced); the conditions this manager applied before
/// and no longer applies are removed.
fn server_side_apply(
    c: &mut Cluster,
    name: &str,
    query: &str,
    manager: &str,
    patch: &Value,
    old: &Value,
    new: &mut Value,
) -> Result<(), Refusal> {
    if query_param(query, "fieldManager").is_none_or(|m| m.is_empty()) {
        return Err((
            422,
            "Invalid",
            "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
        ));
    }
    if patch.get("apiVersion").and_then(Value::as_str) != Some("v1")
        || patch.get("kind").and_then(Value::as_str) != Some("Node")
    {
        return Err((
            400,
            "BadRequest",
            "apply patch: apiVersion v1 and kind Node must be set".into(),
        ));
    }
    let force = query_param(query, "force").as_deref() == Some("true");
    let owners = c.owners.entry(name.to_string()).or_default();
    let applied: Vec<Value> = patch
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for a in &applied {
        let Some(t) = a.get("type").and_then(Value::as_str) else {
            return Err((422, "Invalid", "apply: a condition has no type".into()));
        };
        if let Some(owner) = owners.get(t) {
            let live = old
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .and_then(|l| {
                    l.iter()
                        .find(|x| x.get("type").and_then(Value::as_str) == Some(t))
                });
            let differs = live.is_some_and(|l| {
                a.as_object()
                    .into_iter()
                    .flatten()
                    .any(|(k, v)| l.get(k) != Some(v))
            });
            if owner != manager && differs && !force {
                return Err((
                    409,
                    "Conflict",
                    format!("Apply failed with 1 conflict: conflict with \"{owner}\": .status.conditions[type=\"{t}\"]"),
                ));
            }
        }
    }
    // Conditions this manager applied before and no longer applies are removed.
    let applied_types: Vec<String> = applied
        .iter()
        .filter_map(|a| a.get("type").and_then(Value::as_str).map(str::to_string))
        .collect();
    let dropped: Vec<String> = owners
        .iter()
        .filter(|(t, m)| *m == manager && !applied_types.contains(t))
        .map(|(t, _)| t.clone())
        .collect();
    if let Some(list) = new
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        list.retain(|x| {
            x.get("type")
                .and_then(Value::as_str)
                .is_none_or(|t| !dropped.iter().any(|d| d == t))
        });
    }
    for t in &dropped {
        owners.remove(t);
    }
    patch::apply_merge(new, patch);
    for t in applied_types {
        owners.insert(t, manager.to_string());
    }
    Ok(())
}

/// After an update (not an apply): a removed condition loses its owner; the conditions the
/// patch names (a JSON patch: those it added) are owned by `manager`.
fn update_owners(
    owners: &mut BTreeMap<String, String>,
    media: &str,
    manager: &str,
    patch: &Value,
    before_types: &[String],
    new: &Value,
) {
    let after = condition_types(new);
    for t in before_types.iter().filter(|t| !after.contains(t)) {
        owners.remove(t);
    }
    let patched: Vec<String> = match media {
        JSON_PATCH => after.clone(),
        _ => patch
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.get("type").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default(),
    };
    for t in patched.into_iter().filter(|t| after.contains(t)) {
        if media != JSON_PATCH || !before_types.contains(&t) {
            owners.insert(t, manager.to_string());
        }
    }
}

/// What the real server's validation adds to the schema for node conditions: `type` and
/// `status` are required (the Go types carry them without `omitempty`).
fn validate_conditions(node: &Value) -> Result<(), String> {
    for (i, c) in node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        for f in ["type", "status"] {
            if c.get(f).and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(format!("status.conditions[{i}].{f}: Required value"));
            }
        }
    }
    Ok(())
}

fn validate_event(ev: &Value) -> Result<(), String> {
    let ns = ev
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let inv_ns = ev
        .pointer("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let has_event_time = ev.get("eventTime").is_some_and(|t| !t.is_null());
    if !has_event_time {
        if inv_ns.is_empty() {
            if !ns.is_empty() && ns != "default" {
                return Err(format!("involvedObject.namespace: Invalid value: \"{inv_ns}\": does not match event.namespace"));
            }
        } else if ns != inv_ns {
            return Err(format!("involvedObject.namespace: Invalid value: \"{inv_ns}\": does not match event.namespace"));
        }
    } else {
        if inv_ns.is_empty() && ns != "default" && ns != "kube-system" {
            return Err(format!("involvedObject.namespace: Invalid value: \"{inv_ns}\": does not match event.namespace"));
        }
        let s = |k: &str| ev.get(k).and_then(Value::as_str).unwrap_or("");
        if s("reportingComponent").is_empty() {
            return Err("source: Required value".into());
        }
        if s("reportingInstance").is_empty() || s("reportingInstance").len() > 128 {
            return Err("reportingInstance: Required value (at most 128 characters)".into());
        }
        if s("action").is_empty() || s("action").len() > 128 {
            return Err("action: Required value (at most 128 characters)".into());
        }
        if s("reason").is_empty() || s("reason").len() > 128 {
            return Err("reason: Required value (at most 128 characters)".into());
        }
        if s("message").len() > 1024 {
            return Err("message: can have at most 1024 characters".into());
        }
    }
    Ok(())
}

fn create_event(inner: &Inner, c: &mut Cluster, ns: &str, body: &[u8]) -> Resp {
    let mut ev: Value = match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return failure(400, "BadRequest", "the body is not an Event object"),
    };
    match ev.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(b) if !b.is_empty() && b != ns => return failure(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
        ),
        _ => ev["metadata"]["namespace"] = Value::String(ns.to_string()),
    }
    let name = match ev.pointer("/metadata/name").and_then(Value::as_str) {
        Some(n) if !n.is_empty() => n.to_string(),
        _ => match ev.pointer("/metadata/generateName").and_then(Value::as_str) {
            Some(g) if !g.is_empty() => format!("{g}{:05x}", c.uid + 1),
            _ => {
                return failure(
                    422,
                    "Invalid",
                    "Event \"\" is invalid: metadata.name: Required value: name or generateName is required",
                )
            }
        },
    };
    if let Err(e) = validate_event(&ev) {
        return failure(422, "Invalid", &format!("Event \"{name}\" is invalid: {e}"));
    }
    if c.events.contains_key(&(ns.to_string(), name.clone())) {
        let mut b = status_body(
            409,
            "AlreadyExists",
            &format!("events \"{name}\" already exists"),
        );
        b["details"] = json!({"name": name, "kind": "events"});
        return respond(409, &b);
    }
    let uid = c.next_uid();
    let rv = c.next_rv();
    ev["metadata"]["name"] = Value::String(name.clone());
    ev["metadata"]["uid"] = Value::String(uid);
    ev["metadata"]["resourceVersion"] = Value::String(rv);
    ev["metadata"]["creationTimestamp"] = Value::String(now_rfc3339());
    if let Err(e) = inner.schemas.check("Event", &ev) {
        c.schema_errors.push(format!("event {ns}/{name}: {e}"));
        return failure(422, "Invalid", &format!("Event \"{name}\" is invalid: {e}"));
    }
    c.events.insert((ns.to_string(), name), ev.clone());
    respond(201, &ev)
}

fn patch_event(
    inner: &Inner,
    c: &mut Cluster,
    ns: &str,
    name: &str,
    content_type: &str,
    body: &[u8],
) -> Resp {
    let key = (ns.to_string(), name.to_string());
    let Some(old) = c.events.get(&key).cloned() else {
        return not_found("events", name);
    };
    let patch: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return failure(400, "BadRequest", &format!("error decoding patch: {e}")),
    };
    let mut new = old.clone();
    match media_type(content_type) {
        SMP => {
            if let Err(e) = patch::strategic(&mut new, &patch) {
                return failure(e.code, "Invalid", &e.message);
            }
        }
        MERGE => patch::merge(&mut new, &patch),
        JSON_PATCH => {
            if let Err(e) = patch::json_patch(&mut new, &patch) {
                return failure(e.code, "Invalid", &e.message);
            }
        }
        other => {
            return failure(
                415,
                "UnsupportedMediaType",
                &format!("unsupported media type {other:?} for events"),
            )
        }
    }
    // Identity cannot change.
    for f in ["name", "namespace", "uid", "creationTimestamp"] {
        new["metadata"][f] = old["metadata"][f].clone();
    }
    if let Err(e) = validate_event(&new) {
        return failure(422, "Invalid", &format!("Event \"{name}\" is invalid: {e}"));
    }
    if let Err(e) = inner.schemas.check("Event", &new) {
        c.schema_errors.push(format!("event {ns}/{name}: {e}"));
        return failure(422, "Invalid", &format!("Event \"{name}\" is invalid: {e}"));
    }
    if new != old {
        let rv = c.next_rv();
        new["metadata"]["resourceVersion"] = Value::String(rv);
    }
    c.events.insert(key, new.clone());
    respond(200, &new)
}
