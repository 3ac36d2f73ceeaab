//! The agent's own program image after start-up: the pages of its code and read-only data
//! that only start-up used are handed back (issue 32; docs/cost.md, "Memory").
//!
//! Start-up runs code and reads data that `serve` never touches again: argument parsing,
//! the relocation table (`.rela.dyn`, read once by the static-PIE start-up code), the rule
//! files' and the catalogue's TOML and their parser, each collector's set-up. The kernel
//! maps file pages into the process 64 KiB around each page fault (fault-around), so those
//! runs left most of the 7.7 MB of code and 3.4 MB of read-only data resident for good
//! (measured with `/proc/<pid>/pagemap`: 4.4 MB of code and 2.5 MB of read-only data 40 s
//! after start, against 3.1 and 1.3 MB that a minute of steady running faults back in once
//! they are dropped).
//!
//! Once every collector has run, [`release_startup_pages`] tells the kernel with
//! `madvise(MADV_DONTNEED)` that the process no longer needs the pages of its read-only
//! segments: for a private file mapping that only drops the page-table entries, the pages
//! stay in the page cache, and whatever the agent runs next faults back in from there (a
//! minor fault, no IO). It is what the kernel itself does with its `__init` sections after
//! boot. Only segments that are never written are dropped: the writable ones and the
//! `PT_GNU_RELRO` range hold the relocated data start-up wrote, which the file does not
//! have.
//!
//! The segments come from `dl_iterate_phdr` (the loaded program's own headers), not from
//! `/proc/self/maps`: the headers say which range is RELRO, the maps only show permissions.

use std::ops::Range;

/// One program header of the loaded image, its addresses already relocated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// `PT_LOAD` or `PT_GNU_RELRO` ([`Kind`]).
    pub kind: Kind,
    /// Start address in this process.
    pub start: usize,
    /// Size in memory.
    pub len: usize,
    /// `PF_W`.
    pub writable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Load,
    Relro,
}

/// The whole pages of the read-only `PT_LOAD` segments that no writable segment and no RELRO
/// range touches, merged where they adjoin. A page shared with a written range is kept.
pub fn releasable(segments: &[Segment], page: usize) -> Vec<Range<usize>> {
    let written: Vec<Range<usize>> = segments
        .iter()
        .filter(|s| s.writable || s.kind == Kind::Relro)
        .map(|s| s.start / page * page..(s.start + s.len).div_ceil(page) * page)
        .collect();
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut loads: Vec<&Segment> = segments
        .iter()
        .filter(|s| s.kind == Kind::Load && !s.writable && s.len > 0)
        .collect();
    loads.sort_by_key(|s| s.start);
    for s in loads {
        let mut r = s.start.div_ceil(page) * page..(s.start + s.len) / page * page;
        for w in &written {
            if w.start < r.end && r.start < w.end {
                // Keep the written range's pages: take the part before it, or after it.
                if w.start > r.start {
                    r.end = w.start;
                } else {
                    r.start = w.end.min(r.end);
                }
            }
        }
        if r.start >= r.end {
            continue;
        }
        match out.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => out.push(r),
        }
    }
    out
}

/// The loaded program's segments (the first object `dl_iterate_phdr` reports is the
/// program itself).
#[cfg(target_os = "linux")]
fn own_segments() -> Vec<Segment> {
    unsafe extern "C" fn first(
        info: *mut libc::dl_phdr_info,
        _size: libc::size_t,
        data: *mut libc::c_void,
    ) -> libc::c_int {
        // SAFETY: `data` is the `Vec` passed below; `info` and its program headers are the
        // loader's, valid for the duration of the call.
        let (out, info) = unsafe { (&mut *(data as *mut Vec<Segment>), &*info) };
        if info.dlpi_phdr.is_null() {
            return 1;
        }
        // SAFETY: the loader gives `dlpi_phnum` headers at `dlpi_phdr`.
        let headers =
            unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        for h in headers {
            let kind = match h.p_type {
                libc::PT_LOAD => Kind::Load,
                libc::PT_GNU_RELRO => Kind::Relro,
                _ => continue,
            };
            out.push(Segment {
                kind,
                start: (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize),
                len: h.p_memsz as usize,
                writable: h.p_flags & libc::PF_W != 0,
            });
        }
        1 // the program only
    }
    let mut out: Vec<Segment> = Vec::new();
    // SAFETY: the callback only reads the headers the loader passes and writes into `out`.
    unsafe {
        libc::dl_iterate_phdr(
            Some(first),
            &mut out as *mut Vec<Segment> as *mut libc::c_void,
        );
    }
    out
}

