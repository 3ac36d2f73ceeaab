//! Where NodeConditions, Events and alerts send a person for a rule: its page,
//! `<--docs-url>/rules/<id>`, else this agent's own (`http://$POD_IP:<port>/rules/<id>`), else
//! the path. The pages themselves are `rules_page.rs`'s.

/// The path of a rule's page on the agent.
pub fn path(id: &str) -> String {
    format!("/rules/{id}")
}

/// Where NodeConditions, Events and alerts send a person for a rule: `<base>/rules/<id>` with
/// `--docs-url` (a mirror of these pages, or any agent behind a Service or Ingress people
/// reach: the pages are the same on every node); without it, this agent's own page
/// (`http://<pod IP>:<port>/rules/<id>` when the DaemonSet gives the pod IP, else the path).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Links {
    /// `--docs-url`, checked ([`Links::docs_url`]), without a trailing `/`.
    pub base: Option<String>,
    /// `http://<address>:<port>` of this agent, when known.
    pub agent: Option<String>,
}

/// Longest `--docs-url`.
const MAX_URL_BYTES: usize = 512;

impl Links {
    /// Checks `--docs-url`: an empty value is none; else `http://` or `https://`, printable
    /// ASCII with no space, quote or angle bracket (it goes into messages, labels and
    /// annotations as is), at most 512 bytes.
    pub fn docs_url(raw: &str) -> Result<Option<String>, String> {
        let url = raw.trim().trim_end_matches('/');
        if url.is_empty() {
            return Ok(None);
        }
        let scheme_ok = url
            .strip_prefix("https://")
            .or_else(|| url.strip_prefix("http://"))
            .is_some_and(|rest| !rest.is_empty());
        if !scheme_ok
            || url.len() > MAX_URL_BYTES
            || !url
                .bytes()
                .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b'\'' | b'<' | b'>' | b'\\'))
        {
            return Err(format!(
                "--docs-url {:?}: give an http:// or https:// URL of printable characters without spaces or quotes, at most {MAX_URL_BYTES} bytes",
                collectors::bounded::prefix(raw, 128)
            ));
        }
        Ok(Some(url.to_string()))
    }

    /// This agent's own address for links: the pod IP (`POD_IP`, set by the DaemonSet from
    /// the downward API; the node's IP with hostNetwork) or the listen address when it names
    /// one, with the listen port.
    pub fn agent_address(pod_ip: Option<&str>, listen: std::net::SocketAddr) -> Option<String> {
        let ip = match pod_ip.and_then(|p| p.trim().parse::<std::net::IpAddr>().ok()) {
            Some(ip) => ip,
            None if !listen.ip().is_unspecified() => listen.ip(),
            None => return None,
        };
        Some(match ip {
            std::net::IpAddr::V4(v4) => format!("http://{v4}:{}", listen.port()),
            std::net::IpAddr::V6(v6) => format!("http://[{v6}]:{}", listen.port()),
        })
    }

    /// The link to the rule `id`.
    pub fn rule(&self, id: &str) -> String {
        match (&self.base, &self.agent) {
            (Some(b), _) | (None, Some(b)) => format!("{b}{}", path(id)),
            (None, None) => path(id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_go_to_the_docs_url_else_to_this_agent() {
        let id = "disk.filesystem_full";
        let docs = Links {
            base: Links::docs_url("https://sre.example.com/node-doctor/").unwrap(),
            agent: Some("http://10.0.0.7:9808".into()),
        };
        assert_eq!(
            docs.rule(id),
            "https://sre.example.com/node-doctor/rules/disk.filesystem_full"
        );
        let listen: std::net::SocketAddr = "0.0.0.0:9808".parse().unwrap();
        let own = Links {
            base: Links::docs_url("").unwrap(),
            agent: Links::agent_address(Some("10.0.0.7"), listen),
        };
        assert_eq!(
            own.rule(id),
            "http://10.0.0.7:9808/rules/disk.filesystem_full"
        );
        let v6 = Links::agent_address(Some("fd00::7"), listen);
        assert_eq!(v6.as_deref(), Some("http://[fd00::7]:9808"));
        // Neither a pod IP nor a listen address that names one: the path.
        assert_eq!(Links::agent_address(Some("not an ip"), listen), None);
        assert_eq!(Links::default().rule(id), "/rules/disk.filesystem_full");
        let lo: std::net::SocketAddr = "127.0.0.1:18080".parse().unwrap();
        assert_eq!(
            Links::agent_address(None, lo).as_deref(),
            Some("http://127.0.0.1:18080")
        );
        for bad in [
            "ftp://x",
            "https://",
            "example.com",
            "https://a b",
            "https://a\"b",
            "https://a\u{1b}[31m",
            &format!("https://{}", "a".repeat(600)),
        ] {
            assert!(Links::docs_url(bad).is_err(), "{bad:?}");
        }
    }
}
