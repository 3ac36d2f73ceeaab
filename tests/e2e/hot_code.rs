//! The release binary's hot code is linked together (issue 32; agent/build.rs says why): the
//! functions `agent/hot-code.txt` lists must still be in the binary (else the list is stale:
//! `scripts/bench-cost.sh --hot-code` regenerates it) and must sit together in `.text` (else
//! the binary was linked without the list, and `serve` maps most of its code again).

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use crate::manifests::repo_root;
use crate::support::bin_from_env;

/// Of the listed functions, the share the binary must still have.
const MIN_FOUND: f64 = 0.8;
/// How far the listed functions may spread, as a multiple of their total size.
const MAX_SPREAD: f64 = 1.25;

/// Code symbols of `binary` by name: (address, size), from `nm -S`.
fn code_symbols(binary: &std::path::Path) -> HashMap<String, (u64, u64)> {
    let out = Command::new("nm")
        .arg("-S")
        .arg(binary)
        .output()
        .expect("nm (binutils) runs");
    assert!(out.status.success(), "nm -S {}", binary.display());
    let mut syms = HashMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let p: Vec<&str> = line.split_whitespace().collect();
        if let [addr, size, kind, name] = p[..] {
            if matches!(kind, "t" | "T" | "w" | "W") {
                if let (Ok(a), Ok(s)) =
                    (u64::from_str_radix(addr, 16), u64::from_str_radix(size, 16))
                {
                    syms.entry(name.to_string()).or_insert((a, s));
                }
            }
        }
    }
    syms
}

/// (share of the list found, total size, address span) of `wanted` in `syms`.
fn placement(wanted: &[&str], syms: &HashMap<String, (u64, u64)>) -> (f64, u64, u64) {
    let found: Vec<(u64, u64)> = wanted
        .iter()
        .filter_map(|w| syms.get(*w).copied())
        .collect();
    let size = found.iter().map(|(_, s)| s).sum();
    let span = match (
        found.iter().map(|(a, _)| *a).min(),
        found.iter().map(|(a, s)| a + s).max(),
    ) {
        (Some(lo), Some(hi)) => hi - lo,
        _ => 0,
    };
    (found.len() as f64 / wanted.len().max(1) as f64, size, span)
}

#[test]
fn placement_tells_together_from_spread() {
    let syms: HashMap<String, (u64, u64)> = [("a", (0, 10)), ("b", (10, 10)), ("c", (1000, 10))]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect();
    assert_eq!(placement(&["a", "b"], &syms), (1.0, 20, 20));
    assert_eq!(placement(&["a", "c", "x", "y"], &syms), (0.5, 20, 1010));
}

#[test]
fn the_release_binary_links_its_hot_code_together() {
    // Only the release build is linked with the list (agent/build.rs); scripts/test.sh
    // builds it and names it in NODE_DOCTOR_BIN.
    let Some(bin) = bin_from_env("NODE_DOCTOR_BIN") else {
        collectors::skip!(
            "SKIP the_release_binary_links_its_hot_code_together: NODE_DOCTOR_BIN is unset \
             (scripts/test.sh sets it to the release build)"
        );
        return;
    };
    let list = std::fs::read_to_string(repo_root().join("agent/hot-code.txt"))
        .expect("agent/hot-code.txt");
    let wanted: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    assert!(
        wanted.len() > 500,
        "the list names {} functions",
        wanted.len()
    );
    let syms = code_symbols(&bin);
    let total: u64 = syms.values().map(|(_, s)| s).sum();
    let (share, size, span) = placement(&wanted, &syms);
    eprintln!(
        "hot code: {:.0} % of {} listed functions in {}, {} KiB of {} KiB of code, over {} KiB",
        share * 100.0,
        wanted.len(),
        bin.display(),
        size / 1024,
        total / 1024,
        span / 1024
    );
    assert!(
        share >= MIN_FOUND,
        "agent/hot-code.txt is stale: {:.0} % of it is in the binary; regenerate it with \
         scripts/bench-cost.sh --hot-code",
        share * 100.0
    );
    assert!(
        span as f64 <= MAX_SPREAD * size as f64,
        "the listed functions are spread over {span} bytes for {size} bytes of code: the binary \
         was not linked with agent/hot-code.txt (agent/build.rs)"
    );
}

/// (address, size) of section `name` of `binary`, from `readelf -SW`.
fn section(binary: &std::path::Path, name: &str) -> Option<(u64, u64)> {
    let out = Command::new("readelf")
        .arg("-SW")
        .arg(binary)
        .output()
        .expect("readelf (binutils) runs");
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| {
        let rest = l.split_once(']')?.1;
        let p: Vec<&str> = rest.split_whitespace().collect();
        // name type address offset size ...
        (p.first() == Some(&name)).then(|| {
            Some((
                u64::from_str_radix(p.get(2)?, 16).ok()?,
                u64::from_str_radix(p.get(4)?, 16).ok()?,
            ))
        })?
    })
}

