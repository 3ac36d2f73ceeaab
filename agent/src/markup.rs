//! HTML escaping, the one helper the page, the rule pages and the plots share.

/// Escapes text for HTML element content and attribute values. Control characters and bidi
/// overrides become visible escapes first ([`collectors::sanitize::visible`]): host text can
/// neither break the markup nor reorder what a reader sees.
pub fn escape(s: &str) -> String {
    let s = collectors::sanitize::visible(s);
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}
