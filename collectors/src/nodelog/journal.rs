//! A reader of systemd journal files (`/var/log/journal/<machine-id>/system.journal` and its
//! rotated `system@….journal` siblings, or `/run/log/journal/…` when the journal is volatile),
//! written from the documented format (<https://systemd.io/JOURNAL_FILE_FORMAT/>), with no
//! libsystemd and no `mmap`.
//!
//! Why our own and not a crate: `sdjournal` (MIT, 0.1.x) is the one maintained pure-Rust reader
//! that fits the licence; it opens the files itself with `File::open` (blocking on a FIFO a
//! broken host root puts there, and bypassing [`crate::hostfs`]), `mmap`s archived files (a
//! file truncated under the mapping kills the reader with `SIGBUS`), discovers and re-opens
//! every file of a directory per query, and bounds work by entry count only, not bytes. The
//! `systemd-journal-sdk` crates are GPL-3.0. The part of the format a forward reader needs is
//! small: the header, entry array objects walked in order, entry objects and the data objects
//! they point to, in the regular and the compact layout (systemd ≥ 252's default for new
//! files), with XZ, LZ4 or ZSTD compressed data (pure-Rust decoders: `lzma-rs`, `lz4_flex`,
//! `ruzstd`). Hash tables, field objects, tags and sealing are not needed to read entries in
//! order and are ignored; the keyed-hash flag only changes hashes, which are not checked.
//!
//! Every offset, size and count read from a file is checked (inside the file, 8-byte aligned,
//! of the object type expected, below a cap) before it is used; a file that fails a check stops
//! being read at that point this cycle (an online file may be mid-write: the next cycle tries
//! again), never panics. Reads are `pread`s through a small block cache and counted.

use std::collections::HashMap;
use std::io::Read;
use std::os::unix::fs::FileExt;

pub const SIGNATURE: &[u8; 8] = b"LPKSHHRH";

/// Header incompatible flags.
pub mod incompat {
    pub const COMPRESSED_XZ: u32 = 1 << 0;
    pub const COMPRESSED_LZ4: u32 = 1 << 1;
    pub const KEYED_HASH: u32 = 1 << 2;
    pub const COMPRESSED_ZSTD: u32 = 1 << 3;
    pub const COMPACT: u32 = 1 << 4;
    pub const KNOWN: u32 = COMPRESSED_XZ | COMPRESSED_LZ4 | KEYED_HASH | COMPRESSED_ZSTD | COMPACT;
}

const OBJECT_DATA: u8 = 1;
const OBJECT_ENTRY: u8 = 3;
const OBJECT_ENTRY_ARRAY: u8 = 6;
const OBJ_COMPRESSED_XZ: u8 = 1;
const OBJ_COMPRESSED_LZ4: u8 = 2;
const OBJ_COMPRESSED_ZSTD: u8 = 4;

/// Bytes of the header this reader needs (up to `tail_entry_monotonic` and beyond, systemd 187+
/// files have 240+; the oldest format this reads has 208).
const HEADER_MIN: u64 = 208;
/// An entry with more items than this is not one journald writes (it caps fields per entry
/// far below; `max_fields_per_entry` of systemd's own limits is 1024 for imports).
const MAX_ENTRY_ITEMS: u64 = 4096;
/// Bytes of a data payload kept (`MESSAGE` is cut there). journald's `LineMax` default is
/// 48 KiB; kubelet and runtime messages are a few KB.
pub const MAX_PAYLOAD: usize = 64 << 10;
/// A data object larger than this is skipped unread (a binary field, a core dump).
const MAX_DATA_OBJECT: u64 = 16 << 20;
/// Entry arrays followed per file per cycle before the chain is taken as corrupt (systemd's
/// arrays double in size: a few dozen cover any real file).
const MAX_ARRAYS: usize = 100_000;
/// Block cache: 8 blocks of 64 KiB.
const BLOCK: u64 = 64 << 10;
const BLOCKS: usize = 8;
/// Data objects remembered per file (fields repeat: `_HOSTNAME`, `SYSLOG_IDENTIFIER=kubelet`).
const DATA_CACHE: usize = 8192;

