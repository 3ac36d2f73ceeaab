//! node-problem-detector's matching, in our own code: each new line goes into a ring buffer of
//! the last `bufferSize` lines, and every rule's pattern is matched against the buffer's lines
//! joined with `\n`, anchored at the end (`(?:pattern)\z`), so a pattern can span lines and
//! fires on the line that completes it. The lines a match covers are returned (NPD's message).

use std::collections::VecDeque;

use regex::Regex;

/// The longest line kept for matching (longer lines are cut; a kernel record is under 1 KiB,
/// the node-log readers cut at 16 KiB too).
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// The last lines of one config's source.
#[derive(Debug, Clone)]
pub struct LineBuffer {
    lines: VecDeque<String>,
    max: usize,
    joined: String,
}

impl LineBuffer {
    pub fn new(max: usize) -> LineBuffer {
        LineBuffer {
            lines: VecDeque::with_capacity(max.max(1)),
            max: max.max(1),
            joined: String::new(),
        }
    }

    /// Appends a line (cut at [`MAX_LINE_BYTES`]; a line's own `\n` would fake a line
    /// boundary, so it is kept as a space), dropping the oldest beyond the size.
    pub fn push(&mut self, line: &str) {
        let mut l = crate::bounded::prefix(line, MAX_LINE_BYTES).to_string();
        if l.contains('\n') {
            l = l.replace('\n', " ");
        }
        if self.lines.len() == self.max {
            self.lines.pop_front();
        }
        self.lines.push_back(l);
        self.joined.clear();
        for (i, l) in self.lines.iter().enumerate() {
            if i > 0 {
                self.joined.push('\n');
            }
            self.joined.push_str(l);
        }
    }

    /// The lines `re` covers when it matches at the end of the joined buffer, oldest first.
    pub fn matches(&self, re: &Regex) -> Option<Vec<&str>> {
        let m = re.find(&self.joined)?;
        // The lines from the one the match starts in to the last.
        let before = self.joined[..m.start()].matches('\n').count();
        Some(self.lines.iter().skip(before).map(String::as_str).collect())
    }

    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(p: &str) -> Regex {
        Regex::new(&format!("(?:{p})\\z")).unwrap()
    }

    #[test]
    fn a_pattern_matches_only_at_the_end() {
        let mut b = LineBuffer::new(10);
        b.push("EXT4-fs error (device sda1): bad");
        assert_eq!(
            b.matches(&re("EXT4-fs error .*")),
            Some(vec!["EXT4-fs error (device sda1): bad"])
        );
        b.push("something else");
        assert_eq!(b.matches(&re("EXT4-fs error .*")), None);
    }

    #[test]
    fn a_multi_line_pattern_matches_across_the_buffer() {
        let mut b = LineBuffer::new(3);
        let p = re(r"INFO: task \S+ blocked\nCall Trace:\n.*schedule.*");
        b.push("noise");
        b.push("INFO: task dockerd:123 blocked");
        assert_eq!(b.matches(&p), None);
        b.push("Call Trace:");
        assert_eq!(b.matches(&p), None);
        b.push(" schedule+0x2a/0x80");
        assert_eq!(
            b.matches(&p),
            Some(vec![
                "INFO: task dockerd:123 blocked",
                "Call Trace:",
                " schedule+0x2a/0x80"
            ])
        );
        // The buffer holds 3 lines: a 4-line pattern can never match.
        b.push("x");
        assert_eq!(b.matches(&p), None);
    }

    #[test]
    fn long_lines_are_cut_and_embedded_newlines_do_not_fake_lines() {
        let mut b = LineBuffer::new(2);
        b.push(&"a".repeat(1 << 20));
        assert_eq!(b.joined.len(), MAX_LINE_BYTES);
        b.push("one\ntwo");
        assert_eq!(b.matches(&re("(?m)^two")), None);
        assert_eq!(b.matches(&re("one two")), Some(vec!["one two"]));
    }
}
