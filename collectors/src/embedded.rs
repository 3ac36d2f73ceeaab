//! How often the text built into the binary (rule files, the explain catalogue) has been read
//! in bulk: a whole file parsed, or scanned for a key.
//!
//! Each such read happens once per rule, key or file in a process's life, and afterwards only
//! its parsed copy on the heap is used; but the kernel keeps the text's pages mapped into the
//! process (with 64 KiB about each page touched) until told otherwise. The agent compares this
//! count after each run and hands those pages back when it moved (`agent/src/image.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

static BULK_READS: AtomicU64 = AtomicU64::new(0);

/// Records one bulk read of embedded text.
pub fn note_bulk_read() {
    BULK_READS.fetch_add(1, Ordering::Relaxed);
}

/// Bulk reads of embedded text since the process started.
pub fn bulk_reads() -> u64 {
    BULK_READS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_note_counts_once() {
        let before = bulk_reads();
        note_bulk_read();
        note_bulk_read();
        // Other tests of this process may note reads meanwhile: at least ours.
        assert!(bulk_reads() >= before + 2);
    }
}