/// Why a journal file stops being read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JournalError {
    #[error("not a journal file (bad signature)")]
    Signature,
    #[error("unsupported journal format (incompatible flags {0:#x})")]
    Incompatible(u32),
    #[error("corrupt journal file: {0}")]
    Corrupt(String),
    #[error("read error: {0}")]
    Io(String),
}

fn corrupt(what: impl Into<String>) -> JournalError {
    JournalError::Corrupt(what.into())
}

/// Anything that reads at an offset: a file (`pread`) or bytes in tests.
pub trait ReadAt {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
}

impl ReadAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        FileExt::read_at(self, buf, offset)
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let Ok(start) = usize::try_from(offset) else {
            return Ok(0);
        };
        if start >= self.len() {
            return Ok(0);
        }
        let n = buf.len().min(self.len() - start);
        buf[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

impl ReadAt for Vec<u8> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.as_slice().read_at(buf, offset)
    }
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

fn le32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

/// The header fields this reader uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub compatible_flags: u32,
    pub incompatible_flags: u32,
    /// 0 offline, 1 online (being written), 2 archived.
    pub state: u8,
    pub file_id: [u8; 16],
    pub seqnum_id: [u8; 16],
    pub header_size: u64,
    pub arena_size: u64,
    pub tail_object_offset: u64,
    pub n_entries: u64,
    pub tail_entry_seqnum: u64,
    pub head_entry_seqnum: u64,
    pub entry_array_offset: u64,
    pub head_entry_realtime: u64,
    pub tail_entry_realtime: u64,
}

impl Header {
    pub fn parse(b: &[u8]) -> Result<Header, JournalError> {
        if b.get(..8) != Some(SIGNATURE.as_slice()) {
            return Err(JournalError::Signature);
        }
        if (b.len() as u64) < HEADER_MIN {
            return Err(corrupt("short header"));
        }
        let incompatible_flags = le32(b, 12);
        if incompatible_flags & !incompat::KNOWN != 0 {
            return Err(JournalError::Incompatible(incompatible_flags));
        }
        let mut file_id = [0u8; 16];
        file_id.copy_from_slice(&b[24..40]);
        let mut seqnum_id = [0u8; 16];
        seqnum_id.copy_from_slice(&b[72..88]);
        let h = Header {
            compatible_flags: le32(b, 8),
            incompatible_flags,
            state: b[16],
            file_id,
            seqnum_id,
            header_size: le64(b, 88),
            arena_size: le64(b, 96),
            tail_object_offset: le64(b, 136),
            n_entries: le64(b, 152),
            tail_entry_seqnum: le64(b, 160),
            head_entry_seqnum: le64(b, 168),
            entry_array_offset: le64(b, 176),
            head_entry_realtime: le64(b, 184),
            tail_entry_realtime: le64(b, 192),
        };
        if h.header_size < HEADER_MIN || !h.header_size.is_multiple_of(8) || h.header_size > 1 << 20
        {
            return Err(corrupt(format!("header size {}", h.header_size)));
        }
        Ok(h)
    }

    pub fn compact(&self) -> bool {
        self.incompatible_flags & incompat::COMPACT != 0
    }
}

/// The fields of an entry this product reads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Entry {
    pub seqnum: u64,
    /// Microseconds since the epoch (`__REALTIME_TIMESTAMP`).
    pub realtime_usec: u64,
    /// The boot the entry was written in (`_BOOT_ID`, the entry object's own field): what
    /// tells an earlier boot's entries from this boot's whatever the clock said.
    pub boot_id: [u8; 16],
    pub message: Option<String>,
    pub identifier: Option<String>,
    pub comm: Option<String>,
    pub pid: Option<u32>,
    pub unit: Option<String>,
}

