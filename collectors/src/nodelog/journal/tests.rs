//! The reader on real journal files written by systemd 252 (`collectors/tests/fixtures/journal`,
//! made by its `make.sh`), on files made at test time by `systemd-journal-remote` and compared
//! with `journalctl`'s reading of them (when the package is installed), and on damaged files.

use super::*;

const COMPACT_ZSTD: &[u8] =
    include_bytes!("../../../tests/fixtures/journal/compact-zstd.journal.xz");
const REGULAR_PLAIN: &[u8] =
    include_bytes!("../../../tests/fixtures/journal/regular-plain.journal.xz");
const ENTRIES_TXT: &str = include_str!("../../../tests/fixtures/journal/entries.txt");

/// 2026-11-23T04:00:00Z, the first entry of the fixtures.
const BASE_USEC: u64 = 1_795_406_400 * 1_000_000;

pub(crate) fn unxz(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut &b[..], &mut out).unwrap();
    out
}

pub(crate) fn fixture_compact_zstd() -> Vec<u8> {
    unxz(COMPACT_ZSTD)
}

pub(crate) fn fixture_regular_plain() -> Vec<u8> {
    unxz(REGULAR_PLAIN)
}

fn read_all(bytes: &Vec<u8>) -> Vec<Entry> {
    let mut f = JournalFile::open(bytes, bytes.len() as u64).unwrap();
    let pos = f.seek_realtime(0).unwrap();
    let mut out = Vec::new();
    let (_, err) = f.read_forward(pos, usize::MAX, u64::MAX, &mut out);
    assert_eq!(err, None);
    out
}

/// `journalctl -o short-iso-precise`'s lines: (ident, pid, message).
fn journalctl_lines() -> Vec<(String, u32, String)> {
    ENTRIES_TXT
        .lines()
        .map(|l| {
            let (_, rest) = l.split_once(" node-1 ").unwrap();
            let (tag, msg) = rest.split_once("]: ").unwrap();
            let (ident, pid) = tag.split_once('[').unwrap();
            (ident.to_string(), pid.parse().unwrap(), msg.to_string())
        })
        .collect()
}

#[test]
fn reads_what_journalctl_reads_in_both_layouts() {
    let want = journalctl_lines();
    assert_eq!(want.len(), 40);
    for (name, bytes) in [
        ("compact-zstd", fixture_compact_zstd()),
        ("regular-plain", fixture_regular_plain()),
    ] {
        let f = JournalFile::open(&bytes, bytes.len() as u64).unwrap();
        assert_eq!(
            f.header.compact(),
            name == "compact-zstd",
            "{name}: {:#x}",
            f.header.incompatible_flags
        );
        let got = read_all(&bytes);
        assert_eq!(got.len(), 40, "{name}");
        for (i, (e, (ident, pid, msg))) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                e.realtime_usec,
                BASE_USEC + i as u64 * 10_000_000,
                "{name} #{i}"
            );
            assert_eq!(e.seqnum, i as u64 + 1);
            assert_eq!(
                (e.ident(), e.pid),
                (ident.as_str(), Some(*pid)),
                "{name} #{i}"
            );
            assert_eq!(e.message.as_deref(), Some(msg.as_str()), "{name} #{i}");
            assert_eq!(e.unit.as_deref(), Some(format!("{ident}.service").as_str()));
        }
    }
}

#[test]
fn the_long_message_is_zstd_compressed_and_decoded() {
    let bytes = fixture_compact_zstd();
    let mut f = JournalFile::open(&bytes, bytes.len() as u64).unwrap();
    assert!(f.header.incompatible_flags & incompat::COMPRESSED_ZSTD != 0);
    let pos = f.seek_realtime(0).unwrap();
    let mut out = Vec::new();
    f.read_forward(pos, usize::MAX, u64::MAX, &mut out);
    let long = out[17].message.as_deref().unwrap();
    assert!(long.len() > 512 && long.contains("x509: certificate signed by unknown authority"));
    assert_eq!(f.stats.undecodable_fields, 0);
}

