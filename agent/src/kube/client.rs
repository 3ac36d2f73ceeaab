//! The four requests the reporter makes, over the ecosystem's client (`kube` with rustls):
//! `GET /api/v1/nodes/<node>`, `PATCH /api/v1/nodes/<node>/status` (strategic merge),
//! `POST /api/v1/namespaces/default/events` and `PATCH …/events/<name>` (strategic merge).
//! Raw requests through `kube::Client::send`, so the answer's status and `Retry-After` reach
//! the driver (the typed API folds them into an error). `fleet` reads lists through the same
//! client ([`KubeApi::get_streaming`]), their bodies as they arrive.

use std::time::Duration;

use anyhow::Context;
use http_body_util::BodyExt;
use serde_json::Value;

use super::planner::EVENT_NAMESPACE;

/// Largest answer read (a Node with its image list is tens of KiB).
const MAX_RESPONSE: usize = 4 * 1024 * 1024;
const SMP: &str = "application/strategic-merge-patch+json";

/// Why a request failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ApiError {
    /// The server answered with an error status.
    Status {
        code: u16,
        reason: String,
        message: String,
        retry_after: Option<Duration>,
    },
    /// No answer: connection, TLS (a certificate not signed by the cluster's CA), a closed
    /// stream.
    Transport(String),
    /// No answer within the request timeout.
    Timeout,
}

impl ApiError {
    pub fn code(&self) -> Option<u16> {
        match self {
            ApiError::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The `code` label of `node_doctor_kube_requests_total`.
    pub fn label(&self) -> String {
        match self {
            ApiError::Status { code, .. } => code.to_string(),
            ApiError::Transport(_) => "transport".into(),
            ApiError::Timeout => "timeout".into(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Status {
                code,
                reason,
                message,
                ..
            } => write!(f, "{code} {reason}: {message}"),
            ApiError::Transport(e) => write!(f, "no answer: {e}"),
            ApiError::Timeout => write!(f, "no answer within the request timeout"),
        }
    }
}

/// What the reporter needs from the API server.
pub trait Api {
    async fn get_node(&self, name: &str) -> Result<Value, ApiError>;
    async fn patch_node_status(&self, name: &str, patch: &Value) -> Result<(), ApiError>;
    /// Returns the created event's name.
    async fn create_event(&self, event: &Value) -> Result<String, ApiError>;
    async fn patch_event(&self, name: &str, patch: &Value) -> Result<String, ApiError>;
}

/// The API over `kube::Client`.
#[derive(Clone)]
pub struct KubeApi {
    client: kube::Client,
    user_agent: http::HeaderValue,
    timeout: Duration,
    /// Where the configuration came from, for the log.
    pub source: String,
    pub server: String,
}

/// `node-doctor/<version> (<node>)`: what the API server's audit log and `managedFields`
/// (the manager of an update is the User-Agent's program name) show.
pub fn user_agent(node: &str) -> String {
    let node: String = node
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
        .take(253)
        .collect();
    format!("node-doctor/{} ({node})", env!("CARGO_PKG_VERSION"))
}

impl KubeApi {
    /// Finds the cluster the standard ways (`KUBECONFIG` or `~/.kube/config`, else the
    /// in-cluster ServiceAccount), and always verifies the server's certificate.
    pub async fn from_environment(node: &str, timeout: Duration) -> anyhow::Result<KubeApi> {
        let source = if std::env::var_os("KUBECONFIG").is_some() {
            "KUBECONFIG"
        } else if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            "in-cluster ServiceAccount"
        } else {
            "default kubeconfig"
        };
        let config = kube::Config::infer().await.context(
            "finding the cluster (KUBECONFIG, ~/.kube/config or the in-cluster ServiceAccount)",
        )?;
        KubeApi::with_config(config, source, node, timeout)
    }

    /// From one kubeconfig file (tests and the scale simulation, which cannot share the
    /// process's `KUBECONFIG`).
    #[cfg(test)]
    pub async fn from_kubeconfig(
        path: &std::path::Path,
        node: &str,
        timeout: Duration,
    ) -> anyhow::Result<KubeApi> {
        let kc = kube::config::Kubeconfig::read_from(path)
            .with_context(|| format!("reading {}", path.display()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .with_context(|| format!("using {}", path.display()))?;
        KubeApi::with_config(config, "kubeconfig file", node, timeout)
    }

    /// For `fleet`, run by a person: `--kubeconfig` and `--context` when given, else the
    /// standard ways ([`KubeApi::from_environment`]).
    pub async fn for_person(
        kubeconfig: Option<&std::path::Path>,
        context: Option<&str>,
        agent: &str,
        timeout: Duration,
    ) -> anyhow::Result<KubeApi> {
        if kubeconfig.is_none() && context.is_none() {
            return KubeApi::from_environment(agent, timeout).await;
        }
        let options = kube::config::KubeConfigOptions {
            context: context.map(str::to_string),
            ..Default::default()
        };
        let (config, source) = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let c = kube::Config::from_custom_kubeconfig(kc, &options)
                    .await
                    .with_context(|| format!("using {}", path.display()))?;
                (c, "--kubeconfig")
            }
            None => (
                kube::Config::from_kubeconfig(&options)
                    .await
                    .context("reading the kubeconfig (KUBECONFIG or ~/.kube/config)")?,
                "kubeconfig",
            ),
        };
        KubeApi::with_config(config, source, agent, timeout)
    }

    /// A GET whose answer's body is handed over unread, to be parsed as it arrives (a list of
    /// thousands of Nodes is never held whole). The request timeout covers the answer's
    /// head; an error status is read (capped) into an [`ApiError`].
    pub async fn get_streaming(&self, path: &str) -> Result<kube::client::Body, ApiError> {
        let req = http::Request::builder()
            .method(http::Method::GET)
            .uri(path)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, self.user_agent.clone())
            .body(kube::client::Body::empty())
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        let resp = match tokio::time::timeout(self.timeout, self.client.send(req)).await {
            Err(_) => return Err(ApiError::Timeout),
            Ok(r) => r.map_err(|e| ApiError::Transport(chain(&e)))?,
        };
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(resp.into_body());
        }
        let retry_after = retry_after(resp.headers());
        let body = tokio::time::timeout(
            self.timeout,
            http_body_util::Limited::new(resp.into_body(), 64 * 1024).collect(),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .map(|b| b.to_bytes())
        .unwrap_or_default();
        let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        Err(status_error(status, &value, retry_after))
    }

    fn with_config(
        mut config: kube::Config,
        source: &str,
        node: &str,
        timeout: Duration,
    ) -> anyhow::Result<KubeApi> {
        if config.accept_invalid_certs {
            tracing::warn!(
                "the kubeconfig says insecure-skip-tls-verify; node-doctor verifies the API server's certificate anyway"
            );
            config.accept_invalid_certs = false;
        }
        config.connect_timeout = Some(timeout);
        config.read_timeout = Some(timeout);
        config.write_timeout = Some(timeout);
        let server = config.cluster_url.to_string();
        let client = kube::Client::try_from(config).context("building the Kubernetes client")?;
        Ok(KubeApi {
            client,
            user_agent: http::HeaderValue::from_str(&user_agent(node))
                .unwrap_or_else(|_| http::HeaderValue::from_static("node-doctor")),
            timeout,
            source: source.to_string(),
            server,
        })
    }

    async fn call(
        &self,
        method: http::Method,
        path: &str,
        content_type: Option<&'static str>,
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, self.user_agent.clone());
        if let Some(ct) = content_type {
            req = req.header(http::header::CONTENT_TYPE, ct);
        }
        let bytes = body
            .map(|b| serde_json::to_vec(b).unwrap_or_default())
            .unwrap_or_default();
        let req = req
            .body(kube::client::Body::from(bytes))
            .map_err(|e| ApiError::Transport(e.to_string()))?;
        let send = async {
            let resp = self
                .client
                .send(req)
                .await
                .map_err(|e| ApiError::Transport(chain(&e)))?;
            let status = resp.status().as_u16();
            let retry_after = retry_after(resp.headers());
            let body = http_body_util::Limited::new(resp.into_body(), MAX_RESPONSE)
                .collect()
                .await
                .map_err(|e| ApiError::Transport(format!("reading the answer: {e}")))?
                .to_bytes();
            let value: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            if (200..300).contains(&status) {
                return Ok(value);
            }
            Err(status_error(status, &value, retry_after))
        };
        match tokio::time::timeout(self.timeout, send).await {
            Ok(r) => r,
            Err(_) => Err(ApiError::Timeout),
        }
    }
}

