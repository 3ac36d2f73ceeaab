//! `--prometheus URL`: the per-finding view, from the agents' `node_doctor_finding_info`
//! (joined with `node_doctor_finding` for the severity) through Prometheus' HTTP API
//! (`/api/v1/query`). The node is the series' `instance` label, which the shipped PodMonitor
//! sets to the node's name. Plain HTTP: reach an HTTPS or authenticated Prometheus through
//! `kubectl port-forward`.

use std::time::Duration;

use anyhow::{bail, Context};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;

use super::read::encode;
use super::verdict::PromFinding;

/// The query: every active finding with its title and severity.
pub const QUERY: &str = "node_doctor_finding_info * on(job, instance, collector, id, subject) group_left(severity) node_doctor_finding";
/// Largest answer read.
const MAX_ANSWER: usize = 16 << 20;

/// `http://host[:port][/prefix]` split into the address and the path prefix.
fn target(url: &str) -> anyhow::Result<(String, String, String)> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("--prometheus {url:?}"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some(other) => bail!("--prometheus {url:?}: {other}:// is not supported; use http:// (kubectl port-forward to reach an HTTPS Prometheus)"),
        None => bail!("--prometheus {url:?}: give a URL, e.g. http://localhost:9090"),
    }
    let host = uri
        .host()
        .with_context(|| format!("--prometheus {url:?}: no host"))?
        .to_string();
    let port = uri.port_u16().unwrap_or(80);
    let prefix = uri.path().trim_end_matches('/').to_string();
    Ok((format!("{host}:{port}"), host, prefix))
}

/// Asks Prometheus; every active finding, sorted by id then node.
pub async fn findings(url: &str, timeout: Duration) -> anyhow::Result<Vec<PromFinding>> {
    let (addr, host, prefix) = target(url)?;
    let path = format!("{prefix}/api/v1/query?query={}", encode(QUERY));
    let body = tokio::time::timeout(timeout, get(&addr, &host, &path))
        .await
        .map_err(|_| anyhow::anyhow!("Prometheus at {url} did not answer within {timeout:?}"))??;
    parse(&body)
}

async fn get(addr: &str, host: &str, path: &str) -> anyhow::Result<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .with_context(|| format!("connecting to Prometheus at {addr}"))?;
    let (mut send, conn) =
        hyper::client::conn::http1::handshake::<_, Full<Bytes>>(hyper_util::rt::TokioIo::new(tcp))
            .await
            .context("HTTP handshake with Prometheus")?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = http::Request::get(path)
        .header(http::header::HOST, host)
        .header(http::header::ACCEPT, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("node-doctor/", env!("CARGO_PKG_VERSION"), " (fleet)"),
        )
        .body(Full::new(Bytes::new()))
        .context("building the query")?;
    let resp = send
        .send_request(req)
        .await
        .context("querying Prometheus")?;
    let status = resp.status();
    let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("reading Prometheus' answer: {e}"))?
        .to_bytes();
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        bail!(
            "Prometheus answered {status}: {}",
            collectors::bounded::truncate(text.into_owned(), 300)
        );
    }
    Ok(body)
}

/// The findings of an instant-query answer.
pub fn parse(body: &[u8]) -> anyhow::Result<Vec<PromFinding>> {
    let v: Value = serde_json::from_slice(body).context("Prometheus' answer is not JSON")?;
    if v["status"] != "success" {
        bail!(
            "Prometheus: {}",
            v["error"].as_str().unwrap_or("the query failed")
        );
    }
    let label = |m: &Value, k: &str| m[k].as_str().unwrap_or("").to_string();
    let mut out: Vec<PromFinding> = v["data"]["result"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|s| {
            let m = &s["metric"];
            PromFinding {
                id: label(m, "id"),
                node: label(m, "instance"),
                subject: label(m, "subject"),
                severity: label(m, "severity"),
                title: label(m, "title"),
            }
        })
        .filter(|f| !f.id.is_empty())
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_answers() {
        let (addr, host, prefix) = target("http://prom.example:9090/prometheus/").unwrap();
        assert_eq!(
            (addr.as_str(), host.as_str(), prefix.as_str()),
            ("prom.example:9090", "prom.example", "/prometheus")
        );
        assert!(target("https://x").is_err());
        assert!(target("localhost:9090").is_err());
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
          {"metric":{"id":"memory.exhaustion","instance":"node-b","subject":"","severity":"critical","title":"t"},"value":[1,"1"]},
          {"metric":{"id":"disk.filesystem_full","instance":"node-a","subject":"/var","severity":"warning","title":"u"},"value":[1,"1"]}]}}"#;
        let f = parse(body).unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].id, "disk.filesystem_full");
        assert_eq!(f[0].subject, "/var");
        assert!(parse(br#"{"status":"error","error":"bad"}"#).is_err());
    }
}