#[test]
fn seeks_by_time_and_resumes_in_small_steps() {
    for bytes in [fixture_compact_zstd(), fixture_regular_plain()] {
        let mut f = JournalFile::open(&bytes, bytes.len() as u64).unwrap();
        // The first entry at or after 195 s is the 21st (200 s).
        let pos = f.seek_realtime(BASE_USEC + 195_000_000).unwrap();
        let mut out = Vec::new();
        f.read_forward(pos, 1, u64::MAX, &mut out);
        assert_eq!(out[0].seqnum, 21);
        // Past the end: nothing.
        let end = f.seek_end().unwrap();
        let mut none = Vec::new();
        f.read_forward(end, usize::MAX, u64::MAX, &mut none);
        assert!(none.is_empty());
        // Seven at a time gives the same 40 entries in order.
        let mut pos = f.seek_realtime(0).unwrap();
        let mut all = Vec::new();
        for _ in 0..10 {
            let mut step = Vec::new();
            let (p, err) = f.read_forward(pos, 7, u64::MAX, &mut step);
            assert_eq!(err, None);
            assert!(step.len() <= 7);
            pos = p;
            all.extend(step);
        }
        let seqs: Vec<u64> = all.iter().map(|e| e.seqnum).collect();
        assert_eq!(seqs, (1..=40).collect::<Vec<u64>>());
    }
}

#[test]
fn a_byte_budget_stops_the_read() {
    let bytes = fixture_regular_plain();
    let mut f = JournalFile::open(&bytes, bytes.len() as u64).unwrap();
    let pos = f.seek_realtime(0).unwrap();
    let mut out = Vec::new();
    let before = f.stats.bytes_read;
    let (p, _) = f.read_forward(pos, usize::MAX, 1, &mut out);
    // The first block read exhausts a 1-byte budget: at most one block's entries.
    assert!(out.len() < 40, "{}", out.len());
    assert!(f.stats.bytes_read > before);
    let mut rest = Vec::new();
    f.read_forward(p, usize::MAX, u64::MAX, &mut rest);
    assert_eq!(out.len() + rest.len(), 40);
}

#[test]
fn lz4_and_xz_data_objects_decode() {
    let field = b"MESSAGE="
        .iter()
        .copied()
        .chain(b"abc ".repeat(300))
        .collect::<Vec<u8>>();
    // systemd's LZ4 framing: le64 size, then the block.
    let mut lz4 = (field.len() as u64).to_le_bytes().to_vec();
    lz4.extend(lz4_flex::block::compress(&field));
    assert_eq!(
        decompress(OBJ_COMPRESSED_LZ4, &lz4).as_deref(),
        Some(&field[..])
    );
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &field[..], &mut xz).unwrap();
    assert_eq!(
        decompress(OBJ_COMPRESSED_XZ, &xz).as_deref(),
        Some(&field[..])
    );
    // A declared LZ4 size beyond the cap is refused, not allocated.
    let mut huge = (u64::MAX).to_le_bytes().to_vec();
    huge.extend(lz4_flex::block::compress(&field));
    assert_eq!(decompress(OBJ_COMPRESSED_LZ4, &huge), None);
    assert_eq!(decompress(OBJ_COMPRESSED_ZSTD, b"not zstd"), None);
    // An XZ bomb is cut at the cap.
    let big = vec![b'a'; MAX_PAYLOAD * 4];
    let mut xz = Vec::new();
    lzma_rs::xz_compress(&mut &big[..], &mut xz).unwrap();
    assert_eq!(
        decompress(OBJ_COMPRESSED_XZ, &xz).unwrap().len(),
        MAX_PAYLOAD + 256
    );
}

#[test]
fn refuses_what_is_not_a_journal() {
    let zeros = vec![0u8; 4096];
    assert_eq!(
        JournalFile::open(&zeros, 4096).err(),
        Some(JournalError::Signature)
    );
    let mut b = fixture_compact_zstd();
    b[12] |= 0x80; // an incompatible flag this reader does not know
    assert!(matches!(
        JournalFile::open(&b, b.len() as u64).err(),
        Some(JournalError::Incompatible(_))
    ));
    let short = fixture_compact_zstd()[..100].to_vec();
    assert!(JournalFile::open(&short, 100).is_err());
}

