//! node-problem-detector's system-log-monitor configuration (`config/kernel-monitor.json` and
//! its kin): a pure [`parse`] of the JSON text into a checked [`NpdConfig`], and [`load`],
//! which reads an operator's file (agent-side, like `--rules-file`) with a size cap.
//!
//! What cannot be honoured is refused here, at start, with the reason: unknown fields, an
//! unknown plugin, the `custom` plugin (it runs programs; node-doctor runs none), a pattern
//! that does not compile or exceeds the size limit, a timestamp layout we do not convert, a
//! permanent rule without a condition of the config's `conditions`.

use std::path::Path;
use std::time::Duration;

use regex::{Regex, RegexBuilder};
use serde::Deserialize;

/// Largest config file read (NPD's shipped ones are under 3 KiB).
pub const FILE_CAP: usize = 256 << 10;
/// Lines a buffer may hold: a pattern is matched against all of them joined, on every line.
pub const MAX_BUFFER_SIZE: usize = 100;
/// Rules per config.
pub const MAX_RULES: usize = 256;
/// Longest pattern (or filelog regexp) accepted, in bytes.
pub const MAX_PATTERN_BYTES: usize = 4096;
/// Compiled size limit per regex (the `regex` crate's `size_limit`; its default is 10 MiB).
pub const REGEX_SIZE_LIMIT: usize = 1 << 20;
/// The longest lookback honoured (NPD's shipped configs use 5m and 10h).
pub const MAX_LOOKBACK: Duration = Duration::from_secs(7 * 24 * 3600);
/// Longest name (source, reason, condition type) accepted.
const MAX_NAME_BYTES: usize = 128;

/// One checked config.
#[derive(Debug, Clone)]
pub struct NpdConfig {
    /// The file it came from, as given on the command line.
    pub file: String,
    pub plugin: Plugin,
    /// `logPath` as written (a host path; the filelog source reads it under the host root).
    pub log_path: String,
    pub lookback: Duration,
    pub buffer_size: usize,
    /// `source`: the monitor's name (NPD's event source).
    pub source: String,
    /// `conditions`: each condition's healthy default.
    pub conditions: Vec<ConditionDefault>,
    pub rules: Vec<NpdRule>,
    /// `skipList`: lines containing any of these are not matched.
    pub skip_list: Vec<String>,
}

/// Where the lines come from.
#[derive(Debug, Clone)]
pub enum Plugin {
    /// The kernel log (the node's kmsg hub).
    Kmsg,
    /// A log file, each line split into a timestamp and a message by the config's regexps.
    Filelog(FileFormat),
    /// The systemd journal, entries of one `SYSLOG_IDENTIFIER`.
    Journald { identifier: String },
}

impl Plugin {
    pub fn name(&self) -> &'static str {
        match self {
            Plugin::Kmsg => "kmsg",
            Plugin::Filelog(_) => "filelog",
            Plugin::Journald { .. } => "journald",
        }
    }
}

/// filelog's `pluginConfig`.
#[derive(Debug, Clone)]
pub struct FileFormat {
    pub timestamp: Regex,
    pub message: Regex,
    pub layout: TimeLayout,
}

/// The Go time layouts converted (those NPD's shipped configs use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeLayout {
    /// `Jan _2 15:04:05`: syslog's yearless local time (the year is inferred).
    Syslog,
    /// `2006-01-02T15:04:05.999999999-07:00` and `2006-01-02T15:04:05Z07:00`: RFC 3339.
    Rfc3339,
}

/// The Go layouts accepted, for the refusal message.
pub const LAYOUTS: &[(&str, TimeLayout)] = &[
    ("Jan _2 15:04:05", TimeLayout::Syslog),
    ("2006-01-02T15:04:05.999999999-07:00", TimeLayout::Rfc3339),
    ("2006-01-02T15:04:05Z07:00", TimeLayout::Rfc3339),
    ("2006-01-02T15:04:05.999999999Z07:00", TimeLayout::Rfc3339),
];

/// A condition's healthy default (`conditions[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConditionDefault {
    pub kind: String,
    pub reason: String,
    pub message: String,
}

/// `temporary` (an event) or `permanent` (a condition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    Temporary,
    Permanent,
}

impl RuleKind {
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Temporary => "temporary",
            RuleKind::Permanent => "permanent",
        }
    }
}

/// One rule, its pattern compiled to match at the end of the buffer.
#[derive(Debug, Clone)]
pub struct NpdRule {
    pub kind: RuleKind,
    /// The condition type a permanent rule sets (one of the config's `conditions`).
    pub condition: Option<String>,
    pub reason: String,
    /// The pattern as written.
    pub pattern: String,
    /// `(?:pattern)\z`.
    pub regex: Regex,
}

