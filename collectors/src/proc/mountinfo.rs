//! `/proc/<pid>/mountinfo`: the mounts of a process's mount namespace (`proc(5)`), and the lookup
//! of the mount that contains a path (longest mount-point prefix, the topmost of stacked mounts).
//!
//! Line format (Documentation/filesystems/proc.rst, 3.5):
//! `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
//! Mount points, roots and sources escape space, tab, newline and backslash as `\040`, `\011`,
//! `\012`, `\134` (octal).
//!
//! Our own parser: `procfs-core`'s `MountInfo` leaves those escapes in the mount point
//! (`/mnt/data\040disk` is not the directory `/mnt/data disk` that a path lookup walks), turns
//! the option lists into hash maps (the order the kernel printed is lost) and a `none` source
//! into no source (test `procfs_core_keeps_octal_escapes`).

use std::path::{Component, Path, PathBuf};

use crate::error::ReadError;
use crate::host::HostPaths;

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    pub mount_id: u32,
    pub parent_id: u32,
    /// Device number `major:minor` of the filesystem (`st_dev` of files on it).
    pub major: u32,
    pub minor: u32,
    /// Root of the mount within its filesystem (`/` unless a bind mount of a subdirectory).
    pub root: PathBuf,
    /// Where it is mounted, unescaped, as seen by the process whose mountinfo this is.
    pub mount_point: PathBuf,
    pub mount_options: String,
    /// Optional fields (`shared:1`, `master:2`, ...).
    pub optional: Vec<String>,
    pub fstype: String,
    /// The mount source (`/dev/vda1`, `overlay`, `tmpfs`), unescaped.
    pub source: String,
    pub super_options: String,
}

impl Mount {
    /// `st_dev` as the kernel encodes it for userspace (`makedev`).
    pub fn dev(&self) -> u64 {
        nix::sys::stat::makedev(u64::from(self.major), u64::from(self.minor))
    }
}

/// Why a mountinfo text could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Parses the whole text of a mountinfo file. Empty lines are ignored; a malformed line is
/// an error naming its line number.
pub fn parse(text: &str) -> Result<Vec<Mount>, ParseError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line).map_err(|message| ParseError {
            line: i + 1,
            message,
        })?);
    }
    Ok(out)
}

fn parse_line(line: &str) -> Result<Mount, String> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let sep = fields
        .iter()
        .position(|f| *f == "-")
        .ok_or("no ' - ' separator")?;
    if sep < 6 {
        return Err(format!("{sep} fields before the separator, need 6"));
    }
    let after = &fields[sep + 1..];
    if after.len() < 2 {
        return Err("fewer than 2 fields after the separator".into());
    }
    let num = |i: usize, what: &str| -> Result<u32, String> {
        fields[i]
            .parse::<u32>()
            .map_err(|e| format!("bad {what} {:?}: {e}", fields[i]))
    };
    let (maj, min) = fields[2]
        .split_once(':')
        .ok_or_else(|| format!("bad major:minor {:?}", fields[2]))?;
    let major = maj
        .parse::<u32>()
        .map_err(|e| format!("bad major {maj:?}: {e}"))?;
    let minor = min
        .parse::<u32>()
        .map_err(|e| format!("bad minor {min:?}: {e}"))?;
    Ok(Mount {
        mount_id: num(0, "mount id")?,
        parent_id: num(1, "parent id")?,
        major,
        minor,
        root: PathBuf::from(unescape(fields[3])),
        mount_point: PathBuf::from(unescape(fields[4])),
        mount_options: fields[5].to_string(),
        optional: fields[6..sep].iter().map(|s| s.to_string()).collect(),
        fstype: after[0].to_string(),
        source: unescape(after[1]),
        super_options: after.get(2).map(|s| s.to_string()).unwrap_or_default(),
    })
}

/// Undoes the kernel's `\ooo` octal escapes (`\040` is a space). Anything that is not a
/// valid three-digit octal escape is kept as written.
pub fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            let digits = &b[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = u32::from(digits[0] - b'0') * 64
                    + u32::from(digits[1] - b'0') * 8
                    + u32::from(digits[2] - b'0');
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount that contains `path`: the longest mount point that is a component-wise prefix
/// of it; among mounts stacked on the same point, the last listed (the one on top).
/// `path` should be absolute and normalised (no `..`) in the same namespace as the mounts.
pub fn containing<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    let target: Vec<Component> = path.components().collect();
    let mut best: Option<(&Mount, usize)> = None;
    for m in mounts {
        let mp: Vec<Component> = m.mount_point.components().collect();
        if mp.len() <= target.len() && target[..mp.len()] == mp[..] {
            match best {
                Some((_, len)) if len > mp.len() => {}
                _ => best = Some((m, mp.len())),
            }
        }
    }
    best.map(|(m, _)| m)
}

