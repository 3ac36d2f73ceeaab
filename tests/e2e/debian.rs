//! Debian tools the tests run beside node-doctor (Prometheus, adjtimex), found or fetched by
//! the test that needs them: never installed (their packages start a service or set the
//! clock), but unpacked into the download cache by scripts/debian-binary.sh on first use. The
//! collectors' scenario tests include this file too.

use std::path::{Path, PathBuf};
use std::process::Command;

/// File `path` of Debian package `package` (`prometheus`, `usr/bin/prometheus`): `$<env>`
/// when set; else scripts/debian-binary.sh's unpacked copy (fetched now if the cache lacks
/// it); else the file's name on PATH. `Err` says why there is none, for the test's SKIP line.
pub fn debian_binary(env: &str, package: &str, path: &str) -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(env) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("{env}={} is not a file", p.display()))
        };
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/debian-binary.sh");
    let fetched = match Command::new("bash")
        .arg(&script)
        .args([package, path])
        .output()
    {
        Ok(out) if out.status.success() => {
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            if p.is_file() {
                return Ok(p);
            }
            format!("{} printed no file: {}", script.display(), p.display())
        }
        Ok(out) => String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("no reason given")
            .to_string(),
        Err(e) => format!("{} did not run: {e}", script.display()),
    };
    let name = Path::new(path).file_name().unwrap_or_default();
    for dir in std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
    {
        let p = dir.join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(format!(
        "Debian's {package} could not be fetched ({fetched}), none on PATH, {env} unset"
    ))
}
