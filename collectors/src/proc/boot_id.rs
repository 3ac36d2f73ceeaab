//! `<root>/proc/sys/kernel/random/boot_id`: the random id the kernel gives each boot, the one
//! journald writes into every entry (`_BOOT_ID`), so a log line can be told to be this boot's
//! or an earlier one's without trusting the clock. Our own parser: `procfs-core` has no model
//! of the file.

use crate::host::HostPaths;
use crate::ReadError;

/// Why the file's text was not understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a boot id: {0:?}")]
pub struct BootIdParseError(String);

/// Parses `5e8c2a0d-4b3f-4f6e-9a1c-7d2e3f405162\n` (kernel 6.18, the same since 2.6) into its
/// 16 bytes, in the order journald stores them.
pub fn parse(text: &str) -> Result<[u8; 16], BootIdParseError> {
    let t = text.trim();
    let err = || BootIdParseError(crate::bounded::prefix_owned(t, 64));
    let hex: Vec<u8> = t.bytes().filter(|b| *b != b'-').collect();
    if hex.len() != 32 || t.len() != 36 {
        return Err(err());
    }
    let mut id = [0u8; 16];
    for (i, pair) in hex.chunks_exact(2).enumerate() {
        let s = std::str::from_utf8(pair).map_err(|_| err())?;
        id[i] = u8::from_str_radix(s, 16).map_err(|_| err())?;
    }
    Ok(id)
}

/// Reads `<root>/proc/sys/kernel/random/boot_id`.
pub fn read(host: &HostPaths) -> Result<[u8; 16], ReadError> {
    let path = host.proc_file("sys/kernel/random/boot_id");
    let text = crate::hostfs::read_text(&path, crate::hostfs::cap::VALUE)?;
    parse(&text).map_err(|e| ReadError::parse(&path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kernels_text() {
        assert_eq!(
            parse("5e8c2a0d-4b3f-4f6e-9a1c-7d2e3f405162\n"),
            Ok([
                0x5e, 0x8c, 0x2a, 0x0d, 0x4b, 0x3f, 0x4f, 0x6e, 0x9a, 0x1c, 0x7d, 0x2e, 0x3f, 0x40,
                0x51, 0x62
            ])
        );
        assert!(parse("5e8c2a0d4b3f4f6e9a1c7d2e3f405162").is_err());
        assert!(parse("5e8c2a0d-4b3f-4f6e-9a1c-7d2e3f40516g").is_err());
        assert!(parse("").is_err());
        assert!(parse("ü5e8c2a0d-4b3f-4f6e-9a1c-7d2e3f4051").is_err());
    }

    /// This machine's own boot id reads (where /proc is mounted).
    #[test]
    fn real_kernel_boot_id_reads() {
        let host = HostPaths::new("/");
        if !host.proc_file("sys/kernel/random/boot_id").exists() {
            crate::skip!("SKIP real_kernel_boot_id_reads: no /proc/sys/kernel/random/boot_id");
            return;
        }
        assert!(read(&host).is_ok());
    }
}
