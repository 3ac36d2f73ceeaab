//! Tests that must not share their process with other tests: a global a concurrent test
//! changes under them (tracing's per-call-site cache, the program's own mappings and page
//! cache) runs them alone, in a child process of the test binary.

/// Runs `name` (a test of this binary, by its full path) again in a child process of the test
/// binary, alone, and fails unless it ran there and passed. Returns false in the child, where
/// the caller goes on with its body; true in the parent, which returns.
pub fn ran_alone_in_a_child(name: &str) -> bool {
    const ALONE: &str = "NODE_DOCTOR_TEST_ALONE";
    if std::env::var_os(ALONE).is_some() {
        return false;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, "1")
        .output()
        .expect("run the test binary again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} alone failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "{name} did not run alone:\n{text}"
    );
    true
}
