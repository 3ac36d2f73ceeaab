//! CPU time of the calling thread, for the benches that time a matcher or a cycle on the
//! thread that runs it (included by path: each bench is its own crate).

use std::time::Duration;

/// CPU time of this thread (`CLOCK_THREAD_CPUTIME_ID`: nanoseconds, the scheduler's count
/// brought up to date, where `getrusage` and `/proc/thread-self/schedstat` move by the
/// scheduler tick); zero if the clock cannot be read.
pub fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given and nothing else.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
