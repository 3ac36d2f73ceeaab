//! Hostile host names through the binary: `node-doctor check` on a fake host root whose
//! mount points, cgroup directories, kube-proxy log directory, kubelet and docker config
//! paths, data root, kernel-log task names and node name carry shell payloads, newlines,
//! ESC sequences and bidi overrides.
//!
//! - `--format json` keeps the names exactly (JSON escapes control characters itself);
//! - every printed command, run in the busybox sandbox (`sandbox.rs`, root), runs no
//!   payload, while the same names pasted unquoted do (the control);
//! - the table (`check` piped) holds no control character but its line breaks, no ESC and no
//!   bidi override.

use crate::sandbox::{hostile, hostile_word, Sandbox};
use serde_json::Value;

use crate::support::{run, FakeRoot};

/// `/proc/<pid>/mountinfo` escaping (space, tab, newline, backslash as octal).
fn mountinfo_escape(s: &str) -> String {
    s.replace('\\', "\\134")
        .replace(' ', "\\040")
        .replace('\t', "\\011")
        .replace('\n', "\\012")
}

const UID: &str = "8f2a1c4e-3b7d-4e8f-9a0b-1c2d3e4f5a6b";

/// The fake host and the names staged in it.
struct Staged {
    root: FakeRoot,
    mount_point: String,
}

fn stage() -> Staged {
    let root = FakeRoot::quiet();
    // Kernel log, an hour of uptime before "now" (the quiet root's uptime is 86400 s).
    let kmsg = format!(
        "3,30,86000000000,-;EXT4-fs error (device vdc): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0\n\
         2,31,86000000100,-;EXT4-fs (vdc): Remounting filesystem read-only\n\
         3,40,86100000000,-;INFO: task {}:1234 blocked for more than 120 seconds.\n\
         4,41,86200000000,-;{}: page allocation failure: order:4, mode:0x10c0d0\n\
         4,42,86200000100,-;runc:[1:CHILD]: page allocation failure: order:6, mode:0x10c0d0\n",
        hostile_word("hungcomm"),
        hostile_word("alloctask"),
    );
    root.write("/dev/kmsg", &kmsg);
    // A filesystem with errors mounted at a hostile mount point.
    let mount_point = format!("/mnt/{}", hostile("mountpoint"));
    root.write(
        "/proc/1/mountinfo",
        &format!(
            "22 1 253:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n\
             41 22 8:32 / {} ro,relatime shared:21 - ext4 /dev/vdc rw\n",
            mountinfo_escape(&mount_point)
        ),
    );
    // docker runs with a hostile --config-file that sets a hostile data root and no log
    // limit; the kubelet with a hostile --config that sets no disk eviction.
    let daemon_json = format!("/etc/{}/daemon.json", hostile("daemonjson"));
    let data_root = format!("/data/{}", hostile("dataroot"));
    root.write(
        &daemon_json,
        &serde_json::json!({ "data-root": data_root }).to_string(),
    );
    std::fs::create_dir_all(root.path(&format!("{data_root}/containers"))).expect("data root");
    root.write("/proc/4242/comm", "dockerd\n");
    root.write(
        "/proc/4242/cmdline",
        &format!("/usr/bin/dockerd\0--config-file={daemon_json}\0"),
    );
    let kubelet_config = format!("/etc/{}/kubelet.yaml", hostile("kubeletconfig"));
    root.write(
        &kubelet_config,
        "kind: KubeletConfiguration\nevictionHard:\n  memory.available: 100Mi\n",
    );
    root.write("/proc/812/comm", "kubelet\n");
    root.write(
        "/proc/812/cmdline",
        &format!("/usr/bin/kubelet\0--config={kubelet_config}\0"),
    );
    // A 1-byte memory limit on a container cgroup with a hostile directory name.
    root.write(
        "/sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes",
        "16106127360\n",
    );
    root.write(
        &format!(
            "/sys/fs/cgroup/memory/kubepods/burstable/pod{UID}/{}/memory.limit_in_bytes",
            hostile("cgroup")
        ),
        "1\n",
    );
    // Pod log directories named to pass for a pod: not taken for one.
    for bad in [
        format!("{}_web_{UID}", hostile("podns")),
        format!("shop_{}_{UID}", hostile("podname")),
    ] {
        std::fs::create_dir_all(root.path(&format!("/var/log/pods/{bad}/app"))).expect("pod dir");
    }
    // kube-proxy's log under a hostile container directory, with a handbook message.
    let ts = now_rfc3339();
    root.write(
        &format!(
            "/var/log/pods/kube-system_kube-proxy-x7k2p_{UID}/{}/0.log",
            hostile("kplog")
        ),
        &format!("{ts} stderr F E0501 10:00:02.000000       1 proxier.go:1422] Failed to execute iptables-restore: exit status 1 (iptables-restore: line 42 failed)\n"),
    );
    Staged { root, mount_point }
}

