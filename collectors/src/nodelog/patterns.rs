//! What a line of kubelet, dockerd or containerd means: the handbook's messages, recognised in
//! the forms these programs really print them (klog text and structured klog, logrus
//! `level=error msg="…"` with its `\"` escapes, and the same nested inside kubelet's `err="…"`).
//! Names a line carries (container, pod, namespace, image, registry) are taken only when they
//! are valid names of their kind; a line whose name is not is not an event.
//!
//! Sources of the messages: handbook 002 (quoted in each kind's documentation), and the
//! components' own code where the handbook only paraphrases (kubelet `kubelet.go`
//! `updateRuntimeUp`/`runtimeState`, containerd's CRI `reserve … name`).

/// The kinds of problem a line can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// kubelet: `PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s`
    /// (the handbook: kubelet logs "PLEG unhealthy" when the runtime's disk is full).
    PlegUnhealthy,
    /// kubelet: `container runtime is down`, `Container runtime not ready`
    /// (`RuntimeReady=false reason:DockerDaemonNotReady …`).
    RuntimeNotReady,
    /// kubelet: `Container runtime network not ready` (`NetworkReady=false
    /// reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config
    /// uninitialized`).
    NetworkNotReady,
    /// Any of them: `no space left on device` (the handbook's dockerd line `Failed to log msg
    /// … no space left on device`).
    NoSpace,
    /// dockerd: `Conflict. The container name "/k8s_POD_…" is already in use by container
    /// "30aa3f…"`; containerd: `failed to reserve sandbox name "…": name "…" is reserved for
    /// "…"`.
    NameConflict,
    /// `ttrpc: client shutting down: read unix @->@/containerd-shim/moby/…/shim.sock: read:
    /// connection reset by peer` (handbook: two docker installations).
    Ttrpc,
    /// `http: server gave HTTP response to HTTPS client`.
    PullHttpRegistry,
    /// `x509: certificate signed by unknown authority`.
    PullUnknownCa,
    /// `pull access denied`, `unauthorized: authentication required`, `no basic auth
    /// credentials`.
    PullAuth,
    /// `manifest for imroc/test:v0.2 not found`, `manifest unknown`, `failed to resolve
    /// reference "…": … not found`.
    PullNotFound,
    /// A file the runtime or the kubelet could not remove: `driver "overlay2" failed to
    /// remove root filesystem: remove /data/docker/overlay2/<layer>/diff/usr/bin/bash:
    /// operation not permitted` (handbook 002, Terminating: the "i" attribute), `unlinkat
    /// <path>: operation not permitted`. The subject is the path, which the runtime
    /// collector checks for the attribute; no log rule of its own.
    RemoveNotPermitted,
    /// dockerd: `… returned error: readlink /var/lib/docker/overlay2/<layer>: invalid
    /// argument` (node-problem-detector's `CorruptDockerOverlay2`): a layer directory of the
    /// overlay2 store is broken (its `link` file or `l/` symlink). The subject is the layer.
    CorruptOverlay2,
    /// dockerd: `failed to register layer: rename /var/lib/docker/image/… /var/lib/docker/
    /// image/…: directory not empty` (NPD's `CorruptDockerImage`): the image store holds a
    /// half-written layer, so pulls of images sharing it fail.
    CorruptImage,
    /// dockerd / kubelet: `OCI runtime start failed: container process is already dead`
    /// (NPD's `DockerContainerStartupFailure`): runc started the container's process and it
    /// was gone before docker could start it.
    StartDead,
}

impl EventKind {
    pub const ALL: [EventKind; 14] = [
        EventKind::PlegUnhealthy,
        EventKind::RuntimeNotReady,
        EventKind::NetworkNotReady,
        EventKind::NoSpace,
        EventKind::NameConflict,
        EventKind::Ttrpc,
        EventKind::PullHttpRegistry,
        EventKind::PullUnknownCa,
        EventKind::PullAuth,
        EventKind::PullNotFound,
        EventKind::RemoveNotPermitted,
        EventKind::CorruptOverlay2,
        EventKind::CorruptImage,
        EventKind::StartDead,
    ];

    /// The `kind` label of the match counter.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::PlegUnhealthy => "pleg_unhealthy",
            EventKind::RuntimeNotReady => "runtime_not_ready",
            EventKind::NetworkNotReady => "network_not_ready",
            EventKind::NoSpace => "no_space",
            EventKind::NameConflict => "name_conflict",
            EventKind::Ttrpc => "ttrpc",
            EventKind::PullHttpRegistry => "pull_http_registry",
            EventKind::PullUnknownCa => "pull_unknown_ca",
            EventKind::PullAuth => "pull_auth",
            EventKind::PullNotFound => "pull_not_found",
            EventKind::RemoveNotPermitted => "remove_not_permitted",
            EventKind::CorruptOverlay2 => "corrupt_overlay2",
            EventKind::CorruptImage => "corrupt_image",
            EventKind::StartDead => "start_dead",
        }
    }

    /// A condition that repeats while it lasts (kubelet logs these every few seconds), as
    /// opposed to an error of one operation retried with back-off.
    pub fn is_state(self) -> bool {
        matches!(
            self,
            EventKind::PlegUnhealthy | EventKind::RuntimeNotReady | EventKind::NetworkNotReady
        )
    }
}

/// Which runtime a line is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runtime {
    Docker,
    Containerd,
}

impl Runtime {
    pub fn as_str(self) -> &'static str {
        match self {
            Runtime::Docker => "docker",
            Runtime::Containerd => "containerd",
        }
    }
}

/// What else a line names, each validated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    pub runtime: Option<Runtime>,
    /// Conflict: the pod, its namespace and the id of the container holding the name.
    pub pod: Option<String>,
    pub namespace: Option<String>,
    pub holder: Option<String>,
    /// Pulls: the registry (`host[:port]`, `docker.io` for Docker Hub names).
    pub registry: Option<String>,
    /// Readiness: kubelet's reason (`DockerDaemonNotReady`, `NetworkPluginNotReady`).
    pub reason: Option<String>,
    /// No space: the path the runtime failed to write.
    pub path: Option<String>,
}

impl Detail {
    /// Takes what `newer` knows, keeping what it does not (kubelet's "container runtime is
    /// down" has no reason; the "Container runtime not ready" line before it had one).
    pub fn merge(&mut self, newer: Detail) {
        fn take<T>(old: &mut Option<T>, new: Option<T>) {
            if new.is_some() {
                *old = new;
            }
        }
        take(&mut self.runtime, newer.runtime);
        take(&mut self.pod, newer.pod);
        take(&mut self.namespace, newer.namespace);
        take(&mut self.holder, newer.holder);
        take(&mut self.registry, newer.registry);
        take(&mut self.reason, newer.reason);
        take(&mut self.path, newer.path);
    }
}