/// Why a config was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node-problem-detector config {file}: {reason}")]
pub struct ConfigError {
    pub file: String,
    pub reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RawConfig {
    plugin: Option<String>,
    #[serde(default)]
    plugin_config: std::collections::BTreeMap<String, String>,
    #[serde(default)]
    log_path: String,
    #[serde(default)]
    lookback: String,
    #[serde(default)]
    buffer_size: usize,
    #[serde(default)]
    source: String,
    /// Accepted and ignored: node-doctor's own `/metrics` count what it sees.
    #[allow(dead_code)]
    metrics_reporting: Option<bool>,
    #[serde(default)]
    conditions: Vec<RawCondition>,
    #[serde(default)]
    rules: Vec<RawRule>,
    #[serde(default)]
    skip_list: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    #[serde(rename = "type")]
    kind: String,
    reason: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    condition: String,
    reason: String,
    pattern: String,
}

/// Reads and checks one config file (agent-side path, at most [`FILE_CAP`] bytes, a regular
/// file).
pub fn load(path: &Path) -> Result<NpdConfig, ConfigError> {
    let file = path.display().to_string();
    let text = crate::hostfs::read_text(path, FILE_CAP).map_err(|e| ConfigError {
        file: file.clone(),
        reason: e.to_string(),
    })?;
    parse(&file, &text)
}

/// Parses and checks a config's text; `file` names it in errors. The checks run in the
/// order of the phases below, so a config with several faults is refused for the first.
pub fn parse(file: &str, text: &str) -> Result<NpdConfig, ConfigError> {
    let err = |reason: String| ConfigError {
        file: file.to_string(),
        reason: crate::bounded::ellipsis(&reason, 512),
    };
    refuse_custom_plugin(text).map_err(err)?;
    let raw: RawConfig = serde_json::from_str(text)
        .map_err(|e| err(format!("not a system-log-monitor config: {e}")))?;
    let plugin = plugin(&raw).map_err(err)?;
    let (lookback, buffer_size) = reading(&raw, &plugin).map_err(err)?;
    if raw.source.is_empty() {
        return Err(err("source (the monitor's name) is missing".into()));
    }
    name("source", &raw.source).map_err(err)?;
    let conditions = conditions(raw.conditions).map_err(err)?;
    let rules = rules(raw.rules, &conditions).map_err(err)?;
    if raw.skip_list.len() > MAX_RULES || raw.skip_list.iter().any(|s| s.len() > MAX_PATTERN_BYTES)
    {
        return Err(err("skipList is too long".into()));
    }
    Ok(NpdConfig {
        file: file.to_string(),
        plugin,
        log_path: raw.log_path,
        lookback,
        buffer_size,
        source: raw.source,
        conditions,
        rules,
        skip_list: raw
            .skip_list
            .into_iter()
            .filter(|s| !s.is_empty())
            .collect(),
    })
}

/// The custom plugin monitor's configs (`plugin: custom`, `rules[].path`) run programs:
/// named before the generic "unknown field" so the refusal says why.
fn refuse_custom_plugin(text: &str) -> Result<(), String> {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let custom = v.get("plugin").and_then(|p| p.as_str()) == Some("custom")
            || v.get("rules")
                .and_then(|r| r.as_array())
                .is_some_and(|rs| rs.iter().any(|r| r.get("path").is_some()));
        if custom {
            return Err(
                "a custom-plugin-monitor config (its rules run programs): node-doctor runs no programs on the node, so it is refused; run node-problem-detector for it".into(),
            );
        }
    }
    Ok(())
}

/// `plugin` and its `pluginConfig`.
fn plugin(raw: &RawConfig) -> Result<Plugin, String> {
    match raw.plugin.as_deref() {
        Some("kmsg") => Ok(Plugin::Kmsg),
        Some("filelog") => Ok(Plugin::Filelog(file_format(&raw.plugin_config)?)),
        Some("journald") => {
            let identifier = raw
                .plugin_config
                .get("source")
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    "journald: pluginConfig.source (the SYSLOG_IDENTIFIER to read) is missing"
                        .to_string()
                })?;
            name("pluginConfig.source", identifier)?;
            Ok(Plugin::Journald {
                identifier: identifier.clone(),
            })
        }
        Some(other) => Err(format!(
            "unknown plugin {:?} (node-doctor reads kmsg, filelog and journald)",
            crate::bounded::prefix(other, 64)
        )),
        None => Err("no plugin (kmsg, filelog or journald)".into()),
    }
}