impl Entry {
    /// The program: `SYSLOG_IDENTIFIER`, else `_COMM`.
    pub fn ident(&self) -> &str {
        self.identifier
            .as_deref()
            .or(self.comm.as_deref())
            .unwrap_or("")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Message,
    Identifier,
    Comm,
    Pid,
    SyslogPid,
    Unit,
}

fn field_of(name: &[u8]) -> Option<Field> {
    Some(match name {
        b"MESSAGE" => Field::Message,
        b"SYSLOG_IDENTIFIER" => Field::Identifier,
        b"_COMM" => Field::Comm,
        b"_PID" => Field::Pid,
        b"SYSLOG_PID" => Field::SyslogPid,
        b"_SYSTEMD_UNIT" => Field::Unit,
        _ => return None,
    })
}

/// Where a forward read stands in one file: the entry array and the index in it of the next
/// entry to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub array: u64,
    pub index: u64,
    /// Sequence number of the last entry read (0 before the first).
    pub last_seqnum: u64,
}

/// Counters of one read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    pub bytes_read: u64,
    pub entries: u64,
    /// Data objects whose compression could not be decoded (or decoded beyond the cap).
    pub undecodable_fields: u64,
    /// Data objects skipped for their size.
    pub oversized_fields: u64,
}

/// One journal file, opened for a forward read.
pub struct JournalFile<'a, R: ReadAt + ?Sized> {
    src: &'a R,
    pub header: Header,
    /// File length (the arena may claim more for a preallocated file).
    len: u64,
    blocks: Vec<(u64, Vec<u8>)>,
    data_cache: HashMap<u64, Option<(Field, String)>>,
    pub stats: ReadStats,
}

