//! `/proc/mdstat`: the kernel's software RAID arrays (`Documentation/admin-guide/md.rst`):
//!
//! ```text
//! Personalities : [raid1] [raid6] [raid5] [raid4]
//! md0 : active raid1 sdb1[1](F) sda1[0]
//!       1048512 blocks super 1.2 [2/1] [U_]
//!       [=>...................]  recovery =  8.5% (89600/1048512) finish=0.4min speed=29866K/sec
//!
//! md1 : active raid5 sdc1[0] sdd1[1] sde1[3]
//!       2095104 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]
//!
//! unused devices: <none>
//! ```

/// Arrays kept from one file.
const MAX_ARRAYS: usize = 256;

/// One array.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Array {
    pub name: String,
    pub active: bool,
    /// `raid1`, `raid5`… (empty when inactive).
    pub level: String,
    /// Member devices marked `(F)` (faulty).
    pub failed: Vec<String>,
    /// `[n/m]`: devices the array should have and has working.
    pub wanted: Option<u32>,
    pub working: Option<u32>,
    /// `recovery`, `resync`, `reshape` or `check`, with its percent done.
    pub sync: Option<(String, f64)>,
}

impl Array {
    /// Fewer working devices than the array needs.
    pub fn degraded(&self) -> bool {
        matches!((self.wanted, self.working), (Some(w), Some(k)) if k < w)
    }
}

fn member_name(token: &str) -> String {
    crate::bounded::prefix_owned(token.split('[').next().unwrap_or(token), 64)
}

/// Parses the file; lines it does not know are skipped.
pub fn parse(text: &str) -> Vec<Array> {
    let mut out: Vec<Array> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if !line.starts_with(char::is_whitespace) {
            let Some((name, rest)) = line.split_once(" : ") else {
                continue;
            };
            if !name.starts_with("md") || out.len() >= MAX_ARRAYS {
                continue;
            }
            let mut words = rest.split_whitespace();
            let state = words.next().unwrap_or("");
            let mut a = Array {
                name: crate::bounded::prefix_owned(name.trim(), 64),
                active: state == "active",
                ..Array::default()
            };
            for w in words {
                if w.starts_with("raid") || w == "linear" {
                    a.level = crate::bounded::prefix_owned(w, 16);
                } else if w.ends_with("(F)") {
                    a.failed.push(member_name(w));
                }
            }
            out.push(a);
            continue;
        }
        let Some(a) = out.last_mut() else { continue };
        for w in trimmed.split_whitespace() {
            if let Some(inner) = w.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
                if let Some((n, m)) = inner.split_once('/') {
                    if let (Ok(n), Ok(m)) = (n.parse(), m.parse()) {
                        a.wanted = Some(n);
                        a.working = Some(m);
                    }
                }
            }
        }
        for kind in ["recovery", "resync", "reshape", "check"] {
            if let Some(at) = trimmed.find(&format!("{kind} =")) {
                let after = trimmed[at + kind.len() + 2..].trim_start();
                let pct = after.split('%').next().unwrap_or("").trim();
                if let Ok(p) = pct.parse::<f64>() {
                    if p.is_finite() {
                        a.sync = Some((kind.to_string(), p));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degraded_and_recovering() {
        let text = "Personalities : [raid1] [raid6] [raid5] [raid4]\nmd0 : active raid1 sdb1[1](F) sda1[0]\n      1048512 blocks super 1.2 [2/1] [U_]\n      [=>...................]  recovery =  8.5% (89600/1048512) finish=0.4min speed=29866K/sec\n\nmd1 : active raid5 sdc1[0] sdd1[1] sde1[3]\n      2095104 blocks super 1.2 level 5, 512k chunk, algorithm 2 [3/3] [UUU]\n      \nunused devices: <none>\n";
        let a = parse(text);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].name, "md0");
        assert_eq!(a[0].level, "raid1");
        assert_eq!(a[0].failed, vec!["sdb1".to_string()]);
        assert!(a[0].degraded());
        assert_eq!(a[0].sync, Some(("recovery".into(), 8.5)));
        assert!(!a[1].degraded());
        assert_eq!(a[1].sync, None);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
        }
        /// Arrays as `md_seq_show()` and `status_resync()` print them (`md%d : active raid1
        /// sdb1[1](F) sda1[0]`, `%llu blocks super 1.2 [%d/%d] [U_]`, `recovery = %3u.%u%%
        /// (…)`), between the `Personalities` and `unused devices` lines: name, level, failed
        /// members, device counts and sync progress read back.
        #[test]
        fn parses_what_the_kernel_prints(
            arrays in proptest::collection::vec((
                0u32..128,
                proptest::sample::select(vec!["raid0", "raid1", "raid5", "raid6", "raid10", "linear"]),
                proptest::collection::vec((crate::testgen::block_device(), proptest::bool::ANY), 1..6),
                proptest::num::u64::ANY,
                proptest::option::of((proptest::sample::select(vec!["recovery", "resync", "reshape", "check"]), 0u32..=1000)),
            ), 0..5),
        ) {
            let mut text = "Personalities : [raid1] [raid6] [raid5] [raid4]\n".to_string();
            let mut want = Vec::new();
            for (n, level, members, blocks, sync) in arrays {
                let devs: Vec<String> = members
                    .iter()
                    .enumerate()
                    .map(|(i, (d, f))| format!("{d}[{i}]{}", if *f { "(F)" } else { "" }))
                    .collect();
                let wanted = members.len() as u32;
                let working = members.iter().filter(|(_, f)| !f).count() as u32;
                let up: String = members.iter().map(|(_, f)| if *f { '_' } else { 'U' }).collect();
                text += &format!("md{n} : active {level} {}\n      {blocks} blocks super 1.2 [{wanted}/{working}] [{up}]\n", devs.join(" "));
                if let Some((kind, permille)) = sync {
                    text += &format!(
                        "      [=>...................]  {kind} = {:3}.{}% (89600/1048512) finish=0.4min speed=29866K/sec\n",
                        permille / 10, permille % 10,
                    );
                }
                text += "\n";
                want.push(Array {
                    name: format!("md{n}"),
                    active: true,
                    level: level.to_string(),
                    failed: members.iter().filter(|(_, f)| *f).map(|(d, _)| d.clone()).collect(),
                    wanted: Some(wanted),
                    working: Some(working),
                    sync: sync.map(|(k, p)| (k.to_string(), f64::from(p) / 10.0)),
                });
            }
            text += "unused devices: <none>\n";
            proptest::prop_assert_eq!(parse(&text), want);
        }
    }
}
