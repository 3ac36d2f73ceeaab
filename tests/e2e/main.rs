//! End-to-end tests, one binary (as ripgrep gathers its integration tests).

mod deploy;

#[test]
fn binary_builds_and_runs() {
    let out = std::process::Command::new(e2e::node_doctor_bin())
        .output()
        .expect("run node-doctor");
    assert!(String::from_utf8_lossy(&out.stdout).contains("node-doctor"));
}
