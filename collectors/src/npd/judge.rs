//! The npd rules: a temporary rule's recent match is `npd.temporary`, a permanent rule's match
//! `npd.permanent` (the config's condition set with the rule's reason). Both are warnings:
//! NPD posts its temporary events as Warning, and a permanent rule is a condition that holds.

use super::config::RuleKind;
use super::sample::NpdSample;
use super::thresholds::Thresholds;
use crate::finding::Severity;
use crate::rules::Draft;

pub fn judge(sample: &NpdSample, t: &Thresholds) -> Vec<Draft> {
    let mut out = Vec::new();
    for h in &sample.hits {
        let id = match h.kind {
            RuleKind::Temporary if h.last_seen_seconds_ago > t.event_window_seconds => continue,
            RuleKind::Temporary => "npd.temporary",
            RuleKind::Permanent => "npd.permanent",
        };
        let d = Draft::new(id, Severity::Warning)
            .subject(h.reason.clone())
            .evidence("config_file", h.config_file.clone())
            .evidence("source", h.source.clone())
            .evidence("plugin", h.plugin)
            .evidence("log_path", h.log_path.clone())
            .evidence("rule_type", h.kind.name())
            .evidence("reason", h.reason.clone())
            .evidence("pattern", h.pattern.clone())
            .evidence("lines", h.lines.clone())
            .evidence("count", h.count)
            .evidence("last_seen_seconds_ago", h.last_seen_seconds_ago)
            .evidence_opt("identifier", h.identifier.clone())
            .evidence_opt("condition", h.condition.as_ref().map(|c| c.0.clone()))
            .evidence_opt("healthy_reason", h.condition.as_ref().map(|c| c.1.clone()))
            .when_if("kmsg", h.plugin == "kmsg")
            .when_if("filelog", h.plugin == "filelog")
            .when_if("journald", h.plugin == "journald")
            .var("window_seconds", t.event_window_seconds);
        out.push(d);
    }
    out
}

#[cfg(test)]
mod tests;