/// One recognised problem in one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// What it is about: the container name of a conflict, the image (or the registry) of a
    /// pull; empty for node-wide states.
    pub subject: String,
    pub detail: Detail,
}

impl Event {
    fn new(kind: EventKind) -> Event {
        Event {
            kind,
            subject: String::new(),
            detail: Detail::default(),
        }
    }
}

/// Removes the backslashes before quotes (logrus and klog escape nested quotes, sometimes
/// twice: `\"`, `\\\"`), so names can be cut at quotes.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending = 0usize;
    for c in s.chars() {
        if c == '\\' {
            pending += 1;
            continue;
        }
        if c != '"' {
            out.extend(std::iter::repeat_n('\\', pending));
        }
        pending = 0;
        out.push(c);
    }
    out.extend(std::iter::repeat_n('\\', pending));
    out
}

/// The text inside the quotes right after `marker` (`marker` ends before the opening quote).
fn quoted_after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    let i = s.find(marker)? + marker.len();
    let rest = s[i..].strip_prefix('"')?;
    let end = rest.find('"')?;
    Some(&rest[..end])
}

/// Recognises the handbook's messages in a line of `ident` (`kubelet`, `dockerd`,
/// `containerd`, …). Usually zero or one event; kubelet's node-status lines can carry two
/// (`container runtime is down,PLEG is not healthy: …`).
pub fn classify(ident: &str, message: &str) -> Vec<Event> {
    let mut out = Vec::new();
    // Cheap pre-filter: none of the phrases, no work.
    const HINTS: [&str; 18] = [
        "PLEG",
        "pleg",
        "untime",
        "etwork",
        "no space left",
        "Conflict",
        "reserve",
        "ttrpc",
        "HTTP response",
        "x509",
        "access denied",
        "nauthorized",
        "auth credentials",
        "not found",
        "not permitted",
        "readlink",
        "register layer",
        "already dead",
    ];
    if !HINTS.iter().any(|h| message.contains(h)) && !message.contains("manifest unknown") {
        return out;
    }
    let m = unescape(message);
    let kubelet = ident == "kubelet";
    let runtime = runtime_of(ident, &m);

    if kubelet
        && (m.contains("PLEG is not healthy")
            || m.contains("pleg was last seen active")
            || m.contains("pleg has yet to be successful"))
    {
        out.push(Event::new(EventKind::PlegUnhealthy));
    }
    if kubelet
        && (m.contains("container runtime is down")
            || m.contains("Container runtime not ready")
            || m.contains("RuntimeReady=false"))
    {
        let mut e = Event::new(EventKind::RuntimeNotReady);
        e.detail.reason = reason_after(&m, "RuntimeReady=false reason:");
        out.push(e);
    }
    if kubelet
        && (m.contains("Container runtime network not ready")
            || m.contains("NetworkReady=false")
            || m.contains("network plugin is not ready")
            || m.contains("cni plugin not initialized"))
    {
        let mut e = Event::new(EventKind::NetworkNotReady);
        e.detail.reason = reason_after(&m, "NetworkReady=false reason:");
        out.push(e);
    }
    if m.contains("no space left on device") {
        let mut e = Event::new(EventKind::NoSpace);
        e.detail.path = path_before_no_space(&m);
        e.detail.runtime = runtime;
        out.push(e);
    }
    if let Some(e) = name_conflict(&m, runtime) {
        out.push(e);
    }
    if m.contains("ttrpc: client shutting down") || m.contains("ttrpc: closed") {
        let mut e = Event::new(EventKind::Ttrpc);
        e.detail.runtime = runtime;
        out.push(e);
    }
    if let Some(path) = path_not_removed(&m) {
        let mut e = Event::new(EventKind::RemoveNotPermitted);
        e.subject = path.clone();
        e.detail.path = Some(path);
        e.detail.runtime = runtime;
        out.push(e);
    }
    if let Some(layer) = corrupt_overlay2_layer(&m) {
        let mut e = Event::new(EventKind::CorruptOverlay2);
        e.subject = layer.clone();
        e.detail.path = Some(layer);
        e.detail.runtime = Some(Runtime::Docker);
        out.push(e);
    }
    if m.contains("failed to register layer") {
        let mut e = Event::new(EventKind::CorruptImage);
        e.subject = image_of(&m).unwrap_or_else(|| "dockerd".to_string());
        e.detail.runtime = Some(Runtime::Docker);
        out.push(e);
    }
    if m.contains("container process is already dead") {
        let mut e = Event::new(EventKind::StartDead);
        e.subject = match runtime {
            Some(Runtime::Docker) => "dockerd",
            Some(Runtime::Containerd) => "containerd",
            None => "container runtime",
        }
        .to_string();
        e.detail.runtime = runtime;
        out.push(e);
    }
    if let Some(kind) = pull_kind(&m) {
        let image = image_of(&m);
        let registry = image
            .as_deref()
            .map(registry_of)
            .or_else(|| registry_from_url(&m));
        // A pull failure names its image or at least its registry; one that names neither
        // (dockerd's "Attempting next endpoint" follow-up lines) adds nothing.
        if let Some(registry) = registry {
            let mut e = Event::new(kind);
            e.subject = image.clone().unwrap_or_else(|| registry.clone());
            e.detail.registry = Some(registry);
            e.detail.runtime = runtime;
            out.push(e);
        }
    }
    out
}

/// The runtime a line speaks for: its program, or docker's and containerd's own phrases in
/// kubelet's relay of them.
fn runtime_of(ident: &str, m: &str) -> Option<Runtime> {
    match ident {
        "dockerd" | "docker" => Some(Runtime::Docker),
        "containerd" => Some(Runtime::Containerd),
        _ if m.contains("Error response from daemon") || m.contains("containerd-shim/moby") => {
            Some(Runtime::Docker)
        }
        _ if m.contains("failed to pull and unpack image")
            || m.contains("failed to reserve")
            || m.contains("failed to resolve reference") =>
        {
            Some(Runtime::Containerd)
        }
        _ => None,
    }
}