/// Resident pages of `pid` among the `len` bytes at its image's address `at` (the image's
/// base: its first mapping of the executable, offset 0), from `/proc/<pid>/pagemap`.
fn resident_pages(pid: u32, at: u64, len: u64) -> u64 {
    use std::io::{Read, Seek, SeekFrom};
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("exe link");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let base = maps
        .lines()
        .find_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p.len() > 5 && Path::new(p[5]) == exe && p[2].trim_start_matches('0').is_empty())
                .then(|| u64::from_str_radix(p[0].split('-').next()?, 16).ok())?
        })
        .expect("the image's first mapping");
    let mut pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).expect("pagemap");
    let (first, last) = ((base + at) / 4096, (base + at + len - 1) / 4096);
    let mut n = 0;
    for page in first..=last {
        let mut entry = [0u8; 8];
        pagemap.seek(SeekFrom::Start(page * 8)).expect("seek");
        pagemap.read_exact(&mut entry).expect("pagemap entry");
        n += u64::from_le_bytes(entry) >> 63;
    }
    n
}

/// Once every collector has run, `serve` gives back the pages only start-up used
/// (agent/src/image.rs): the relocation table, read by the start-up code alone, is then not
/// resident at all. Fails when the release is not called or misses the read-only segments.
#[test]
fn serve_gives_back_start_up_pages_once_every_collector_has_run() {
    let bin = crate::support::shipped_bin();
    let Some((at, len)) = section(&bin, ".rela.dyn").filter(|(_, len)| *len >= 4096) else {
        collectors::skip!(
            "SKIP serve_gives_back_start_up_pages_once_every_collector_has_run: {} has no \
             .rela.dyn of a page or more",
            bin.display()
        );
        return;
    };
    let root = crate::support::FakeRoot::quiet();
    let s = crate::support::Server::start_bin(&bin, root.root(), &["--interval", "1s"]);
    s.wait_ready(30);
    let pages = (at + len - 1) / 4096 - at / 4096 + 1;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let mut resident = resident_pages(s.pid(), at, len);
    while resident > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(200));
        resident = resident_pages(s.pid(), at, len);
    }
    // One page may be shared with the section before it (read at run time).
    assert!(
        resident <= 1,
        "{resident} of {pages} pages of .rela.dyn still resident after every collector ran \
         ({}):\n{}",
        bin.display(),
        s.logs()
    );
    // And the agent still answers, code and data faulted back in.
    assert_eq!(s.get("/metrics").status, 200);
}

/// `(file offset, virtual address, size in the file)` of each `PT_LOAD` segment of `binary`,
/// from `readelf -lW`.
fn load_segments(binary: &Path) -> Vec<(u64, u64, u64)> {
    let out = Command::new("readelf")
        .arg("-lW")
        .arg(binary)
        .output()
        .expect("readelf (binutils) runs");
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p.first() == Some(&"LOAD"))
                .then(|| Some((hex(p.get(1)?)?, hex(p.get(2)?)?, hex(p.get(4)?)?)))?
        })
        .collect()
}

/// The address in the loaded image of the first copy of `needle` in `image` (the binary's
/// bytes), through the segment that holds it.
fn address_of(image: &[u8], segments: &[(u64, u64, u64)], needle: &[u8]) -> Option<u64> {
    let at = image.windows(needle.len()).position(|w| w == needle)? as u64;
    segments
        .iter()
        .find(|(off, _, size)| (*off..off + size).contains(&at))
        .map(|(off, vaddr, _)| at - off + vaddr)
}

/// Where each of `dir`'s `.toml` files lies in `bin`'s loaded image: (name, address, size).
fn embedded_texts(bin: &Path, dir: &Path) -> Vec<(String, u64, u64)> {
    let image = std::fs::read(bin).expect("read the binary");
    let segments = load_segments(bin);
    let mut texts = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the embedded files' folder") {
        let path = entry.expect("entry").path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let text = std::fs::read(&path).expect("embedded file");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let at = address_of(&image, &segments, &text)
            .unwrap_or_else(|| panic!("{} is not embedded in {}", path.display(), bin.display()));
        texts.push((name.unwrap_or_default(), at, text.len() as u64));
    }
    assert!(
        texts.len() >= 5,
        "only {} files in {}",
        texts.len(),
        dir.display()
    );
    texts
}