#[test]
fn a_file_cut_short_reads_what_it_has() {
    let full = fixture_regular_plain();
    let n = read_all(&full).len();
    // Cut in the middle of the objects: entries past the cut are errors, not panics.
    let f = JournalFile::open(&full, full.len() as u64).unwrap();
    let tail = f.header.tail_object_offset as usize;
    let cut = full[..tail - 6000].to_vec();
    let mut f = JournalFile::open(&cut, cut.len() as u64).unwrap();
    let pos = f.seek_realtime(0).unwrap();
    let mut out = Vec::new();
    let (_, err) = f.read_forward(pos, usize::MAX, u64::MAX, &mut out);
    assert!(out.len() < n || err.is_some());
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Damaged files (bytes overwritten anywhere, the file cut anywhere) never panic and every
    /// read ends.
    #[test]
    fn damaged_files_never_panic(
        flips in proptest::collection::vec((0usize..400_000, proptest::prelude::any::<u8>()), 1..64),
        cut in 300usize..400_000,
        compact in proptest::prelude::any::<bool>(),
    ) {
        let mut b = if compact { fixture_compact_zstd() } else { fixture_regular_plain() };
        // The interesting part is the header, hash tables' tail and the objects after them.
        let objects_at = b.len().min(0x39_0000);
        for (at, v) in flips {
            let i = if at < 300 { at } else { (objects_at + at) % b.len() };
            b[i] = v;
        }
        b.truncate(cut.max(b.len() - 400_000 + cut).min(b.len()));
        if let Ok(mut f) = JournalFile::open(&b, b.len() as u64) {
            if let Ok(pos) = f.seek_realtime(BASE_USEC + 100_000_000) {
                let mut out = Vec::new();
                let _ = f.read_forward(pos, 1000, 1 << 24, &mut out);
            }
            if let Ok(pos) = f.seek_realtime(0) {
                let mut out = Vec::new();
                let _ = f.read_forward(pos, 1000, 1 << 24, &mut out);
            }
        }
    }
}

/// Fresh files from systemd's own writer (compact and not, compressed and not) with varied
/// messages, read by this reader and by `journalctl -o json`: the same entries.
#[test]
fn agrees_with_journalctl_on_fresh_files() {
    let remote = std::path::Path::new("/lib/systemd/systemd-journal-remote");
    let has_journalctl = std::process::Command::new("journalctl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !remote.exists() || !has_journalctl {
        crate::skip!("SKIP agrees_with_journalctl_on_fresh_files: systemd-journal-remote/journalctl not installed (scripts/test.sh installs them)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut export = String::new();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..600u64 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 1500) as usize;
        let word = ["pleg ", "x509 ", "Conflict. ", "ñü ", "\"q\" "][(seed % 5) as usize];
        let msg: String = word.repeat(len / word.len() + 1);
        let ident = ["kubelet", "dockerd", "containerd"][(i % 3) as usize];
        export.push_str(&format!(
            "__REALTIME_TIMESTAMP={}\n__MONOTONIC_TIMESTAMP={}\n_BOOT_ID=5e8c2a0d4b3f4f6e9a1c7d2e3f405162\nSYSLOG_IDENTIFIER={ident}\n_PID={}\nMESSAGE={i} {msg}\n\n",
            BASE_USEC + i * 1_000_000,
            1_000_000 + i,
            100 + i % 7,
        ));
    }
    let export_path = dir.path().join("in.export");
    std::fs::write(&export_path, &export).unwrap();
    for (name, env, compress) in [
        ("compact-zstd", vec![], "yes"),
        ("compact-plain", vec![], "no"),
        (
            "regular-zstd",
            vec![
                ("SYSTEMD_JOURNAL_COMPACT", "0"),
                ("SYSTEMD_JOURNAL_KEYED_HASH", "0"),
            ],
            "yes",
        ),
    ] {
        let out = dir.path().join(format!("{name}.journal"));
        let status = std::process::Command::new(remote)
            .envs(env)
            .arg(format!("--compress={compress}"))
            .arg("-o")
            .arg(&out)
            .arg(&export_path)
            .output()
            .unwrap();
        assert!(status.status.success(), "{name}: {status:?}");
        let json = std::process::Command::new("journalctl")
            .arg("--file")
            .arg(&out)
            .args(["-o", "json", "--all", "--no-pager"])
            .output()
            .unwrap();
        let want: Vec<(u64, String, String)> = String::from_utf8(json.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (
                    v["__REALTIME_TIMESTAMP"].as_str().unwrap().parse().unwrap(),
                    v["SYSLOG_IDENTIFIER"].as_str().unwrap().to_string(),
                    v["MESSAGE"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(want.len(), 600, "{name}");
        let bytes = std::fs::read(&out).unwrap();
        let got: Vec<(u64, String, String)> = read_all(&bytes)
            .into_iter()
            .map(|e| {
                (
                    e.realtime_usec,
                    e.ident().to_string(),
                    e.message.unwrap_or_default(),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}");
    }
}