impl<'a, R: ReadAt + ?Sized> JournalFile<'a, R> {
    /// Reads and checks the header. `len` is the file's length.
    pub fn open(src: &'a R, len: u64) -> Result<JournalFile<'a, R>, JournalError> {
        let mut f = JournalFile {
            src,
            header: Header {
                compatible_flags: 0,
                incompatible_flags: 0,
                state: 0,
                file_id: [0; 16],
                seqnum_id: [0; 16],
                header_size: 0,
                arena_size: 0,
                tail_object_offset: 0,
                n_entries: 0,
                tail_entry_seqnum: 0,
                head_entry_seqnum: 0,
                entry_array_offset: 0,
                head_entry_realtime: 0,
                tail_entry_realtime: 0,
            },
            len,
            blocks: Vec::new(),
            data_cache: HashMap::new(),
            stats: ReadStats::default(),
        };
        let want = 272.min(len);
        let b = f.read(0, want as usize)?;
        f.header = Header::parse(&b)?;
        Ok(f)
    }

    /// Bytes at `[off, off+n)`, through the block cache (large reads go straight to the file).
    fn read(&mut self, off: u64, n: usize) -> Result<Vec<u8>, JournalError> {
        let end = off
            .checked_add(n as u64)
            .filter(|e| *e <= self.len)
            .ok_or_else(|| corrupt(format!("read of {n} bytes at {off} past the end")))?;
        if n as u64 > BLOCK * 2 {
            let mut buf = vec![0u8; n];
            self.fill(&mut buf, off)?;
            return Ok(buf);
        }
        let mut out = Vec::with_capacity(n);
        let mut at = off;
        while at < end {
            let bi = at / BLOCK;
            let block = self.block(bi)?;
            let from = (at - bi * BLOCK) as usize;
            let upto = ((end - bi * BLOCK) as usize).min(block.len());
            if from >= upto {
                return Err(corrupt(format!("short read at {at}")));
            }
            out.extend_from_slice(&block[from..upto]);
            at += (upto - from) as u64;
        }
        Ok(out)
    }

    fn block(&mut self, bi: u64) -> Result<&[u8], JournalError> {
        if let Some(i) = self.blocks.iter().position(|(b, _)| *b == bi) {
            // Most recently used last.
            let hit = self.blocks.remove(i);
            self.blocks.push(hit);
        } else {
            let start = bi * BLOCK;
            let n = BLOCK.min(self.len.saturating_sub(start)) as usize;
            let mut buf = vec![0u8; n];
            self.fill(&mut buf, start)?;
            if self.blocks.len() >= BLOCKS {
                self.blocks.remove(0);
            }
            self.blocks.push((bi, buf));
        }
        Ok(self.blocks.last().map(|(_, b)| b.as_slice()).unwrap_or(&[]))
    }

    fn fill(&mut self, buf: &mut [u8], off: u64) -> Result<(), JournalError> {
        let mut done = 0;
        while done < buf.len() {
            match self.src.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => return Err(corrupt(format!("file ends at {}", off + done as u64))),
                Ok(n) => {
                    done += n;
                    self.stats.bytes_read += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(JournalError::Io(e.to_string())),
            }
        }
        Ok(())
    }

    /// An object's header at `off`: its type, flags and size, checked.
    fn object_header(&mut self, off: u64, want_type: u8) -> Result<(u8, u64), JournalError> {
        if off < self.header.header_size || !off.is_multiple_of(8) || off >= self.len {
            return Err(corrupt(format!("object offset {off}")));
        }
        let h = self.read(off, 16)?;
        let (ty, flags, size) = (h[0], h[1], le64(&h, 8));
        if ty != want_type {
            return Err(corrupt(format!(
                "object at {off} has type {ty}, expected {want_type}"
            )));
        }
        if size < 16 || off.checked_add(size).is_none_or(|e| e > self.len) {
            return Err(corrupt(format!("object at {off} has size {size}")));
        }
        Ok((flags, size))
    }

    fn item_size(&self) -> u64 {
        if self.header.compact() {
            4
        } else {
            8
        }
    }

    /// An entry array: (next array, number of item slots).
    fn array(&mut self, off: u64) -> Result<(u64, u64), JournalError> {
        let (_, size) = self.object_header(off, OBJECT_ENTRY_ARRAY)?;
        if size < 24 {
            return Err(corrupt(format!("entry array at {off} of size {size}")));
        }
        let next = le64(&self.read(off + 16, 8)?, 0);
        Ok((next, (size - 24) / self.item_size()))
    }

    /// Items `[from, from+n)` of the array at `off` (0 = an unused slot).
    fn array_items(&mut self, off: u64, from: u64, n: u64) -> Result<Vec<u64>, JournalError> {
        let isz = self.item_size();
        let b = self.read(off + 24 + from * isz, (n * isz) as usize)?;
        Ok(b.chunks_exact(isz as usize)
            .map(|c| {
                if isz == 4 {
                    le32(c, 0) as u64
                } else {
                    le64(c, 0)
                }
            })
            .collect())
    }

    /// An entry's realtime without its fields.
    fn entry_realtime(&mut self, off: u64) -> Result<u64, JournalError> {
        self.object_header(off, OBJECT_ENTRY)?;
        Ok(le64(&self.read(off + 24, 8)?, 0))
    }

    /// The entry at `off` with the fields this product reads.
    pub fn entry(&mut self, off: u64) -> Result<Entry, JournalError> {
        let (_, size) = self.object_header(off, OBJECT_ENTRY)?;
        if size < 64 {
            return Err(corrupt(format!("entry at {off} of size {size}")));
        }
        let head = self.read(off, 64)?;
        let isz = if self.header.compact() { 4 } else { 16 };
        let n = (size - 64) / isz;
        if n > MAX_ENTRY_ITEMS {
            return Err(corrupt(format!("entry at {off} has {n} items")));
        }
        let items = self.read(off + 64, (n * isz) as usize)?;
        let mut boot_id = [0u8; 16];
        boot_id.copy_from_slice(&head[40..56]);
        let mut e = Entry {
            seqnum: le64(&head, 16),
            realtime_usec: le64(&head, 24),
            boot_id,
            ..Entry::default()
        };
        for c in items.chunks_exact(isz as usize) {
            let d = if isz == 4 {
                le32(c, 0) as u64
            } else {
                le64(c, 0)
            };
            let Some((field, value)) = self.data(d)? else {
                continue;
            };
            match field {
                Field::Message => e.message = Some(value),
                Field::Identifier => e.identifier = Some(value),
                Field::Comm => e.comm = Some(value),
                Field::Pid => e.pid = e.pid.or(value.parse().ok()),
                Field::SyslogPid => e.pid = value.parse().ok().or(e.pid),
                Field::Unit => e.unit = Some(value),
            }
        }
        self.stats.entries += 1;
        Ok(e)
    }

    /// The field a data object holds, when it is one this product reads.
    fn data(&mut self, off: u64) -> Result<Option<(Field, String)>, JournalError> {
        if let Some(hit) = self.data_cache.get(&off) {
            return Ok(hit.clone());
        }
        let (flags, size) = self.object_header(off, OBJECT_DATA)?;
        let payload_at = if self.header.compact() { 72 } else { 64 };
        if size < payload_at {
            return Err(corrupt(format!("data object at {off} of size {size}")));
        }
        let out = if size > MAX_DATA_OBJECT {
            self.stats.oversized_fields += 1;
            None
        } else {
            let raw = self.read(off + payload_at, (size - payload_at) as usize)?;
            let compression =
                flags & (OBJ_COMPRESSED_XZ | OBJ_COMPRESSED_LZ4 | OBJ_COMPRESSED_ZSTD);
            let payload = if compression == 0 {
                Some(raw)
            } else {
                let d = decompress(compression, &raw);
                if d.is_none() {
                    self.stats.undecodable_fields += 1;
                }
                d
            };
            payload.and_then(|p| {
                let eq = p.iter().position(|b| *b == b'=')?;
                let field = field_of(&p[..eq])?;
                let mut v = &p[eq + 1..];
                if v.len() > MAX_PAYLOAD {
                    v = &v[..MAX_PAYLOAD];
                }
                Some((field, String::from_utf8_lossy(v).into_owned()))
            })
        };
        if self.data_cache.len() >= DATA_CACHE {
            self.data_cache.clear();
        }
        self.data_cache.insert(off, out.clone());
        Ok(out)
    }

    /// The position of the first entry with a realtime at or after `since_usec`: the last
    /// array whose first entry is older, then a binary search inside it.
    pub fn seek_realtime(&mut self, since_usec: u64) -> Result<Position, JournalError> {
        let mut arr = self.header.entry_array_offset;
        let start = Position {
            array: arr,
            index: 0,
            last_seqnum: 0,
        };
        if arr == 0 || self.header.head_entry_realtime >= since_usec {
            return Ok(start);
        }
        let mut candidate = start;
        let mut steps = 0;
        while arr != 0 {
            steps += 1;
            if steps > MAX_ARRAYS {
                return Err(corrupt("entry array chain too long"));
            }
            let (next, slots) = self.array(arr)?;
            let first = self.array_items(arr, 0, 1.min(slots))?;
            let Some(&first) = first.first().filter(|o| **o != 0) else {
                break;
            };
            if self.entry_realtime(first)? >= since_usec {
                break;
            }
            candidate = Position {
                array: arr,
                index: 0,
                last_seqnum: 0,
            };
            arr = next;
        }
        // Binary search in the candidate array over its used slots.
        let (_, slots) = self.array(candidate.array)?;
        let (mut lo, mut hi) = (0u64, slots);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let item = self.array_items(candidate.array, mid, 1)?[0];
            let older = item != 0 && self.entry_realtime(item)? < since_usec;
            if older {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(Position {
            array: candidate.array,
            index: lo,
            last_seqnum: 0,
        })
    }

    /// The position after the last entry (to follow only what comes next).
    pub fn seek_end(&mut self) -> Result<Position, JournalError> {
        self.seek_realtime(u64::MAX)
    }

    /// Reads entries forward from `pos`, at most `max_entries` and until `max_bytes` have been
    /// read from the file; returns them and the position after the last one read. An error
    /// after some entries keeps them (the position stays at the failing entry).
    pub fn read_forward(
        &mut self,
        pos: Position,
        max_entries: usize,
        max_bytes: u64,
        out: &mut Vec<Entry>,
    ) -> (Position, Option<JournalError>) {
        self.read_forward_filtered(pos, max_entries, max_bytes, &|_| true, out)
    }

    /// [`JournalFile::read_forward`], keeping only the entries `keep` accepts (the others
    /// count against `max_entries` all the same: it bounds the work, not the output).
    pub fn read_forward_filtered(
        &mut self,
        mut pos: Position,
        max_entries: usize,
        max_bytes: u64,
        keep: &dyn Fn(&Entry) -> bool,
        out: &mut Vec<Entry>,
    ) -> (Position, Option<JournalError>) {
        let mut examined = 0usize;
        let mut arrays = 0;
        let start_bytes = self.stats.bytes_read;
        while pos.array != 0 {
            arrays += 1;
            if arrays > MAX_ARRAYS {
                return (pos, Some(corrupt("entry array chain too long")));
            }
            let (next, slots) = match self.array(pos.array) {
                Ok(x) => x,
                Err(e) => return (pos, Some(e)),
            };
            while pos.index < slots {
                if examined >= max_entries || self.stats.bytes_read - start_bytes >= max_bytes {
                    return (pos, None);
                }
                let n = (slots - pos.index).min(256);
                let items = match self.array_items(pos.array, pos.index, n) {
                    Ok(i) => i,
                    Err(e) => return (pos, Some(e)),
                };
                for item in items {
                    if item == 0 {
                        // Unused slot: the end of the entries written so far.
                        return (pos, None);
                    }
                    if examined >= max_entries || self.stats.bytes_read - start_bytes >= max_bytes {
                        return (pos, None);
                    }
                    match self.entry(item) {
                        Ok(e) => {
                            // Sequence numbers only grow within a file; a repeat is a cursor
                            // that went wrong, not a new entry.
                            if e.seqnum > pos.last_seqnum {
                                pos.last_seqnum = e.seqnum;
                                examined += 1;
                                if keep(&e) {
                                    out.push(e);
                                }
                            }
                        }
                        Err(e) => return (pos, Some(e)),
                    }
                    pos.index += 1;
                }
            }
            if next == 0 {
                return (pos, None);
            }
            pos = Position {
                array: next,
                index: 0,
                last_seqnum: pos.last_seqnum,
            };
        }
        (pos, None)
    }
}

/// Decompresses a data payload (at most [`MAX_PAYLOAD`] + 256 bytes kept; a longer result is
/// cut, which keeps the field name and the start of the value).
fn decompress(flags: u8, raw: &[u8]) -> Option<Vec<u8>> {
    let cap = MAX_PAYLOAD + 256;
    match flags {
        OBJ_COMPRESSED_ZSTD => {
            let mut d = ruzstd::decoding::StreamingDecoder::new(raw).ok()?;
            let mut out = Vec::new();
            (&mut d).take(cap as u64).read_to_end(&mut out).ok()?;
            Some(out)
        }
        OBJ_COMPRESSED_LZ4 => {
            // systemd's framing: the decompressed size (le64), then one LZ4 block.
            let size = usize::try_from(le64(raw, 0)).ok()?;
            let block = raw.get(8..)?;
            // A field over 1 MiB is not a log message; its size is not trusted further.
            if size > 1 << 20 {
                return None;
            }
            let mut out = vec![0u8; size];
            let n = lz4_flex::block::decompress_into(block, &mut out).ok()?;
            out.truncate(n.min(cap));
            Some(out)
        }
        OBJ_COMPRESSED_XZ => {
            let mut out = CappedWriter {
                buf: Vec::new(),
                cap,
            };
            let mut input = raw;
            match lzma_rs::xz_decompress(&mut input, &mut out) {
                Ok(()) => Some(out.buf),
                // The cap was reached: keep what fits.
                Err(_) if out.buf.len() >= cap => Some(out.buf),
                Err(_) => None,
            }
        }
        _ => None,
    }
}

struct CappedWriter {
    buf: Vec<u8>,
    cap: usize,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let room = self.cap.saturating_sub(self.buf.len());
        if room == 0 {
            return Err(std::io::Error::other("cap reached"));
        }
        let n = b.len().min(room);
        self.buf.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests;