fn retry_after(headers: &http::HeaderMap) -> Option<Duration> {
    headers
        .get(http::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs)
}

/// An error status with the reason and message of its `Status` body.
fn status_error(code: u16, value: &Value, retry_after: Option<Duration>) -> ApiError {
    let s = |k: &str| {
        value
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    ApiError::Status {
        code,
        reason: s("reason"),
        message: super::planner::bounded(s("message"), 512),
        retry_after,
    }
}

/// An error with its causes (a TLS failure is three levels below the client's error).
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cur = c.source();
    }
    out
}

fn escape(segment: &str) -> String {
    // Node and event names are DNS subdomains; anything else is refused by the server, but
    // never let it change the path.
    segment
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c.to_string()
            } else {
                format!("%{:02X}", c as u32 & 0xff)
            }
        })
        .collect()
}

impl Api for KubeApi {
    async fn get_node(&self, name: &str) -> Result<Value, ApiError> {
        self.call(
            http::Method::GET,
            &format!("/api/v1/nodes/{}", escape(name)),
            None,
            None,
        )
        .await
    }

    async fn patch_node_status(&self, name: &str, patch: &Value) -> Result<(), ApiError> {
        self.call(
            http::Method::PATCH,
            &format!(
                "/api/v1/nodes/{}/status?fieldManager={}",
                escape(name),
                super::planner::MANAGER
            ),
            Some(SMP),
            Some(patch),
        )
        .await
        .map(|_| ())
    }

    async fn create_event(&self, event: &Value) -> Result<String, ApiError> {
        let v = self
            .call(
                http::Method::POST,
                &format!("/api/v1/namespaces/{EVENT_NAMESPACE}/events"),
                Some("application/json"),
                Some(event),
            )
            .await?;
        Ok(v.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string())
    }

    async fn patch_event(&self, name: &str, patch: &Value) -> Result<String, ApiError> {
        self.call(
            http::Method::PATCH,
            &format!(
                "/api/v1/namespaces/{EVENT_NAMESPACE}/events/{}",
                escape(name)
            ),
            Some(SMP),
            Some(patch),
        )
        .await
        .map(|_| name.to_string())
    }
}
