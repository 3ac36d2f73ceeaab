//! Errors of host reads. Every error carries the path it was reading.
//!
//! Reading itself is [`crate::hostfs`]'s: non-blocking, regular files only, capped per kind.

use std::path::{Path, PathBuf};

/// The most bytes of a parse error's message kept (the message may quote host text: a
/// 10 MB "number" in `/proc/uptime` once became a 10 MB status message).
pub const MAX_PARSE_MESSAGE_BYTES: usize = 512;

/// A failure to read or understand one host file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The path is a FIFO, socket, device or directory where a regular file is expected: it
    /// is refused without reading (a FIFO would block, a device may never end).
    #[error("refusing to read {path}: it is a {kind}, not a regular file")]
    NotRegular { path: PathBuf, kind: &'static str },
    /// The file is longer than the cap for its kind of file ([`crate::hostfs::cap`]): it is
    /// not read further and not parsed.
    #[error(
        "refusing to read {path}: it is larger than {cap} bytes, the cap for this kind of file"
    )]
    TooLarge { path: PathBuf, cap: usize },
    /// The file was read but its text is not in a format we understand.
    #[error("cannot parse {path}: {message}")]
    Parse { path: PathBuf, message: String },
}

impl ReadError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ReadError::Io {
            path: path.into(),
            source,
        }
    }

    /// A parse error; the message is cut to [`MAX_PARSE_MESSAGE_BYTES`] with a marker.
    pub fn parse(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        ReadError::Parse {
            path: path.into(),
            message: crate::bounded::truncate(message.to_string(), MAX_PARSE_MESSAGE_BYTES),
        }
    }

    /// True when the file does not exist (a vanished pid, an unloaded module, no such runtime).
    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    }

    /// True when the read was refused for lack of privilege.
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::PermissionDenied)
    }

    /// True when node-doctor itself refused the file: not a regular file, or over its cap.
    pub fn is_refused(&self) -> bool {
        matches!(
            self,
            ReadError::NotRegular { .. } | ReadError::TooLarge { .. }
        )
    }

    /// The OS error behind an I/O failure.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            ReadError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    pub fn path(&self) -> &Path {
        match self {
            ReadError::Io { path, .. }
            | ReadError::NotRegular { path, .. }
            | ReadError::TooLarge { path, .. }
            | ReadError::Parse { path, .. } => path,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_messages_quoting_host_text_are_cut() {
        let e = ReadError::parse(
            "/host/proc/uptime",
            format!("uptime {:?} is not a number", "9".repeat(10 << 20)),
        );
        let msg = e.to_string();
        assert!(msg.len() < MAX_PARSE_MESSAGE_BYTES + 100, "{}", msg.len());
        assert!(
            msg.starts_with("cannot parse /host/proc/uptime: uptime \"999"),
            "{msg}"
        );
        assert!(msg.contains("…[truncated "), "{msg}");
        let short = ReadError::parse("/p", "bad field 3");
        assert_eq!(short.to_string(), "cannot parse /p: bad field 3");
    }

    #[test]
    fn refusals_name_the_path_and_the_cap() {
        let e = ReadError::TooLarge {
            path: "/host/proc/loadavg".into(),
            cap: 4096,
        };
        assert_eq!(
            e.to_string(),
            "refusing to read /host/proc/loadavg: it is larger than 4096 bytes, the cap for this kind of file"
        );
        assert!(e.is_refused() && !e.is_not_found());
        let e = ReadError::NotRegular {
            path: "/host/etc/hostname".into(),
            kind: "FIFO",
        };
        assert_eq!(
            e.to_string(),
            "refusing to read /host/etc/hostname: it is a FIFO, not a regular file"
        );
        assert_eq!(e.path(), Path::new("/host/etc/hostname"));
    }
}
