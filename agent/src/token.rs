//! The bearer token of `serve --auth-token-file`: read with checks at start-up, compared in
//! constant time on each request, re-read on SIGHUP.
//!
//! The file is configuration, but it is still a path someone else may control (a mounted
//! Secret, a hostPath): it is opened non-blocking and must be a regular file (a FIFO would
//! hang start-up, a device or directory is a mistake), is read up to a size cap, and must
//! hold one line of visible ASCII of at least [`MIN_TOKEN_BYTES`].

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};

use anyhow::{bail, Context};

/// A token file larger than this is refused (a token is tens of bytes; 4 KiB also bounds
/// the `Authorization` header a client must send, under the server's 8 KiB header limit).
pub const MAX_FILE_BYTES: u64 = 4096;

/// The shortest token accepted. 16 bytes are 64 bits even as hex (4 bits a character) and
/// 96 as base64: guessing over HTTP at the 53,000–133,000 requests/s this server answered
/// on loopback (docs/performance.md, Serving) is at most 2^42 tries a year, far short of 2^64.
/// Shorter tokens are typos or placeholders ("changeme", "test"). `openssl rand -hex 32`
/// makes a good one.
pub const MIN_TOKEN_BYTES: usize = 16;

/// Compares without an early exit, so the time taken does not reveal the matching prefix.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= u64::from(x ^ y);
    }
    diff == 0
}

/// The token requests are checked against; replaced whole on a successful reload.
#[derive(Debug)]
pub struct Token {
    current: RwLock<Arc<[u8]>>,
}

impl Token {
    pub fn new(token: Vec<u8>) -> Token {
        Token {
            current: RwLock::new(token.into()),
        }
    }

    pub fn matches(&self, given: &[u8]) -> bool {
        let current = Arc::clone(&self.current.read().unwrap_or_else(PoisonError::into_inner));
        constant_time_eq(given, &current)
    }

    /// Installs `token`; false when it equals the current one.
    pub fn replace(&self, token: Vec<u8>) -> bool {
        let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
        if constant_time_eq(&current, &token) {
            return false;
        }
        *current = token.into();
        true
    }
}

/// A token read from its file, with the file's permission bits.
#[derive(Debug)]
pub struct Loaded {
    pub token: Vec<u8>,
    pub mode: u32,
}

fn kind(ft: std::fs::FileType) -> &'static str {
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_char_device() {
        "character device"
    } else if ft.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Reads and checks the token file (symlinks are followed: a Kubernetes Secret volume's
/// files are symlinks). Errors name the file and never contain the token.
pub fn read(path: &Path) -> anyhow::Result<Loaded> {
    let name = || format!("the auth token file {}", path.display());
    // stat before open, so a device is never opened; fstat after, for what was opened.
    let meta = std::fs::metadata(path).with_context(name)?;
    if !meta.file_type().is_file() {
        bail!(
            "{} is a {}, not a regular file",
            name(),
            kind(meta.file_type())
        );
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY).bits())
        .open(path)
        .with_context(|| format!("opening {}", name()))?;
    let meta = file
        .metadata()
        .with_context(|| format!("inspecting {}", name()))?;
    if !meta.file_type().is_file() {
        bail!(
            "{} is a {}, not a regular file",
            name(),
            kind(meta.file_type())
        );
    }
    let too_big = || {
        anyhow::anyhow!(
            "{} is larger than {MAX_FILE_BYTES} bytes; it should hold only the token",
            name()
        )
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let mut raw = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut raw)
        .with_context(|| format!("reading {}", name()))?;
    if raw.len() as u64 > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let token = validate(&raw).map_err(|why| anyhow::anyhow!("{} {why}", name()))?;
    Ok(Loaded {
        token,
        mode: meta.mode() & 0o7777,
    })
}

/// Trims surrounding whitespace and checks what is left is a usable bearer token. The
/// message completes "the auth token file F …" and never quotes the token.
pub fn validate(raw: &[u8]) -> Result<Vec<u8>, String> {
    let t = raw.trim_ascii();
    if t.is_empty() {
        return Err("is empty".into());
    }
    if let Some(at) = t.iter().position(|b| !(0x21..=0x7e).contains(b)) {
        return Err(format!(
            "has a space, control character or non-ASCII byte at offset {at}; a bearer token \
             is one line of visible ASCII (RFC 6750), e.g. from `openssl rand -hex 32`"
        ));
    }
    if t.len() < MIN_TOKEN_BYTES {
        return Err(format!(
            "holds a {}-byte token; the minimum is {MIN_TOKEN_BYTES} bytes (e.g. `openssl rand -hex 32`)",
            t.len()
        ));
    }
    Ok(t.to_vec())
}