/// `readlink /var/lib/docker/overlay2/<layer>: invalid argument` -> the layer directory
/// (`…/overlay2/<layer>`, whatever docker's data-root), when it is a plain absolute path.
fn corrupt_overlay2_layer(m: &str) -> Option<String> {
    let end = m.find(": invalid argument")?;
    let start = m[..end].rfind("readlink ")? + "readlink ".len();
    let p = &m[start..end];
    let at = p.find("/overlay2/")?;
    let layer_end = p[at + "/overlay2/".len()..]
        .find('/')
        .map_or(p.len(), |i| at + "/overlay2/".len() + i);
    let layer = &p[..layer_end];
    (layer.starts_with('/')
        && layer.len() <= 512
        && layer.len() > at + "/overlay2/".len()
        && !layer.contains("..")
        && layer
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-".contains(&b)))
    .then(|| layer.to_string())
}

/// `reason:DockerDaemonNotReady` -> `DockerDaemonNotReady` (letters only).
fn reason_after(m: &str, marker: &str) -> Option<String> {
    let i = m.find(marker)? + marker.len();
    let r: String = m[i..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric())
        .take(64)
        .collect();
    (!r.is_empty()).then_some(r)
}

/// `write /opt/docker/containers/…-json.log: no space left on device` -> the path.
fn path_before_no_space(m: &str) -> Option<String> {
    let end = m.find(": no space left on device")?;
    let head = &m[..end];
    let start = head.rfind(' ')? + 1;
    let p = &head[start..];
    (p.starts_with('/')
        && p.len() <= 512
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-:+@".contains(&b)))
    .then(|| p.to_string())
}

/// `remove <path>: operation not permitted` or `unlinkat <path>: operation not permitted`
/// -> the path: absolute, at most 1 KiB, no control characters and no `..` component (it is
/// host text; the reader resolves it under the host root again before looking at it).
fn path_not_removed(m: &str) -> Option<String> {
    const TAIL: &str = ": operation not permitted";
    let end = m.find(TAIL)?;
    let head = &m[..end];
    let start = ["remove ", "unlinkat ", "unlink "]
        .iter()
        .filter_map(|op| head.rfind(op).map(|i| i + op.len()))
        .max()?;
    let p = &head[start..];
    (p.starts_with('/')
        && p.len() <= 1024
        && !p.chars().any(char::is_control)
        && !p.split('/').any(|c| c == ".."))
    .then(|| p.to_string())
}

fn name_conflict(m: &str, runtime: Option<Runtime>) -> Option<Event> {
    // dockerd (also relayed by kubelet): Conflict. The container name "/k8s_…" is already in
    // use by container "<id>".
    if m.contains("is already in use by container") {
        let name = quoted_after(m, "The container name ")?;
        let holder = quoted_after(m, "is already in use by container ");
        let name = name.strip_prefix('/').unwrap_or(name);
        let (pod, namespace) = docker_k8s_name(name)?;
        let mut e = Event::new(EventKind::NameConflict);
        e.subject = name.to_string();
        e.detail.pod = Some(pod);
        e.detail.namespace = Some(namespace);
        e.detail.holder = holder
            .filter(|h| crate::names::is_container_id(h))
            .map(String::from);
        e.detail.runtime = Some(Runtime::Docker);
        return Some(e);
    }
    // containerd CRI: failed to reserve sandbox name "<pod>_<ns>_<uid>_<n>": name "…" is
    // reserved for "<id>"; failed to reserve container name "<c>_<pod>_<ns>_<uid>_<n>": …
    for (marker, sandbox) in [
        ("failed to reserve sandbox name ", true),
        ("failed to reserve container name ", false),
    ] {
        if let Some(name) = quoted_after(m, marker) {
            let (pod, namespace) = cri_name(name, sandbox)?;
            let mut e = Event::new(EventKind::NameConflict);
            e.subject = name.to_string();
            e.detail.pod = Some(pod);
            e.detail.namespace = Some(namespace);
            e.detail.holder = quoted_after(m, "is reserved for ")
                .filter(|h| crate::names::is_container_id(h))
                .map(String::from);
            e.detail.runtime = runtime.or(Some(Runtime::Containerd));
            return Some(e);
        }
    }
    None
}

/// dockershim's names: `k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`, the sandbox's
/// container being `POD`. Returns (pod, namespace) when every part is valid.
fn docker_k8s_name(name: &str) -> Option<(String, String)> {
    let parts: Vec<&str> = name.split('_').collect();
    let [k8s, container, pod, ns, uid, attempt] = parts.as_slice() else {
        return None;
    };
    let ok = *k8s == "k8s"
        && (*container == "POD" || crate::names::is_dns_label(container))
        && crate::names::is_dns_subdomain(pod)
        && crate::names::is_dns_label(ns)
        && crate::names::is_pod_uid(uid)
        && !attempt.is_empty()
        && attempt.len() <= 10
        && attempt.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| (pod.to_string(), ns.to_string()))
}

/// containerd CRI's names: sandbox `<pod>_<namespace>_<uid>_<attempt>`, container
/// `<container>_<pod>_<namespace>_<uid>_<attempt>`.
fn cri_name(name: &str, sandbox: bool) -> Option<(String, String)> {
    let parts: Vec<&str> = name.split('_').collect();
    let (container, rest) = if sandbox {
        (None, parts.as_slice())
    } else {
        let (c, r) = parts.split_first()?;
        (Some(*c), r)
    };
    let [pod, ns, uid, attempt] = rest else {
        return None;
    };
    let ok = container.is_none_or(crate::names::is_dns_label)
        && crate::names::is_dns_subdomain(pod)
        && crate::names::is_dns_label(ns)
        && crate::names::is_pod_uid(uid)
        && !attempt.is_empty()
        && attempt.len() <= 10
        && attempt.bytes().all(|b| b.is_ascii_digit());
    ok.then(|| (pod.to_string(), ns.to_string()))
}

fn pull_kind(m: &str) -> Option<EventKind> {
    if m.contains("server gave HTTP response to HTTPS client") {
        return Some(EventKind::PullHttpRegistry);
    }
    if m.contains("x509: certificate signed by unknown authority") {
        return Some(EventKind::PullUnknownCa);
    }
    if m.contains("pull access denied")
        || m.contains("unauthorized: authentication required")
        || m.contains("no basic auth credentials")
        || (m.contains("401 Unauthorized") && m.contains("pull"))
    {
        return Some(EventKind::PullAuth);
    }
    let pulling = m.contains("ull") || m.contains("manifest");
    if pulling
        && (m.contains("manifest unknown")
            || (m.contains("manifest for ") && m.contains(" not found"))
            || (m.contains("failed to resolve reference") && m.contains(": not found")))
    {
        return Some(EventKind::PullNotFound);
    }
    None
}

/// The image a pull line names, validated.
fn image_of(m: &str) -> Option<String> {
    let quoted = [
        "image=",
        "PullImage ",
        "Failed to pull image ",
        "failed to pull and unpack image ",
        "failed to resolve reference ",
    ];
    for marker in quoted {
        if let Some(img) = quoted_after(m, marker).filter(|i| is_image_ref(i)) {
            return Some(img.to_string());
        }
    }
    // Unquoted: "pull access denied for foo/bar, repository …", "manifest for imroc/test:v0.2
    // not found".
    for (marker, end) in [("pull access denied for ", ','), ("manifest for ", ' ')] {
        if let Some(i) = m.find(marker) {
            let rest = &m[i + marker.len()..];
            let img = rest.split(end).next().unwrap_or("");
            if is_image_ref(img) {
                return Some(img.to_string());
            }
        }
    }
    None
}

/// An image reference: `[registry[:port]/]path[:tag][@digest]` of the reference grammar's
/// characters, at most 512 bytes.
pub fn is_image_ref(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 512
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-:/@".contains(&b))
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && !s.contains("//")
}

/// The registry of an image reference: its first component when it has a `.` or `:` or is
/// `localhost`, else Docker Hub.
pub fn registry_of(image: &str) -> String {
    match image.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => first.to_string(),
        _ => "docker.io".to_string(),
    }
}