/// Drops the process's mappings of its read-only segments' pages (see the module comment);
/// they fault back in from the page cache when used. Returns the bytes of address range
/// released (0 where this cannot be done).
pub fn release_startup_pages() -> usize {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
        let mut released = 0;
        for r in releasable(&own_segments(), page) {
            // SAFETY: the range is whole pages of this program's own read-only file mapping,
            // which nothing writes (RELRO and writable segments are excluded): marking it
            // random-access changes only how later faults read the file, and dropping the
            // pages loses nothing, the next access maps the file's page again.
            let rc = unsafe {
                let at = r.start as *mut libc::c_void;
                if libc::madvise(at, r.len(), libc::MADV_RANDOM) != 0 {
                    tracing::debug!(error = %std::io::Error::last_os_error(), "MADV_RANDOM on the program's read-only pages");
                }
                libc::madvise(at, r.len(), libc::MADV_DONTNEED)
            };
            if rc == 0 {
                released += r.len();
            } else {
                tracing::debug!(error = %std::io::Error::last_os_error(), "madvise of the program's read-only pages");
            }
        }
        // Once: what faults back after that comes in single pages (no readahead on these
        // mappings), so the cache holds no large folio of them again; a later eviction would
        // only make the next faults read the disk (about a thousand reads each time, measured
        // in an hour's soak that released after every bulk read).
        static EVICTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if released > 0 && !EVICTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            evict_own_file_cache();
            EVICTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        released
    }
    #[cfg(not(target_os = "linux"))]
    0
}