/// Reads and parses `<root>/proc/<pid>/mountinfo`.
pub fn read(host: &HostPaths, pid: u32) -> Result<Vec<Mount>, ReadError> {
    let path = host.proc_pid(pid).join("mountinfo");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::MOUNTINFO)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real /proc/1/mountinfo of this build VM, Linux 6.18.44 (excerpt).
    const LINUX_6_18: &str = "\
22 27 0:21 / /proc rw,relatime - proc proc rw
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw,size=12334460k,nr_inodes=3083615,mode=755
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
28 27 0:25 / /mnt/sandboxing/model_tools_env/v1/python ro,nosuid,nodev,relatime - tmpfs model_tools_unavailable ro,size=4k,mode=755
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
42 27 254:0 /run/netns /run/netns rw,relatime shared:1 - ext4 /dev/vda rw,discard,resv_strict,resuid=65534,resgid=65534
";

    // A TKE node, Linux 4.14 (tlinux), docker on a data disk at /var/lib/docker, kubelet on
    // the system disk, an overlay mount of a container and a mount point with a space.
    const TKE_4_14: &str = "\
19 1 253:1 / / rw,noatime shared:1 - ext4 /dev/vda1 rw,data=ordered
20 19 0:18 / /sys rw,nosuid,nodev,noexec,relatime shared:2 - sysfs sysfs rw
24 19 0:20 / /run rw,nosuid,nodev shared:22 - tmpfs tmpfs rw,mode=755
90 19 253:16 / /var/lib/docker rw,relatime shared:40 - ext4 /dev/vdb rw,data=ordered
95 90 0:52 / /var/lib/docker/overlay2/3c1e/merged rw,relatime - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/AB:/var/lib/docker/overlay2/l/CD,upperdir=/var/lib/docker/overlay2/3c1e/diff,workdir=/var/lib/docker/overlay2/3c1e/work
120 19 0:60 / /mnt/data\\040disk rw,relatime shared:60 - xfs /dev/vdc\\040x rw,attr2,inode64,noquota
";

    // The example line of Documentation/filesystems/proc.rst.
    const KERNEL_DOC: &str =
        "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n";

    #[test]
    fn procfs_core_keeps_octal_escapes() {
        let line = TKE_4_14.lines().last().unwrap();
        let core = procfs_core::process::MountInfo::from_line(line).unwrap();
        assert_eq!(core.mount_point, PathBuf::from("/mnt/data\\040disk"));
        assert_eq!(core.mount_source.as_deref(), Some("/dev/vdc\\040x"));
        let ours = &parse(line).unwrap()[0];
        assert_eq!(ours.mount_point, PathBuf::from("/mnt/data disk"));
        assert_eq!(ours.source, "/dev/vdc x");
    }

    #[test]
    fn parses_real_6_18_text() {
        let m = parse(LINUX_6_18).unwrap();
        assert_eq!(m.len(), 6);
        assert_eq!(m[2].mount_point, PathBuf::from("/"));
        assert_eq!((m[2].major, m[2].minor), (254, 0));
        assert_eq!(m[2].fstype, "ext4");
        assert_eq!(m[2].source, "/dev/vda");
        assert!(m[2].optional.is_empty());
        assert_eq!(m[5].root, PathBuf::from("/run/netns"));
        assert_eq!(m[5].optional, vec!["shared:1".to_string()]);
        assert_eq!(m[5].dev(), nix::sys::stat::makedev(254, 0));
    }

    #[test]
    fn parses_kernel_doc_example() {
        let m = parse(KERNEL_DOC).unwrap();
        assert_eq!(m[0].mount_id, 36);
        assert_eq!(m[0].parent_id, 35);
        assert_eq!((m[0].major, m[0].minor), (98, 0));
        assert_eq!(m[0].root, PathBuf::from("/mnt1"));
        assert_eq!(m[0].mount_point, PathBuf::from("/mnt2"));
        assert_eq!(m[0].optional, vec!["master:1".to_string()]);
        assert_eq!(m[0].fstype, "ext3");
        assert_eq!(m[0].super_options, "rw,errors=continue");
    }

    #[test]
    fn unescapes_octal_and_keeps_bad_escapes() {
        let m = parse(TKE_4_14).unwrap();
        assert_eq!(m[5].mount_point, PathBuf::from("/mnt/data disk"));
        assert_eq!(m[5].source, "/dev/vdc x");
        assert_eq!(unescape("a\\011b\\012c\\134d"), "a\tb\nc\\d");
        assert_eq!(unescape("trail\\04"), "trail\\04");
        assert_eq!(unescape("\\999"), "\\999");
        assert_eq!(unescape("\\"), "\\");
    }

    #[test]
    fn finds_longest_prefix_mount() {
        let m = parse(TKE_4_14).unwrap();
        let at = |p: &str| containing(&m, Path::new(p)).map(|m| m.mount_point.clone());
        assert_eq!(
            at("/var/lib/docker/containers/abc"),
            Some("/var/lib/docker".into())
        );
        assert_eq!(at("/var/lib/docker"), Some("/var/lib/docker".into()));
        // A sibling with a common string prefix is not inside the mount.
        assert_eq!(at("/var/lib/dockerd"), Some("/".into()));
        assert_eq!(at("/var/lib/kubelet"), Some("/".into()));
        assert_eq!(at("/mnt/data disk/x"), Some("/mnt/data disk".into()));
        assert_eq!(
            at("/var/lib/docker/overlay2/3c1e/merged/etc"),
            Some("/var/lib/docker/overlay2/3c1e/merged".into())
        );
        assert_eq!(containing(&[], Path::new("/x")), None);
    }

    #[test]
    fn stacked_mounts_pick_the_top_one() {
        let text = "\
1 0 8:1 / / rw - ext4 /dev/sda1 rw
2 1 0:40 / /run rw - tmpfs tmpfs rw
3 1 0:41 / /run rw - tmpfs tmpfs2 rw
";
        let m = parse(text).unwrap();
        assert_eq!(
            containing(&m, Path::new("/run/docker")).unwrap().mount_id,
            3
        );
    }

    #[test]
    fn rejects_malformed_lines() {
        assert_eq!(parse("1 2 3\n").unwrap_err().line, 1);
        assert!(parse("x 0 8:1 / / rw - ext4 /dev/sda1 rw").is_err());
        assert!(parse("1 0 81 / / rw - ext4 /dev/sda1 rw").is_err());
        assert!(parse("1 0 8:1 / / rw -").is_err());
        assert!(parse("\n\n").unwrap().is_empty());
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse(&s);
            let _ = unescape(&s);
        }

        #[test]
        fn never_panics_on_mountinfo_like_text(
            s in "([0-9]{1,3} [0-9]{1,3} [0-9]{1,3}:[0-9]{1,3} /[a-z\\\\0-7]{0,6} /[a-z\\\\0-7 ]{0,6} rw( shared:1)? - [a-z]{1,5} [a-z/\\\\0-9]{0,8}( rw)?\n){0,5}"
        ) {
            if let Ok(m) = parse(&s) {
                let _ = containing(&m, Path::new("/a/b"));
            }
        }

        /// Lines as `show_mountinfo()` prints them (`%i %i %u:%u`, root and mount point and
        /// source escaped as `\\ooo` for space, tab, newline and backslash, optional fields, ` - `,
        /// type, source, super options): every field reads back, paths unescaped.
        #[test]
        fn parses_what_the_kernel_prints(
            mounts in proptest::collection::vec(
                (
                    (proptest::num::u32::ANY, proptest::num::u32::ANY, 0u32..1 << 12, 0u32..1 << 20),
                    proptest::collection::vec("[a-zA-Z0-9._é \t\n\\\\-]{1,8}", 0..3),
                    proptest::collection::vec("[a-zA-Z0-9._é \t\n\\\\-]{1,8}", 0..4),
                    "r[ow](,[a-z]{2,8}(=[0-9a-z]{1,4})?){0,3}",
                    proptest::collection::vec("(shared|master|propagate_from):[0-9]{1,4}|unbindable", 0..3),
                    ("[a-z0-9]{2,8}(\\.[a-z]{2,6})?", "none|/dev/[a-z0-9]{1,6}|[a-zA-Z0-9 :/\\\\]{1,10}"),
                    "r[ow](,[a-z_]{2,8}(=[0-9a-z]{1,4})?){0,3}",
                ),
                0..6,
            ),
        ) {
            let esc = |s: &str| -> String {
                s.chars()
                    .map(|c| if " \t\n\\".contains(c) { format!("\\{:03o}", c as u32) } else { c.to_string() })
                    .collect()
            };
            let path = |parts: &[String]| format!("/{}", parts.join("/"));
            let mut text = String::new();
            let mut want = Vec::new();
            for ((mount_id, parent_id, major, minor), root, point, opts, optional, (fstype, source), sopts) in mounts {
                let (root, point) = (path(&root), path(&point));
                let opt: String = optional.iter().map(|o| format!(" {o}")).collect();
                text += &format!(
                    "{mount_id} {parent_id} {major}:{minor} {} {} {opts}{opt} - {fstype} {} {sopts}\n",
                    esc(&root), esc(&point), esc(&source),
                );
                want.push(Mount {
                    mount_id, parent_id, major, minor,
                    root: PathBuf::from(root),
                    mount_point: PathBuf::from(point),
                    mount_options: opts,
                    optional,
                    fstype,
                    source,
                    super_options: sopts,
                });
            }
            proptest::prop_assert_eq!(parse(&text), Ok(want));
        }
    }
}
