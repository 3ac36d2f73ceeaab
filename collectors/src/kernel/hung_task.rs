//! Hung-task lines of the kernel log (`khungtaskd`), unchanged in form from 2.6 to 6.x:
//!
//! ```text
//! INFO: task dockerd:1234 blocked for more than 120 seconds.               (3.10, CentOS 7)
//! INFO: task jbd2/vda1-8:287 blocked for more than 122 seconds.            (6.1+)
//! INFO: task kworker/u8:2:123 blocked for more than 245 seconds.           (comm with ':')
//! ```

/// One `blocked for more than N seconds` report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HungTask {
    pub comm: String,
    pub pid: u32,
    /// The hung-task timeout passed (the task may have been blocked much longer).
    pub blocked_seconds: u64,
}

use crate::needle::Needle;

static TASK: Needle = Needle::new("task ");
static BLOCKED: Needle = Needle::new(" blocked for more than ");

/// Parses a kernel log message; `None` when it is not a hung-task report.
pub fn parse(message: &str) -> Option<HungTask> {
    // The rarer word first: most records hold neither, and `task ` alone is common.
    if !BLOCKED.is_in(message) {
        return None;
    }
    let rest = TASK.after(message)?;
    let (who, after) = rest.split_once(BLOCKED.word())?;
    // The pid is after the LAST ':' (comms such as `kworker/u8:2` contain one).
    let (comm, pid) = who.rsplit_once(':')?;
    let pid: u32 = pid.trim().parse().ok()?;
    let secs: String = after.chars().take_while(|c| c.is_ascii_digit()).collect();
    let blocked_seconds: u64 = secs.parse().ok()?;
    if comm.is_empty() {
        return None;
    }
    Some(HungTask {
        comm: comm.to_string(),
        pid,
        blocked_seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_and_new_formats() {
        // Kernel 3.10.0-1160 (CentOS 7).
        assert_eq!(
            parse("INFO: task dockerd:1234 blocked for more than 120 seconds."),
            Some(HungTask {
                comm: "dockerd".into(),
                pid: 1234,
                blocked_seconds: 120
            })
        );
        // Kernel 6.1 (Debian 12): a journal thread and a kworker whose comm contains ':'.
        assert_eq!(
            parse("INFO: task jbd2/vda1-8:287 blocked for more than 122 seconds.")
                .map(|h| (h.comm, h.pid)),
            Some(("jbd2/vda1-8".to_string(), 287))
        );
        assert_eq!(
            parse("INFO: task kworker/u8:2:123 blocked for more than 245 seconds.").map(|h| (
                h.comm,
                h.pid,
                h.blocked_seconds
            )),
            Some(("kworker/u8:2".to_string(), 123, 245))
        );
    }

    #[test]
    fn unrelated_lines() {
        assert_eq!(
            parse("task:dockerd state:D stack:0 pid:1234 ppid:1 flags:0x00000000"),
            None
        );
        assert_eq!(
            parse("\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message."),
            None
        );
        assert_eq!(
            parse("INFO: task :12 blocked for more than 1 seconds."),
            None
        );
        assert_eq!(
            parse("INFO: task x:y blocked for more than 1 seconds."),
            None
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        #[test]
        fn never_panics_on_hung_like(s in "INFO: task [a-z/:0-9]{0,12} blocked for more than [0-9a-z]{0,25} seconds\\.?") {
            let _ = parse(&s);
        }
        /// `INFO: task %s:%d blocked for more than %ld seconds.` as `check_hung_task()`
        /// prints it, comms with `/` and `:` included: comm, pid and seconds read back.
        #[test]
        fn parses_what_the_kernel_prints(
            comm in crate::testgen::comm(), pid in 1u32..=4_194_304, secs in 1u64..=i64::MAX as u64,
        ) {
            let line = format!("INFO: task {comm}:{pid} blocked for more than {secs} seconds.");
            proptest::prop_assert_eq!(parse(&line), Some(HungTask { comm, pid, blocked_seconds: secs }));
        }
    }
}
