//! Errors of host reads. Every error carries the path it was reading.

use std::path::{Path, PathBuf};

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

    pub fn parse(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        ReadError::Parse {
            path: path.into(),
            message: message.to_string(),
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

    pub fn path(&self) -> &Path {
        match self {
            ReadError::Io { path, .. } | ReadError::Parse { path, .. } => path,
        }
    }
}

/// Reads a whole (small) host file to a string, adding the path to any error.
pub fn read_to_string(path: &Path) -> Result<String, ReadError> {
    std::fs::read_to_string(path).map_err(|e| ReadError::io(path, e))
}

/// Reads a file, returning `Ok(None)` when it does not exist.
pub fn read_optional(path: &Path) -> Result<Option<String>, ReadError> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(ReadError::io(path, e)),
    }
}