/// How the log is read: `logPath` checked, and the `lookback` and `bufferSize` honoured.
fn reading(raw: &RawConfig, plugin: &Plugin) -> Result<(Duration, usize), String> {
    if !matches!(plugin, Plugin::Kmsg) && raw.log_path.is_empty() {
        return Err(format!("{}: logPath is missing", plugin.name()));
    }
    if raw.log_path.len() > 4096 || raw.log_path.contains('\0') {
        return Err("logPath is not a usable path".into());
    }
    let lookback = go_duration(&raw.lookback)?;
    if lookback > MAX_LOOKBACK {
        return Err(format!(
            "lookback {:?} is longer than the {} h node-doctor reads back",
            raw.lookback,
            MAX_LOOKBACK.as_secs() / 3600
        ));
    }
    let buffer_size = match raw.buffer_size {
        0 => 10, // NPD's default
        n if n > MAX_BUFFER_SIZE => {
            return Err(format!("bufferSize {n} is over {MAX_BUFFER_SIZE} lines"))
        }
        n => n,
    };
    Ok((lookback, buffer_size))
}

/// `conditions`: named, each type once.
fn conditions(raw: Vec<RawCondition>) -> Result<Vec<ConditionDefault>, String> {
    let mut conditions = Vec::new();
    for c in raw {
        name("conditions[].type", &c.kind)?;
        name("conditions[].reason", &c.reason)?;
        if conditions
            .iter()
            .any(|d: &ConditionDefault| d.kind == c.kind)
        {
            return Err(format!("condition {} is listed twice", c.kind));
        }
        conditions.push(ConditionDefault {
            kind: c.kind,
            reason: c.reason,
            message: crate::bounded::ellipsis(&c.message, 1024),
        });
    }
    Ok(conditions)
}

/// `rules`: at most [`MAX_RULES`], each compiled; a permanent rule sets one of `conditions`.
fn rules(raw: Vec<RawRule>, conditions: &[ConditionDefault]) -> Result<Vec<NpdRule>, String> {
    if raw.len() > MAX_RULES {
        return Err(format!("{} rules (at most {MAX_RULES})", raw.len()));
    }
    let mut rules = Vec::new();
    for (i, r) in raw.into_iter().enumerate() {
        let at = |m: String| {
            format!(
                "rules[{i}] ({}): {m}",
                crate::bounded::prefix(&r.reason, 64)
            )
        };
        name("reason", &r.reason).map_err(at)?;
        let kind = match r.kind.as_str() {
            "temporary" => RuleKind::Temporary,
            "permanent" => RuleKind::Permanent,
            other => {
                return Err(at(format!(
                    "type {:?} is neither temporary nor permanent",
                    crate::bounded::prefix(other, 32)
                )))
            }
        };
        let condition = match kind {
            RuleKind::Permanent if r.condition.is_empty() => {
                return Err(at("a permanent rule names no condition".into()))
            }
            RuleKind::Permanent if !conditions.iter().any(|c| c.kind == r.condition) => {
                return Err(at(format!(
                    "condition {:?} is not one of the config's conditions",
                    crate::bounded::prefix(&r.condition, 64)
                )))
            }
            RuleKind::Permanent => Some(r.condition.clone()),
            // NPD ignores a temporary rule's condition; so do we.
            RuleKind::Temporary => None,
        };
        let regex = compile(&format!("(?:{})\\z", r.pattern), &r.pattern).map_err(at)?;
        rules.push(NpdRule {
            kind,
            condition,
            reason: r.reason.clone(),
            pattern: r.pattern.clone(),
            regex,
        });
    }
    Ok(rules)
}

/// Compiles operator regex text with the size limits; `shown` is what the message quotes.
fn compile(expr: &str, shown: &str) -> Result<Regex, String> {
    if shown.len() > MAX_PATTERN_BYTES {
        return Err(format!("pattern is over {MAX_PATTERN_BYTES} bytes"));
    }
    RegexBuilder::new(expr)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => format!(
                "pattern {:?} compiles to more than {limit} bytes (too big to match on every line)",
                crate::bounded::prefix(shown, 80)
            ),
            e => format!(
                "pattern {:?} does not compile: {}",
                crate::bounded::prefix(shown, 80),
                e.to_string().replace('\n', " ")
            ),
        })
}

