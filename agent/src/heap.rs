//! How the agent's heap is kept small: one malloc arena, and free pages handed back to the
//! kernel after each collector run (issue 32; docs/cost.md, "Memory").
//!
//! glibc's malloc gives each thread that allocates while another holds an arena an arena of
//! its own, up to eight per CPU, and keeps every arena's high-water mark: with a thread per
//! collector run (`collect-<name>`) and one scheduler thread per collector, `serve` held 14
//! arenas of 0.3–1.5 MiB each (measured in `/proc/<pid>/smaps`: 6.7 MiB of its 9.3 MiB of
//! anonymous memory). The agent allocates little and rarely at the same instant, so one arena
//! costs it no measurable time; and what a run frees in the middle of that arena (the kernel
//! log's first read, a process table, a rendered `/metrics`) stays resident until
//! `malloc_trim` returns the whole free pages with `madvise(MADV_DONTNEED)`.
//!
//! glibc only (the release build and the image link it; see the Dockerfile): on other C
//! libraries both calls are absent and these functions do nothing. Not a Rust allocator crate
//! (jemalloc, mimalloc): each adds its own code and per-thread caches to a process whose heap
//! is a few MiB, and the binary's resident code is already the larger part of its memory.

/// One arena for the whole process. Called first thing in `main`, before any thread starts
/// (glibc reads the limit when a thread first needs an arena).
pub fn one_arena() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets a tunable of the allocator; M_ARENA_MAX takes any positive
    // value. No thread has been started yet.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hands the heap's whole free pages back to the kernel. A scheduler thread calls it after a
/// collector run's result is applied: what the run allocated and freed no longer counts in
/// the agent's resident memory until the next run needs it again.
pub fn release_free_pages() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim takes the arena locks itself and only releases free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(all(test, target_env = "gnu"))]
mod tests {
    use super::*;

    /// What a freed block in the middle of the heap leaves resident, before and after
    /// `release_free_pages`: the trim must give back most of it. Measured on this process's
    /// own RSS (`/proc/self/statm`), with a block far above the mmap threshold's reach
    /// prevented by allocating it in many small pieces (as the collectors do).
    #[test]
    fn releasing_free_pages_returns_a_freed_middle_of_the_heap() {
        fn resident_kib() -> u64 {
            let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
            let pages: u64 = statm
                .split_whitespace()
                .nth(1)
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            pages * 4
        }
        // 16 MiB in 4 KiB pieces (under the mmap threshold: they come from the arena), then a
        // small block after them that keeps the heap's top from being trimmed on free.
        let pieces: Vec<Vec<u8>> = (0..4096).map(|i| vec![(i % 251) as u8; 4096]).collect();
        let keep = Box::new([1u8; 64]);
        let full = resident_kib();
        drop(pieces);
        release_free_pages();
        let after = resident_kib();
        assert!(keep[0] == 1);
        assert!(
            full.saturating_sub(after) >= 8 * 1024,
            "trim gave back {} KiB of 16 MiB freed (resident {full} -> {after} KiB)",
            full.saturating_sub(after)
        );
    }
}
