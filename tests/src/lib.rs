//! Shared harness for the end-to-end tests: building and locating the `node-doctor` binary.

use std::path::PathBuf;
use std::sync::OnceLock;

/// Path to the `node-doctor` binary of this workspace, built (debug) on first use.
pub fn node_doctor_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "node-doctor",
                "--bin",
                "node-doctor",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build for node-doctor");
        assert!(status.success(), "cargo build -p node-doctor failed");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        target.join("debug").join("node-doctor")
    })
    .clone()
}

/// The release build of `node-doctor`, the binary the image ships: `$NODE_DOCTOR_BIN` when set,
/// else `cargo build --release -p node-doctor` on first use.
pub fn node_doctor_release_bin() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("NODE_DOCTOR_BIN") {
            return PathBuf::from(bin);
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "--release",
                "-p",
                "node-doctor",
                "--bin",
                "node-doctor",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build --release for node-doctor");
        assert!(
            status.success(),
            "cargo build --release -p node-doctor failed"
        );
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        target.join("release").join("node-doctor")
    })
    .clone()
}

/// True when the tests run as root (real-kernel tests need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}
pub mod manifests;
pub mod sandbox;