/// How many times this process dropped its file's page cache (at most once; tests read it).
#[cfg(target_os = "linux")]
static EVICTIONS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Asks the kernel to drop the page cache of the program's own file, now that the process
/// maps none of its read-only pages: what the agent runs next reads back single pages.
///
/// Without this, dropping the mappings saves little on a 6.x kernel. The page cache holds a
/// file in large folios (up to 2 MiB, from the copy that wrote the binary or the readahead
/// that first read it), and a page fault maps the whole folio around the page it needs: a
/// steady `serve` that ran some 1.5 MiB of code had 4.5 MiB of it resident (docs/cost.md,
/// "The program's file pages"). With the cache dropped, a fault on a random-access mapping
/// (`MADV_RANDOM`, set above: no readahead) reads and maps that one page. Those reads are
/// once per page while the cache keeps them, a few hundred after start-up; other processes
/// that run the same file (a `check` in the agent's container) read it back as they use it.
#[cfg(target_os = "linux")]
fn evict_own_file_cache() {
    use std::os::fd::AsRawFd;
    match std::fs::File::open("/proc/self/exe") {
        // SAFETY: posix_fadvise only advises the kernel about the open file's cache.
        Ok(f) => unsafe {
            let rc = libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
            if rc != 0 {
                tracing::debug!(error = %std::io::Error::from_raw_os_error(rc), "dropping the program file's page cache");
            }
        },
        Err(e) => tracing::debug!(error = %e, "opening /proc/self/exe to drop its page cache"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(start: usize, len: usize, writable: bool) -> Segment {
        Segment {
            kind: Kind::Load,
            start,
            len,
            writable,
        }
    }

    /// The static-PIE release binary's layout (`readelf -lW`): R, R E, then RW RELRO and RW.
    #[test]
    fn read_only_segments_are_released_whole_pages_only() {
        let base = 0x7f00_0000_0000;
        let segs = [
            load(base, 0x3624a8, false),
            load(base + 0x3634c0, 0x790d10, false),
            load(base + 0xaf51d0, 0x57e30, true),
            load(base + 0xb4d980, 0xc6a8, true),
            Segment {
                kind: Kind::Relro,
                start: base + 0xaf51d0,
                len: 0x577b0,
                writable: false,
            },
        ];
        assert_eq!(
            releasable(&segs, 0x1000),
            vec![base..base + 0x362000, base + 0x364000..base + 0xaf4000]
        );
    }

    /// A read-only segment sharing a page with RELRO keeps that page; one inside a written
    /// range is not released at all; adjoining ranges merge.
    #[test]
    fn pages_shared_with_written_ranges_are_kept() {
        let relro = Segment {
            kind: Kind::Relro,
            start: 0x5800,
            len: 0x1000,
            writable: false,
        };
        let segs = [
            load(0x1000, 0x2000, false),
            load(0x3000, 0x3000, false),
            relro,
            load(0x20000, 0x800, false),
            load(0x30000, 0x4000, false),
            load(0x31000, 0x1000, true),
        ];
        assert_eq!(
            releasable(&segs, 0x1000),
            vec![0x1000..0x5000, 0x30000..0x31000]
        );
    }

    /// On this test binary: the read-only segments are found, releasing them lowers the
    /// resident pages of the program's own read-only mappings, and the code still runs.
    /// Also: the engine releases the pages again after each bulk read of embedded text; the
    /// file's cache is dropped only the first time (each drop makes the next faults read the
    /// disk). Alone in its process: the engine's tests release pages too, and a release
    /// beside this one changes the resident figures and the count under it.
    #[test]
    fn releasing_drops_resident_read_only_pages_and_code_still_runs() {
        if crate::alone::ran_alone_in_a_child(
            "image::tests::releasing_drops_resident_read_only_pages_and_code_still_runs",
        ) {
            return;
        }
        fn exe_read_only_rss_kib() -> u64 {
            let exe = std::fs::read_link("/proc/self/exe").unwrap();
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let mut total = 0;
            let mut counting = false;
            for line in smaps.lines() {
                let mut f = line.split_whitespace();
                if let (Some(range), Some(perms)) = (f.next(), f.next()) {
                    if range.contains('-') && perms.len() == 4 {
                        let path = line.split_whitespace().nth(5).unwrap_or("");
                        counting = path == exe.to_string_lossy() && !perms.contains('w');
                        continue;
                    }
                }
                if counting {
                    if let Some(kb) = line.strip_prefix("Rss:") {
                        total += kb.trim().trim_end_matches(" kB").parse::<u64>().unwrap();
                    }
                }
            }
            total
        }
        let segs = own_segments();
        assert!(segs.iter().any(|s| s.kind == Kind::Load && !s.writable));
        let before = exe_read_only_rss_kib();
        let released = release_startup_pages();
        let after = exe_read_only_rss_kib();
        assert!(released > 0, "nothing released: {segs:?}");
        assert!(
            after < before,
            "resident read-only pages {before} KiB before, {after} KiB after"
        );
        // Code and the released read-only data fault back in: the loader's headers read
        // again (they sit in the first read-only segment) give the same segments.
        assert_eq!(own_segments(), segs);
        assert!(exe_read_only_rss_kib() > 0);
        let again = release_startup_pages();
        assert!(again > 0, "the second release released nothing");
        assert_eq!(
            EVICTIONS.load(std::sync::atomic::Ordering::Relaxed),
            1,
            "the program file's cache was dropped more than once, or never"
        );
    }
}