/// `Ok` when `pid` holds less than half of `texts`' pages; else the resident and total
/// pages and each file's share.
fn mostly_released(pid: u32, texts: &[(String, u64, u64)]) -> Result<(), (u64, u64, String)> {
    let (mut pages, mut resident, mut by_file) = (0, 0, Vec::new());
    for (name, at, len) in texts {
        let n = (at + len - 1) / 4096 - at / 4096 + 1;
        let r = resident_pages(pid, *at, *len);
        pages += n;
        resident += r;
        by_file.push(format!("{name} {r}/{n}"));
    }
    if resident * 2 < pages {
        Ok(())
    } else {
        Err((resident, pages, by_file.join(", ")))
    }
}

/// Fails when `pid` holds half of `texts`' pages or more, naming each file's share.
fn assert_mostly_released(pid: u32, texts: &[(String, u64, u64)], what: &str, logs: &str) {
    if let Err((resident, pages, by_file)) = mostly_released(pid, texts) {
        panic!(
            "{resident} of {what}'s {pages} pages resident in a steady serve: {by_file}\n{logs}"
        );
    }
}

/// A finding's rule is looked up at every run that raises it; the lookup must not read the
/// embedded text of every rule file. The build script's table of files put each file's name
/// beside its text, and a lookup that compared the names kept a page of every rule file (and
/// the kernel's 64 KiB fault-around window about it) resident in `serve`: 101 of the rule
/// files' 137 pages on a staged node (issue 43). Fails when a steady `serve` that raises a
/// finding at every run holds half of the rule files' pages or more.
#[test]
fn a_steady_serve_keeps_the_rule_files_text_out_of_memory() {
    let bin = crate::support::shipped_bin();
    let texts = embedded_texts(&bin, &repo_root().join("collectors/rules"));
    // A load four times the CPUs at every run: `load` raises a finding each time.
    let root = crate::support::FakeRoot::quiet();
    root.write("/proc/loadavg", "9.50 9.20 8.80 3/94 21971\n");
    let s = crate::support::Server::start_bin(
        &bin,
        root.root(),
        &["--interval", "1s", "--log-level", "debug"],
    );
    s.wait_ready(30);
    s.wait_findings(30, "a load finding", |v| {
        v["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["collector"] == "load"))
    });
    // The start-up pages are released once every collector has run; then a few more runs.
    s.wait_log(30, "start-up over");
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert_mostly_released(s.pid(), &texts, "the rule files", &s.logs());
}

/// Text read once after start-up goes back too: `/explain` parses the whole catalogue, whose
/// entries then live on the heap; the catalogue's embedded text stayed resident for good
/// (every page of it, issue 43). Fails when the agent does not release the program's pages
/// again after a run that follows a bulk read of embedded text.
#[test]
fn text_read_once_after_start_up_is_handed_back_after_the_next_run() {
    let bin = crate::support::shipped_bin();
    let texts = embedded_texts(&bin, &repo_root().join("collectors/catalogue"));
    let root = crate::support::FakeRoot::quiet();
    let s = crate::support::Server::start_bin(
        &bin,
        root.root(),
        &["--interval", "1s", "--log-level", "debug"],
    );
    s.wait_ready(30);
    s.wait_log(30, "start-up over");
    let r = s.get("/explain?q=Back-off%20restarting%20failed%20container%20OOMKilled");
    assert_eq!(r.status, 200, "{}", r.text());
    // Runs at 1 s follow; the first after the read should hand the pages back. A build that
    // never does keeps them: the check below fails after its last try, naming the files.
    for _ in 0..20 {
        std::thread::sleep(std::time::Duration::from_millis(500));
        if mostly_released(s.pid(), &texts).is_ok() {
            break;
        }
    }
    assert_mostly_released(s.pid(), &texts, "the explain catalogue", &s.logs());
}

/// `(start, end, VmFlags)` of each mapping of `exe` in `pid`, from `/proc/<pid>/smaps`.
fn image_mappings(pid: u32, exe: &Path) -> Vec<(u64, u64, String, String)> {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("smaps");
    let mut out = Vec::new();
    let mut current: Option<(u64, u64, String)> = None;
    for line in smaps.lines() {
        let p: Vec<&str> = line.split_whitespace().collect();
        if p.len() >= 5 && p[0].contains('-') && p[1].len() == 4 {
            current = (p.len() > 5 && Path::new(p[5]) == exe)
                .then(|| {
                    let (lo, hi) = p[0].split_once('-')?;
                    Some((
                        u64::from_str_radix(lo, 16).ok()?,
                        u64::from_str_radix(hi, 16).ok()?,
                        p[1].to_string(),
                    ))
                })
                .flatten();
        } else if let (Some((lo, hi, perms)), Some(flags)) =
            (&current, line.strip_prefix("VmFlags:"))
        {
            out.push((*lo, *hi, perms.clone(), flags.trim().to_string()));
        }
    }
    out
}

/// (resident pages, of them in a large folio) among `lo..hi` of `pid`: `/proc/<pid>/pagemap`
/// for the frame, `/proc/kpageflags` bits 15 and 16 (compound head, tail) for its folio.
/// `None` where `/proc/kpageflags` cannot be read (not root).
fn resident_and_large(pid: u32, lo: u64, hi: u64) -> Option<(u64, u64)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut flags = std::fs::File::open("/proc/kpageflags").ok()?;
    let mut pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).expect("pagemap");
    let (mut resident, mut large) = (0, 0);
    for page in lo / 4096..hi / 4096 {
        let mut entry = [0u8; 8];
        pagemap.seek(SeekFrom::Start(page * 8)).expect("seek");
        pagemap.read_exact(&mut entry).expect("pagemap entry");
        let entry = u64::from_le_bytes(entry);
        if entry >> 63 == 0 {
            continue;
        }
        resident += 1;
        let frame = entry & ((1 << 55) - 1);
        let mut f = [0u8; 8];
        flags.seek(SeekFrom::Start(frame * 8)).ok()?;
        flags.read_exact(&mut f).ok()?;
        let f = u64::from_le_bytes(f);
        large += (f >> 15 | f >> 16) & 1;
    }
    Some((resident, large))
}