fn file_format(cfg: &std::collections::BTreeMap<String, String>) -> Result<FileFormat, String> {
    let get = |k: &str| {
        cfg.get(k)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("filelog: pluginConfig.{k} is missing"))
    };
    let timestamp = compile(get("timestamp")?, get("timestamp")?)
        .map_err(|e| format!("filelog: pluginConfig.timestamp: {e}"))?;
    let message = compile(get("message")?, get("message")?)
        .map_err(|e| format!("filelog: pluginConfig.message: {e}"))?;
    let layout_text = get("timestampFormat")?;
    let layout = LAYOUTS
        .iter()
        .find(|(l, _)| l == layout_text)
        .map(|(_, t)| *t)
        .ok_or_else(|| {
            let known: Vec<&str> = LAYOUTS.iter().map(|(l, _)| *l).collect();
            format!(
                "filelog: timestampFormat {:?} is a Go time layout node-doctor does not convert (it converts: {})",
                crate::bounded::prefix(layout_text, 64),
                known.join(", ")
            )
        })?;
    Ok(FileFormat {
        timestamp,
        message,
        layout,
    })
}

/// A name copied into findings and the cluster: printable, bounded.
fn name(field: &str, s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err(format!("{field} is empty"));
    }
    if s.len() > MAX_NAME_BYTES
        || s.chars()
            .any(|c| c.is_control() || crate::sanitize::is_unsafe(c))
    {
        return Err(format!(
            "{field} {:?} is not a name (at most {MAX_NAME_BYTES} bytes, no control characters)",
            crate::bounded::prefix(s, 64)
        ));
    }
    Ok(())
}

/// A Go duration (`5m`, `10h`, `1h30m`, `300ms`, `0`); empty is 0 (NPD's default).
pub fn go_duration(s: &str) -> Result<Duration, String> {
    if s.is_empty() {
        return Ok(Duration::ZERO);
    }
    crate::config::go_duration::parse(s).ok_or_else(|| {
        format!(
            "lookback {:?} is not a Go duration (5m, 10h, 1h30m)",
            crate::bounded::prefix(s, 32)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(text: &str) -> String {
        parse("t.json", text).unwrap_err().to_string()
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(go_duration("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(go_duration(""), Ok(Duration::ZERO));
        assert_eq!(go_duration("300ms"), Ok(Duration::from_millis(300)));
        assert!(go_duration("5 minutes").is_err());
        assert!(go_duration("m").is_err());
    }

    #[test]
    fn defaults_follow_npd() {
        let c = parse("t.json", r#"{"plugin":"kmsg","source":"k","rules":[]}"#).unwrap();
        assert_eq!(c.buffer_size, 10);
        assert_eq!(c.lookback, Duration::ZERO);
    }

    #[test]
    fn refusals_name_the_problem() {
        assert!(refused("{").contains("not a system-log-monitor config"));
        assert!(
            refused(r#"{"plugin":"syslog","source":"s"}"#).contains("unknown plugin \"syslog\"")
        );
        assert!(refused(r#"{"plugin":"kmsg","source":"s","rules":[{"type":"temporary","reason":"R","pattern":"(a"}]}"#).contains("does not compile"));
        assert!(refused(r#"{"plugin":"kmsg","source":"s","rules":[{"type":"permanent","reason":"R","pattern":"a"}]}"#).contains("names no condition"));
        assert!(refused(r#"{"plugin":"kmsg","source":"s","rules":[{"type":"permanent","condition":"X","reason":"R","pattern":"a"}]}"#).contains("not one of the config's conditions"));
        assert!(refused(r#"{"plugin":"filelog","logPath":"/var/log/x","source":"s","pluginConfig":{"timestamp":"^.{15}","message":"(.*)","timestampFormat":"2006-01-02 15:04:05"}}"#).contains("does not convert"));
        assert!(
            refused(r#"{"plugin":"journald","logPath":"/var/log/journal","source":"s"}"#)
                .contains("pluginConfig.source")
        );
        assert!(refused(r#"{"plugin":"kmsg","source":"s","delay":"5m"}"#)
            .contains("unknown field `delay`"));
        assert!(
            refused(r#"{"plugin":"kmsg","source":"s","bufferSize":100000}"#).contains("bufferSize")
        );
        assert!(
            refused(r#"{"plugin":"custom","source":"s","rules":[]}"#).contains("runs no programs")
        );
        assert!(refused(r#"{"plugin":"kmsg","source":"s\u001b[31m"}"#).contains("not a name"));
    }

    /// A pattern whose compiled program exceeds the size limit is refused, not matched slowly.
    #[test]
    fn a_huge_pattern_is_refused() {
        let pattern = r"(\w{50}){50}".replace('\\', "\\\\");
        let text = format!(
            r#"{{"plugin":"kmsg","source":"s","rules":[{{"type":"temporary","reason":"R","pattern":"{pattern}"}}]}}"#
        );
        let e = refused(&text);
        assert!(e.contains("too big"), "{e}");
    }
}