fn now_rfc3339() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%S.123456789Z"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn check(root: &FakeRoot, format: &str) -> std::process::Output {
    run(
        &[
            "check",
            "--host-root",
            root.root().to_str().expect("utf-8 temp path"),
            "--format",
            format,
            "--interval",
            "100ms",
            "--node-name",
            &hostile("node"),
        ],
        &[],
    )
}

#[test]
fn check_prints_hostile_names_only_as_inert_quoted_words() {
    let s = stage();
    let out = check(&s.root, "json");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let findings = v["findings"].as_array().expect("findings");
    let ids: Vec<&str> = findings.iter().filter_map(|f| f["id"].as_str()).collect();
    for id in [
        "kernel.fs_error",
        "kernel.tiny_memory_limit",
        "kernel.hung_task",
        "memory.page_allocation_failure",
        "disk.kubelet_unprotected",
        "disk.docker_log_unbounded",
        "iptables.kube_proxy_restore_failed",
    ] {
        assert!(ids.contains(&id), "no {id} in {ids:?}:\n{v:#}");
    }
    // JSON keeps host text exactly.
    assert_eq!(v["node"], hostile("node"));
    let fs = findings
        .iter()
        .find(|f| f["id"] == "kernel.fs_error")
        .expect("fs_error");
    assert_eq!(fs["evidence"]["mount_point"], s.mount_point.as_str());

    let cmds: Vec<String> = findings
        .iter()
        .flat_map(|f| {
            f["remediation"]["commands"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c.as_str().map(str::to_string))
        .collect();
    for tag in [
        "mountpoint",
        "cgroup",
        "dataroot",
        "daemonjson",
        "kubeletconfig",
        "kplog",
        "node",
    ] {
        assert!(
            cmds.iter().any(|c| c.contains(&format!("pwned-{tag}"))),
            "no command names the hostile {tag}: {cmds:#?}"
        );
    }
    for tag in ["podns", "podname"] {
        assert!(
            !cmds.iter().any(|c| c.contains(&format!("pwned-{tag}"))),
            "{tag} was taken for a Kubernetes name: {cmds:#?}"
        );
    }
    for c in &cmds {
        assert!(
            !c.chars().any(collectors_unsafe),
            "a command holds a control character or bidi override: {c:?}"
        );
    }

    // The table: visible escapes instead of controls.
    let table = check(&s.root, "table");
    let text = String::from_utf8(table.stdout).expect("UTF-8 table");
    assert!(text.contains("pwned-mountpoint"), "{text}");
    assert!(
        !text.bytes().any(|b| b < 0x20 && b != b'\n') && !text.contains('\u{7f}'),
        "control character in the table:\n{text:?}"
    );
    assert!(
        !text.chars().any(|c| c != '\n' && collectors_unsafe(c)),
        "{text:?}"
    );
    assert!(
        text.contains("\\x1b[31m") && text.contains("\\u{202e}"),
        "{text}"
    );

    // Every printed command in the sandbox: no payload runs; pasted raw, they do.
    let Some(sb) = Sandbox::new("check_prints_hostile_names_only_as_inert_quoted_words") else {
        return;
    };
    for raw in [
        hostile("node"),
        hostile("mountpoint"),
        hostile_word("hungcomm"),
    ] {
        sb.assert_executes(&raw);
    }
    sb.assert_inert(&cmds);
}

/// The characters the human formats must not print raw (as `collectors::sanitize::is_unsafe`;
/// restated here so this test does not trust the code it checks).
fn collectors_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' | '\u{061c}' | '\u{200e}' | '\u{200f}'
        | '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}