/// Who besides the owner may read a file with these permission bits, if anyone.
pub fn exposed_to(mode: u32) -> Option<&'static str> {
    match (mode & 0o040 != 0, mode & 0o004 != 0) {
        (true, true) => Some("group and others"),
        (true, false) => Some("its group"),
        (false, true) => Some("others"),
        (false, false) => None,
    }
}

/// Logs a warning when the token file can be read by more than its owner.
pub fn warn_if_exposed(path: &Path, mode: u32) {
    if let Some(who) = exposed_to(mode) {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:04o}"),
            readable_by = who,
            "the auth token file is readable by more than its owner; chmod 600 it (on a Kubernetes Secret volume, defaultMode: 0400)"
        );
    }
}

/// Re-reads the token file on every SIGHUP: a valid token replaces the current one, an
/// invalid file keeps it (and logs why). Without a token file, SIGHUP is logged and
/// ignored. Never exits the process.
pub async fn reload_on_sighup(
    mut hup: tokio::signal::unix::Signal,
    source: Option<(PathBuf, Arc<Token>)>,
) {
    while hup.recv().await.is_some() {
        let Some((path, token)) = &source else {
            tracing::info!(
                signal = "SIGHUP",
                "no --auth-token-file to reload; SIGHUP ignored"
            );
            continue;
        };
        let p = path.clone();
        let read = tokio::task::spawn_blocking(move || read(&p)).await;
        match read {
            Ok(Ok(loaded)) => {
                warn_if_exposed(path, loaded.mode);
                if token.replace(loaded.token) {
                    tracing::info!(signal = "SIGHUP", path = %path.display(), "auth token reloaded");
                } else {
                    tracing::info!(signal = "SIGHUP", path = %path.display(), "auth token unchanged");
                }
            }
            Ok(Err(e)) => tracing::error!(
                signal = "SIGHUP",
                error = format!("{e:#}"),
                "auth token not reloaded; the previous token stays in force"
            ),
            Err(e) => tracing::error!(
                signal = "SIGHUP",
                error = %e,
                "auth token not reloaded; the previous token stays in force"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn validation() {
        let good = b"0123456789abcdef";
        assert_eq!(validate(good).unwrap(), good);
        assert_eq!(validate(b"  0123456789abcdef\r\n").unwrap(), good);
        assert_eq!(validate(b"\n\t \n").unwrap_err(), "is empty");
        let short = validate(b"changeme\n").unwrap_err();
        assert!(short.contains("8-byte") && short.contains("16"), "{short}");
        assert!(!short.contains("changeme"));
        for bad in [
            &b"0123456789abcdef 0123"[..],
            b"0123456789abcdef\n# rotated 2026-01-01",
            b"0123456789abcdef\x07",
            "0123456789abcdéf".as_bytes(),
        ] {
            let e = validate(bad).unwrap_err();
            assert!(e.contains("visible ASCII"), "{e}");
        }
    }

    #[test]
    fn exposure() {
        assert_eq!(exposed_to(0o600), None);
        assert_eq!(exposed_to(0o400), None);
        assert_eq!(exposed_to(0o640), Some("its group"));
        assert_eq!(exposed_to(0o604), Some("others"));
        assert_eq!(exposed_to(0o644), Some("group and others"));
    }

    #[test]
    fn replacing_the_token() {
        let t = Token::new(b"first-token-0123456".to_vec());
        assert!(t.matches(b"first-token-0123456"));
        assert!(!t.replace(b"first-token-0123456".to_vec()));
        assert!(t.replace(b"second-token-012345".to_vec()));
        assert!(!t.matches(b"first-token-0123456"));
        assert!(t.matches(b"second-token-012345"));
    }

    #[test]
    fn reading_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "0123456789abcdef0123\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        let l = read(&p).unwrap();
        assert_eq!(l.token, b"0123456789abcdef0123");
        assert_eq!(l.mode, 0o640);

        // Through a symlink, as in a Secret volume.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert_eq!(read(&link).unwrap().token, b"0123456789abcdef0123");

        std::fs::write(&p, vec![b'a'; 4097]).unwrap();
        let e = format!("{:#}", read(&p).unwrap_err());
        assert!(e.contains("larger than 4096 bytes"), "{e}");

        let e = format!("{:#}", read(dir.path()).unwrap_err());
        assert!(e.contains("is a directory, not a regular file"), "{e}");

        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let e = format!("{:#}", read(&fifo).unwrap_err());
        assert!(e.contains("is a FIFO, not a regular file"), "{e}");

        let e = format!("{:#}", read(Path::new("/dev/null")).unwrap_err());
        assert!(e.contains("character device"), "{e}");

        let e = format!("{:#}", read(&dir.path().join("missing")).unwrap_err());
        assert!(
            e.contains("auth token file") && e.contains("missing"),
            "{e}"
        );
    }
}