/// After start-up `serve` reads its own program back page by page (agent/src/image.rs,
/// `evict_own_file_cache`): its read-only mappings are marked random-access (`rr`: no
/// readahead) and the file's large folios are gone from the page cache, so a steady agent
/// maps the pages of code it runs, not the 2 MiB folios around them. A build without it had
/// 1,339 of its 1,369 resident code pages in large folios on this VM's ext4 (6.18); with it,
/// 201 of 1,176. Run on a private copy of the binary, so no other test's process holds its
/// folios mapped.
#[test]
fn a_steady_serve_maps_its_program_page_by_page() {
    let shipped = crate::support::shipped_bin();
    let dir = tempfile::tempdir().expect("temp dir");
    let bin = dir.path().join("node-doctor");
    std::fs::copy(&shipped, &bin).expect("a private copy of the binary");
    // Written back, as an image's binary is long before it runs: the kernel drops clean
    // pages only.
    std::fs::File::open(&bin)
        .and_then(|f| f.sync_all())
        .expect("the copy written back");
    let root = crate::support::FakeRoot::quiet();
    let s = crate::support::Server::start_bin(&bin, root.root(), &["--interval", "1s"]);
    s.wait_ready(30);
    // Every collector has run (ready) and the release happened; let a few cycles fault back
    // in what they run.
    std::thread::sleep(std::time::Duration::from_secs(4));
    assert_eq!(s.get("/metrics").status, 200);
    let maps = image_mappings(s.pid(), &bin);
    let large_read_only: Vec<_> = maps
        .iter()
        // Not RELRO: read-only now, but written at start-up (`ac`: private pages of its own).
        .filter(|(lo, hi, perms, flags)| {
            !perms.contains('w')
                && hi - lo >= 64 * 1024
                && !flags.split_whitespace().any(|f| f == "ac")
        })
        .collect();
    assert!(
        large_read_only.iter().any(|m| m.2.contains('x')),
        "no executable mapping of {} in {maps:?}",
        bin.display()
    );
    for (lo, hi, perms, flags) in &large_read_only {
        assert!(
            flags.split_whitespace().any(|f| f == "rr"),
            "the program's {perms} mapping {lo:x}-{hi:x} is not random-access (VmFlags {flags}): \
             the start-up release did not mark it\n{}",
            s.logs()
        );
    }
    let Some((resident, large)) = large_read_only
        .iter()
        .filter(|m| m.2.contains('x'))
        .map(|(lo, hi, _, _)| resident_and_large(s.pid(), *lo, *hi))
        .try_fold((0, 0), |(r, l), x| x.map(|(a, b)| (r + a, l + b)))
    else {
        collectors::skip!(
            "SKIP a_steady_serve_maps_its_program_page_by_page (folio part): /proc/kpageflags \
             is not readable (run as root)"
        );
        return;
    };
    eprintln!(
        "resident code pages of the steady agent: {resident}, {large} of them in large folios"
    );
    assert!(resident > 0, "no code page resident");
    // A folio that a running thread held mapped when the cache was dropped stays large (a
    // few, up to 2 MiB each); the rest come back one page at a time.
    assert!(
        large * 2 <= resident,
        "{large} of {resident} resident code pages are in large folios: the program's file \
         cache was not dropped after start-up\n{}",
        s.logs()
    );
}
