//! The test suite's one way to say a test could not run here: [`skip!`](crate::skip) prints
//! `SKIP <test>: <reason>` and, when `NODE_DOCTOR_SKIP_LOG` names a file (`scripts/test.sh`
//! sets it), appends the line there too. cargo counts a test that returns early as passed
//! and hides a passing test's output, so this file is how `test.sh` tells passes from skips.
//! Every crate's tests (unit, scenario, end-to-end) use it; it is not part of the product.
//! [`gpu_node`] stages a GPU node's host root for the benches, which cannot share test code.

use std::io::Write;

pub mod gpu_node;

/// The environment variable naming the file that collects the skip lines.
pub const SKIP_LOG_ENV: &str = "NODE_DOCTOR_SKIP_LOG";

/// Prints `line` (`SKIP <test>: <reason>`, on one line) and appends it to the skip log.
/// Use [`skip!`](crate::skip).
pub fn skip_line(line: &str) {
    let log = std::env::var_os(SKIP_LOG_ENV).filter(|p| !p.is_empty());
    skip_line_to(log.as_deref().map(std::path::Path::new), line);
}

fn skip_line_to(log: Option<&std::path::Path>, line: &str) {
    let line: String = line
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    eprintln!("{line}");
    let Some(path) = log else {
        return;
    };
    // One write of a whole line to a file opened for appending: parallel tests and test
    // processes never interleave their lines.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        eprintln!("(could not add it to {}: {e})", path.display());
    }
}

/// `skip!("SKIP {test}: needs {tool}")`: as `eprintln!`, and the line is added to the
/// skip log (see the module). The test then returns.
#[macro_export]
macro_rules! skip {
    ($($arg:tt)*) => {
        $crate::testing::skip_line(&::std::format!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_skip_line_is_printed_and_appended_whole() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skips");
        super::skip_line_to(Some(&log), "SKIP one_test: needs a tool\nroot");
        super::skip_line_to(Some(&log), "SKIP other_test: no /dev/fuse");
        super::skip_line_to(None, "SKIP not_logged: no log named");
        assert_eq!(
            std::fs::read_to_string(&log).unwrap(),
            "SKIP one_test: needs a tool root\nSKIP other_test: no /dev/fuse\n"
        );
    }
}