/// `host[:port]`: DNS or IPv4 characters and an optional port.
pub fn is_registry_host(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-:".contains(&b))
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
}

/// `https://10.0.0.5:5000/v2/…` -> `10.0.0.5:5000`.
fn registry_from_url(m: &str) -> Option<String> {
    let i = m.find("https://")? + "https://".len();
    let host: String = m[i..]
        .chars()
        .take_while(|c| !matches!(c, '/' | '"' | ' ' | '\''))
        .take(256)
        .collect();
    is_registry_host(&host).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(ident: &str, m: &str) -> Event {
        let mut v = classify(ident, m);
        assert_eq!(v.len(), 1, "{m}: {v:?}");
        v.remove(0)
    }

    /// node-problem-detector's docker monitor lines, as dockerd writes them (logrus, its
    /// quotes escaped) and as the kubelet relays them.
    #[test]
    fn dockerds_store_and_start_failures() {
        let layer = "/var/lib/docker/overlay2/0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
        let e = one(
            "dockerd",
            &format!(
                r#"time="2026-11-23T11:59:40.000000000Z" level=error msg="Handler for GET /v1.41/containers/json returned error: readlink {layer}: invalid argument""#
            ),
        );
        assert_eq!(
            (e.kind, e.subject.as_str(), e.detail.runtime),
            (EventKind::CorruptOverlay2, layer, Some(Runtime::Docker))
        );
        // The layer, not a file under it; any data-root.
        let e = one(
            "kubelet",
            "E1123 11:59:40.000000 100 remote_runtime.go:390] ListContainers failed: rpc error: code = Unknown desc = Error response from daemon: readlink /data/docker/overlay2/abc123/diff/etc: invalid argument",
        );
        assert_eq!(e.subject, "/data/docker/overlay2/abc123");
        let e = one(
            "dockerd",
            r#"time="2026-11-23T11:59:45Z" level=error msg="Error trying v2 registry: failed to register layer: rename /var/lib/docker/image/overlay2/layerdb/tmp/write-set-1 /var/lib/docker/image/overlay2/layerdb/sha256/5e4d: directory not empty""#,
        );
        assert_eq!(
            (e.kind, e.subject.as_str()),
            (EventKind::CorruptImage, "dockerd")
        );
        let e = one(
            "dockerd",
            r#"time="2026-11-23T11:59:50Z" level=error msg="Handler for POST /v1.41/containers/9a8b/start returned error: OCI runtime start failed: container process is already dead: unknown""#,
        );
        assert_eq!(
            (e.kind, e.subject.as_str()),
            (EventKind::StartDead, "dockerd")
        );
        let e = one(
            "containerd",
            r#"time="2026-11-23T11:59:50Z" level=error msg="StartContainer for "9a8b" failed" error="failed to create containerd task: failed to create shim task: OCI runtime start failed: container process is already dead: unknown""#,
        );
        assert_eq!(
            (e.kind, e.subject.as_str()),
            (EventKind::StartDead, "containerd")
        );
        // Hostile or unusable layer paths are no event.
        for bad in [
            "readlink relative/overlay2/x: invalid argument",
            "readlink /var/lib/docker/overlay2/../../etc: invalid argument",
            "readlink /var/lib/docker/overlay2/a\x1b[31m: invalid argument",
            "readlink /var/lib/docker/overlay2/: invalid argument",
            "readlink /proc/self/exe: invalid argument",
        ] {
            assert!(classify("dockerd", bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn files_that_could_not_be_removed() {
        // The handbook's kubelet line (002, Terminating), unwrapped.
        let e = one(
            "kubelet",
            r#"E0927 14:37:21.922965 14109 remote_runtime.go:250] RemoveContainer "19d837c77a3c294052a99ff9347c520bc8acb7b8b9a9dc9fab281fc09df38257" from runtime service failed: rpc error: code = Unknown desc = failed to remove container "19d837c77a3c294052a99ff9347c520bc8acb7b8b9a9dc9fab281fc09df38257": Error response from daemon: container 19d837c77a3c294052a99ff9347c520bc8acb7b8b9a9dc9fab281fc09df38257: driver "overlay2" failed to remove root filesystem: remove /data/docker/overlay2/b1aea29c590aa9abda79f7cf3976422073fb3652757f0391db88534027546868/diff/usr/bin/bash: operation not permitted"#,
        );
        let want = "/data/docker/overlay2/b1aea29c590aa9abda79f7cf3976422073fb3652757f0391db88534027546868/diff/usr/bin/bash";
        assert_eq!(
            (e.kind, e.subject.as_str(), e.detail.runtime),
            (EventKind::RemoveNotPermitted, want, Some(Runtime::Docker))
        );
        assert_eq!(e.detail.path.as_deref(), Some(want));
        let e = one(
            "kubelet",
            "E0927 14:37:21.922965 14109 kubelet_pods.go:1120] failed to remove pod directory: unlinkat /var/lib/kubelet/pods/65046a06-f795-11e9-9bb6-b67fb7a70bad/volumes/kubernetes.io~empty-dir/data/locked.txt: operation not permitted",
        );
        assert!(e.subject.ends_with("data/locked.txt"), "{e:?}");
        // Hostile or unusable paths are no event.
        for bad in [
            "remove ../etc/shadow: operation not permitted",
            "remove /var/lib/docker/../../etc/shadow: operation not permitted",
            "remove relative/path: operation not permitted",
            "remove /a\x1b[31m: operation not permitted",
            "operation not permitted",
        ] {
            assert!(classify("kubelet", bad).is_empty(), "{bad}");
        }
        let long = format!("remove /{}: operation not permitted", "a".repeat(2000));
        assert!(classify("kubelet", &long).is_empty());
    }

    #[test]
    fn kubelet_states() {
        let e = one(
            "kubelet",
            r#"E1123 12:00:00.000000    1234 kubelet.go:2059] "Skipping pod synchronization" err="PLEG is not healthy: pleg was last seen active 3m0s ago; threshold is 3m0s""#,
        );
        assert_eq!(e.kind, EventKind::PlegUnhealthy);
        // Old klog text.
        let e = one("kubelet", "E0927 14:37:21.922965 14109 kubelet.go:1803] skipping pod synchronization - [PLEG is not healthy: pleg was last seen active 3m5.30015447s ago; threshold is 3m0s]");
        assert_eq!(e.kind, EventKind::PlegUnhealthy);
        let v = classify(
            "kubelet",
            r#"I1123 12:00:00.1 1234 kubelet_node_status.go:600] "Node became not ready" node="10.0.0.1" condition={Type:Ready Status:False Reason:KubeletNotReady Message:container runtime is down,PLEG is not healthy: pleg was last seen active 3m10s ago; threshold is 3m0s}"#,
        );
        let kinds: Vec<_> = v.iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [EventKind::PlegUnhealthy, EventKind::RuntimeNotReady]
        );
        let e = one(
            "kubelet",
            r#"E1123 12:00:00.1 1234 kubelet.go:2373] "Container runtime not ready" runtimeReady="RuntimeReady=false reason:DockerDaemonNotReady message:docker: failed to get docker version: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?""#,
        );
        assert_eq!(
            (e.kind, e.detail.reason.as_deref()),
            (EventKind::RuntimeNotReady, Some("DockerDaemonNotReady"))
        );
        let e = one(
            "kubelet",
            r#"E1123 12:00:00.1 1234 kubelet.go:2373] "Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:docker: network plugin is not ready: cni config uninitialized""#,
        );
        assert_eq!(
            (e.kind, e.detail.reason.as_deref()),
            (EventKind::NetworkNotReady, Some("NetworkPluginNotReady"))
        );
        // The same words from another program are not kubelet's state.
        assert!(classify("dockerd", "PLEG is not healthy").is_empty());
        // Benign kubelet lines.
        for benign in [
            r#"I1123 12:00:30.000000    1234 kubelet.go:2000] "SyncLoop (PLEG): event for pod" pod="default/web-0""#,
            r#"I1123 12:00:30.000000    1234 kubelet_network.go:60] "Updating Pod CIDR" originalPodCIDR="" newPodCIDR="172.16.0.0/24""#,
            r#"I1123 12:00:30.000000    1234 kuberuntime_manager.go:1000] "Container runtime network ready""#,
        ] {
            assert!(classify("kubelet", benign).is_empty(), "{benign}");
        }
    }

    #[test]
    fn the_handbooks_conflict_through_dockerd_and_kubelet() {
        let line = r#"time="2026-11-23T12:00:10.000000000+08:00" level=error msg="Handler for POST /v1.41/containers/create returned error: Conflict. The container name \"/k8s_POD_lomp-ext-d8c8b8c46-4v8tl_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0\" is already in use by container \"30aa3f5847e0ce89e9d411e76783ba14accba7eb7743e605a10a9a862a72c1e2\". You have to remove (or rename) that container to be able to reuse that name.""#;
        let e = one("dockerd", line);
        assert_eq!(e.kind, EventKind::NameConflict);
        assert_eq!(
            e.subject,
            "k8s_POD_lomp-ext-d8c8b8c46-4v8tl_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0"
        );
        assert_eq!(e.detail.pod.as_deref(), Some("lomp-ext-d8c8b8c46-4v8tl"));
        assert_eq!(e.detail.namespace.as_deref(), Some("default"));
        assert_eq!(
            e.detail.holder.as_deref(),
            Some("30aa3f5847e0ce89e9d411e76783ba14accba7eb7743e605a10a9a862a72c1e2")
        );
        let kubelet = r#"E1123 12:00:10.1 1234 remote_runtime.go:116] "RunPodSandbox from runtime service failed" err="rpc error: code = Unknown desc = failed to create a sandbox for pod \"lomp-ext-d8c8b8c46-4v8tl\": Error response from daemon: Conflict. The container name \"/k8s_POD_lomp-ext-d8c8b8c46-4v8tl_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0\" is already in use by container \"30aa3f5847e0ce89e9d411e76783ba14accba7eb7743e605a10a9a862a72c1e2\". You have to remove (or rename) that container to be able to reuse that name.""#;
        assert_eq!(one("kubelet", kubelet).subject, e.subject);
        // containerd's form.
        let c = one(
            "containerd",
            r#"time="2026-11-23T12:00:10.1+08:00" level=error msg="RunPodSandbox for &PodSandboxMetadata{Name:web-0,Uid:65046a06-f795-11e9-9bb6-b67fb7a70bad,Namespace:shop,Attempt:1,} failed, error" error="failed to reserve sandbox name \"web-0_shop_65046a06-f795-11e9-9bb6-b67fb7a70bad_1\": name \"web-0_shop_65046a06-f795-11e9-9bb6-b67fb7a70bad_1\" is reserved for \"6c4f1e2b8a9d0c3e5f7a1b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e\"""#,
        );
        assert_eq!(
            (
                c.detail.pod.as_deref(),
                c.detail.namespace.as_deref(),
                c.detail.runtime
            ),
            (Some("web-0"), Some("shop"), Some(Runtime::Containerd))
        );
        assert!(c.detail.holder.is_some());
    }

    #[test]
    fn hostile_names_are_not_events() {
        for name in [
            "/k8s_POD_$(reboot)_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0",
            "/k8s_POD_web_default_not-a-uid_0",
            "/k8s_POD_web_Default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0",
            "/k8s_POD_web_default_65046a06-f795-11e9-9bb6-b67fb7a70bad_0_extra",
        ] {
            let line = format!(
                r#"level=error msg="Conflict. The container name \"{name}\" is already in use by container \"ab\".""#
            );
            assert!(classify("dockerd", &line).is_empty(), "{name}");
        }
        let bad_image = r#""Failed to pull image" err="x509: certificate signed by unknown authority" image="evil;rm -rf /""#;
        // The image is refused; the line has no registry URL either.
        assert!(classify("kubelet", bad_image).is_empty());
    }

    #[test]
    fn ttrpc_from_the_handbook() {
        let e = one(
            "kubelet",
            r#"E1123 12:00:00.1 1234 remote_runtime.go:116] "RunPodSandbox from runtime service failed" err="rpc error: code = Unknown desc = failed to start sandbox container for pod \"nginx-7db9fccd9b-2j6dh\": Error response from daemon: ttrpc: client shutting down: read unix @->@/containerd-shim/moby/de2bfeefc999af42783115acca62745e6798981dff75f4148fae8c086668f667/shim.sock: read: connection reset by peer: unknown""#,
        );
        assert_eq!(
            (e.kind, e.detail.runtime),
            (EventKind::Ttrpc, Some(Runtime::Docker))
        );
    }

    #[test]
    fn pulls_by_cause() {
        let cases = [
            (
                "kubelet",
                r#"E1123 12:00:00.1 1234 remote_image.go:180] "PullImage from image service failed" err="rpc error: code = Unknown desc = failed to pull and unpack image \"10.0.0.5:5000/shop/web:v1\": failed to resolve reference \"10.0.0.5:5000/shop/web:v1\": failed to do request: Head \"https://10.0.0.5:5000/v2/shop/web/manifests/v1\": http: server gave HTTP response to HTTPS client" image="10.0.0.5:5000/shop/web:v1""#,
                EventKind::PullHttpRegistry,
                "10.0.0.5:5000/shop/web:v1",
                "10.0.0.5:5000",
                Some(Runtime::Containerd),
            ),
            (
                "dockerd",
                r#"time="2026-11-23T12:00:00+08:00" level=error msg="Handler for POST /v1.41/images/create returned error: Get \"https://10.0.0.5:5000/v2/\": http: server gave HTTP response to HTTPS client""#,
                EventKind::PullHttpRegistry,
                "10.0.0.5:5000",
                "10.0.0.5:5000",
                Some(Runtime::Docker),
            ),
            (
                "kubelet",
                r#"E1123 12:00:00.1 1234 kuberuntime_image.go:53] "Failed to pull image" err="rpc error: code = Unknown desc = Error response from daemon: Get \"https://harbor.example.com/v2/\": x509: certificate signed by unknown authority" image="harbor.example.com/shop/web:v1""#,
                EventKind::PullUnknownCa,
                "harbor.example.com/shop/web:v1",
                "harbor.example.com",
                Some(Runtime::Docker),
            ),
            (
                "kubelet",
                r#"E1123 12:00:00.1 1234 remote_image.go:180] "PullImage from image service failed" err="rpc error: code = Unknown desc = Error response from daemon: pull access denied for private/app, repository does not exist or may require 'docker login': denied: requested access to the resource is denied" image="private/app:v1""#,
                EventKind::PullAuth,
                "private/app:v1",
                "docker.io",
                Some(Runtime::Docker),
            ),
            (
                // The handbook's line.
                "kubelet",
                r#"E0101 00:00:00.1 1234 remote_image.go:113] PullImage "imroc/test:v0.2" from image service failed: rpc error: code = Unknown desc = Error response from daemon: manifest for imroc/test:v0.2 not found"#,
                EventKind::PullNotFound,
                "imroc/test:v0.2",
                "docker.io",
                Some(Runtime::Docker),
            ),
            (
                "containerd",
                r#"time="2026-11-23T12:00:00.1+08:00" level=error msg="PullImage \"ccr.ccs.tencentyun.com/shop/web:v9\" failed" error="rpc error: code = NotFound desc = failed to pull and unpack image \"ccr.ccs.tencentyun.com/shop/web:v9\": failed to resolve reference \"ccr.ccs.tencentyun.com/shop/web:v9\": ccr.ccs.tencentyun.com/shop/web:v9: not found""#,
                EventKind::PullNotFound,
                "ccr.ccs.tencentyun.com/shop/web:v9",
                "ccr.ccs.tencentyun.com",
                Some(Runtime::Containerd),
            ),
            (
                "containerd",
                r#"time="2026-11-23T12:00:00.1+08:00" level=error msg="PullImage \"registry.example.com/shop/web:v1\" failed" error="failed to pull and unpack image \"registry.example.com/shop/web:v1\": failed to resolve reference \"registry.example.com/shop/web:v1\": pulling from host registry.example.com failed with status code [manifests v1]: 401 Unauthorized""#,
                EventKind::PullAuth,
                "registry.example.com/shop/web:v1",
                "registry.example.com",
                Some(Runtime::Containerd),
            ),
        ];
        for (ident, line, kind, subject, registry, runtime) in cases {
            let e = one(ident, line);
            assert_eq!(e.kind, kind, "{line}");
            assert_eq!(e.subject, subject, "{line}");
            assert_eq!(e.detail.registry.as_deref(), Some(registry), "{line}");
            assert_eq!(e.detail.runtime, runtime, "{line}");
        }
        // dockerd's follow-up line names no image or registry: nothing to add.
        assert!(classify(
            "dockerd",
            r#"level=info msg="Attempting next endpoint for pull after error: manifest unknown: manifest unknown""#
        )
        .is_empty());
    }

    #[test]
    fn no_space_with_the_handbooks_path() {
        let e = one(
            "dockerd",
            r#"time="2019-09-18T10:19:49.903943652+08:00" level=error msg="Failed to log msg \"\" for logger json-file: write /opt/docker/containers/54922ec8b1863bcc504f6dac41e40139047f7a84ff09175d2800100aaccbad1f/54922ec8b1863bcc504f6dac41e40139047f7a84ff09175d2800100aaccbad1f-json.log: no space left on device""#,
        );
        assert_eq!(e.kind, EventKind::NoSpace);
        assert!(e
            .detail
            .path
            .unwrap()
            .starts_with("/opt/docker/containers/"));
    }

    #[test]
    fn unescape_levels() {
        assert_eq!(unescape(r#"a \"b\" \\\"c\\\" \n"#), r#"a "b" "c" \n"#);
        assert_eq!(registry_of("nginx"), "docker.io");
        assert_eq!(registry_of("localhost/x"), "localhost");
        assert_eq!(registry_of("a.b:5000/x/y"), "a.b:5000");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(ident in "(kubelet|dockerd|containerd|x)", s in "\\PC{0,300}") {
            let _ = classify(&ident, &s);
        }

        #[test]
        fn phrases_with_garbage_never_panic(
            pre in "[ -~]{0,40}",
            phrase in "(Conflict. The container name \\\\\"|failed to reserve sandbox name \"|image=\"|manifest for |pull access denied for |https://| no space left on device|RuntimeReady=false reason:)",
            post in "[ -~]{0,80}",
        ) {
            let _ = classify("kubelet", &format!("{pre}{phrase}{post}"));
            let _ = classify("dockerd", &format!("{pre}{phrase}{post}"));
        }

        /// A line as kubelet (klog, its `err="…"` escaped), dockerd or containerd (logrus,
        /// `msg="…"` escaped) print each kind, built from chosen names: the one event read
        /// back has the kind, subject, pod, namespace, holder, registry, reason, path and
        /// runtime the line was built from.
        #[test]
        fn reads_back_the_event_a_line_was_built_from((ident, line, want) in well_formed::line()) {
            proptest::prop_assert_eq!(classify(&ident, &line), vec![want], "{} {}", ident, line);
        }
    }

    /// Lines of every kind from chosen values, and the event each must give.
    mod well_formed {
        use super::*;
        use crate::testgen::{container_id, dns_label, dns_subdomain, go_duration_string, pod_uid};
        use proptest::prelude::*;

        /// What a generator returns: the program, its line, the event it must read as.
        type Case = (String, String, Event);

        /// Go's `%q`-like escaping that klog and logrus apply to a quoted value.
        fn esc(s: &str) -> String {
            s.replace('\\', "\\\\").replace('"', "\\\"")
        }

        fn logrus(msg: &str) -> String {
            format!(
                r#"time="2026-11-23T12:00:00.123456789+08:00" level=error msg="{}""#,
                esc(msg)
            )
        }

        fn klog(headline: &str, err: &str) -> String {
            format!(
                r#"E1123 12:00:00.123456    1234 remote_runtime.go:116] "{headline}" err="{}""#,
                esc(err)
            )
        }

        fn event(kind: EventKind, subject: &str, detail: Detail) -> Event {
            Event {
                kind,
                subject: subject.to_string(),
                detail,
            }
        }

        /// The path of a file a runtime writes or removes: absolute, no `..`, no spaces.
        fn path() -> impl Strategy<Value = String> {
            prop::collection::vec("[a-zA-Z0-9_][a-zA-Z0-9._-]{0,11}", 1..6)
                .prop_map(|parts| format!("/{}", parts.join("/")))
        }

        /// `[registry/]repo[:tag]` and the registry it is pulled from (Docker Hub: none).
        fn image() -> impl Strategy<Value = (String, String)> {
            (
                prop_oneof![
                    Just(None),
                    Just(Some("localhost".to_string())),
                    "[a-z0-9]{1,8}(\\.[a-z0-9]{1,8}){1,3}(:[0-9]{2,5})?".prop_map(Some),
                    (any::<std::net::Ipv4Addr>(), 1u16..)
                        .prop_map(|(a, p)| Some(format!("{a}:{p}"))),
                ],
                // The first component has no `.` or `:`, which would make it a registry.
                "[a-z0-9]{1,10}(/[a-z0-9]{1,10}([._-][a-z0-9]{1,6}){0,2}){0,2}",
                prop::option::of("[A-Za-z0-9_][A-Za-z0-9_.-]{0,15}"),
            )
                .prop_map(|(registry, repo, tag)| {
                    let tag = tag.map_or(String::new(), |t| format!(":{t}"));
                    match registry {
                        Some(r) => (format!("{r}/{repo}{tag}"), r),
                        None => (format!("{repo}{tag}"), "docker.io".to_string()),
                    }
                })
        }

        fn conflict() -> impl Strategy<Value = Case> {
            (
                prop_oneof![Just("POD".to_string()), dns_label()],
                (dns_subdomain(), dns_label(), pod_uid(), 0u32..10_000),
                prop_oneof![container_id().prop_map(Some), "[0-9a-f]{12}".prop_map(|_| None)],
                0u8..4,
            )
                .prop_map(|(container, (pod, ns, uid, n), holder, form)| {
                    let held_by = holder.clone().unwrap_or_else(|| "30aa3f5847e0".to_string());
                    let detail = |runtime| Detail {
                        runtime: Some(runtime),
                        pod: Some(pod.clone()),
                        namespace: Some(ns.clone()),
                        holder: holder.clone(),
                        ..Detail::default()
                    };
                    let docker_name = format!("k8s_{container}_{pod}_{ns}_{uid}_{n}");
                    let docker = format!(
                        r#"Conflict. The container name "/{docker_name}" is already in use by container "{held_by}". You have to remove (or rename) that container to be able to reuse that name."#
                    );
                    let sandbox = format!("{pod}_{ns}_{uid}_{n}");
                    let cri_container = format!("{container}_{pod}_{ns}_{uid}_{n}").to_lowercase();
                    let cri = |what: &str, name: &str| {
                        format!(r#"failed to reserve {what} name "{name}": name "{name}" is reserved for "{held_by}""#)
                    };
                    match form {
                        0 => ("dockerd".into(), logrus(&format!("Handler for POST /v1.41/containers/create returned error: {docker}")),
                              event(EventKind::NameConflict, &docker_name, detail(Runtime::Docker))),
                        1 => ("kubelet".into(), klog("RunPodSandbox from runtime service failed", &format!(r#"rpc error: code = Unknown desc = failed to create a sandbox for pod "{pod}": Error response from daemon: {docker}"#)),
                              event(EventKind::NameConflict, &docker_name, detail(Runtime::Docker))),
                        2 => ("containerd".into(), format!("{} error=\"{}\"", logrus("RunPodSandbox for &PodSandboxMetadata{} failed, error"), esc(&cri("sandbox", &sandbox))),
                              event(EventKind::NameConflict, &sandbox, detail(Runtime::Containerd))),
                        _ => ("kubelet".into(), klog("CreateContainer in sandbox from runtime service failed", &format!("rpc error: code = Unknown desc = {}", cri("container", &cri_container))),
                              event(EventKind::NameConflict, &cri_container, detail(Runtime::Containerd))),
                    }
                })
        }

        fn readiness() -> impl Strategy<Value = Case> {
            ("[A-Z][A-Za-z0-9]{0,40}", any::<bool>(), 0u64..4 * 3600, any::<bool>()).prop_map(
                |(reason, network, quarters, pleg)| {
                    if pleg {
                        let ago = go_duration_string(quarters);
                        let line = klog("Skipping pod synchronization", &format!("PLEG is not healthy: pleg was last seen active {ago} ago; threshold is 3m0s"));
                        return ("kubelet".into(), line, Event::new(EventKind::PlegUnhealthy));
                    }
                    let (headline, key, kind) = if network {
                        ("Container runtime network not ready", "networkReady=\"NetworkReady", EventKind::NetworkNotReady)
                    } else {
                        ("Container runtime not ready", "runtimeReady=\"RuntimeReady", EventKind::RuntimeNotReady)
                    };
                    let line = format!(
                        r#"E1123 12:00:00.1 1234 kubelet.go:2373] "{headline}" {key}=false reason:{reason} message:the runtime said so""#
                    );
                    let detail = Detail { reason: Some(reason), ..Detail::default() };
                    ("kubelet".into(), line, event(kind, "", detail))
                },
            )
        }

        /// The runtime's own phrasing: (program, line of `msg`, runtime it names).
        fn runtime_line(msg: &str, who: u8) -> (String, String, Option<Runtime>) {
            match who {
                0 => ("dockerd".into(), logrus(msg), Some(Runtime::Docker)),
                1 => ("docker".into(), logrus(msg), Some(Runtime::Docker)),
                2 => ("containerd".into(), logrus(msg), Some(Runtime::Containerd)),
                3 => (
                    "kubelet".into(),
                    klog(
                        "SyncPod failed",
                        &format!("Error response from daemon: {msg}"),
                    ),
                    Some(Runtime::Docker),
                ),
                _ => ("kubelet".into(), klog("SyncPod failed", msg), None),
            }
        }

        fn files() -> impl Strategy<Value = Case> {
            (
                path(),
                (0u8..5, 0u8..4),
                // A data-root (no `overlay2` in it), a layer, a file under the layer.
                ("(/[a-z]{1,8}){1,3}", "[0-9a-f]{1,64}", prop::option::of("(/[a-z]{1,6}){1,3}")),
            )
                .prop_map(|(path, (who, kind), (root, layer, under))| {
                    let (msg, kind, subject) = match kind {
                        0 => (format!("Failed to log msg \"\" for logger json-file: write {path}: no space left on device"), EventKind::NoSpace, String::new()),
                        1 => (format!(r#"driver "overlay2" failed to remove root filesystem: remove {path}: operation not permitted"#), EventKind::RemoveNotPermitted, path.clone()),
                        2 => (format!("failed to remove pod directory: unlinkat {path}: operation not permitted"), EventKind::RemoveNotPermitted, path.clone()),
                        _ => {
                            let dir = format!("{root}/overlay2/{layer}");
                            let msg = format!("Handler for GET /v1.41/containers/json returned error: readlink {dir}{}: invalid argument", under.unwrap_or_default());
                            let (ident, line, _) = runtime_line(&msg, who.min(3));
                            let detail = Detail { runtime: Some(Runtime::Docker), path: Some(dir.clone()), ..Detail::default() };
                            return (ident, line, event(EventKind::CorruptOverlay2, &dir, detail));
                        }
                    };
                    let (ident, line, runtime) = runtime_line(&msg, who);
                    let detail = Detail { runtime, path: Some(path), ..Detail::default() };
                    (ident, line, event(kind, &subject, detail))
                },
            )
        }

        fn runtime_faults() -> impl Strategy<Value = Case> {
            (0u8..5, 0u8..3, container_id()).prop_map(|(who, kind, id)| {
                let (msg, kind) = match kind {
                    0 => (format!("ttrpc: client shutting down: read unix @->@/run/containerd/s/{id}: read: connection reset by peer: unknown"), EventKind::Ttrpc),
                    1 => (format!("failed to register layer: rename /var/lib/docker/image/overlay2/layerdb/tmp/write-set-{id} /var/lib/docker/image/overlay2/layerdb/sha256/{id}: directory not empty"), EventKind::CorruptImage),
                    _ => (format!("Handler for POST /v1.41/containers/{id}/start returned error: OCI runtime start failed: container process is already dead: unknown"), EventKind::StartDead),
                };
                let (ident, line, runtime) = runtime_line(&msg, who);
                let (subject, runtime) = match (kind, runtime) {
                    (EventKind::CorruptImage, _) => ("dockerd", Some(Runtime::Docker)),
                    (EventKind::StartDead, Some(Runtime::Docker)) => ("dockerd", runtime),
                    (EventKind::StartDead, Some(Runtime::Containerd)) => ("containerd", runtime),
                    (EventKind::StartDead, None) => ("container runtime", runtime),
                    _ => ("", runtime),
                };
                let detail = Detail { runtime, ..Detail::default() };
                (ident, line, event(kind, subject, detail))
            })
        }

        fn pulls() -> impl Strategy<Value = Case> {
            (image(), 0u8..5, any::<bool>()).prop_map(|((image, registry), kind, containerd)| {
                let host = if registry == "docker.io" { "registry-1.docker.io" } else { registry.as_str() };
                let (cause, kind) = match kind {
                    0 => (format!(r#"failed to do request: Head "https://{host}/v2/x/manifests/latest": http: server gave HTTP response to HTTPS client"#), EventKind::PullHttpRegistry),
                    1 => (format!(r#"Get "https://{host}/v2/": x509: certificate signed by unknown authority"#), EventKind::PullUnknownCa),
                    2 => ("unauthorized: authentication required".to_string(), EventKind::PullAuth),
                    3 if containerd => (format!("{image}: not found"), EventKind::PullNotFound),
                    _ => (format!("manifest for {image} not found: manifest unknown: manifest unknown"), EventKind::PullNotFound),
                };
                let (err, runtime) = if containerd {
                    (format!(r#"rpc error: code = NotFound desc = failed to pull and unpack image "{image}": failed to resolve reference "{image}": {cause}"#), Runtime::Containerd)
                } else {
                    (format!("rpc error: code = Unknown desc = Error response from daemon: {cause}"), Runtime::Docker)
                };
                let line = format!(r#"{} image="{image}""#, klog("Failed to pull image", &err));
                let detail = Detail { runtime: Some(runtime), registry: Some(registry), ..Detail::default() };
                ("kubelet".to_string(), line, event(kind, &image, detail))
            })
        }

        pub fn line() -> impl Strategy<Value = Case> {
            prop_oneof![conflict(), readiness(), files(), runtime_faults(), pulls()]
        }
    }
}
