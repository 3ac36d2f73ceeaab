"""The DaemonSet's securityContext, applied for real: each added capability is needed, and
together they are enough, for the reads the collectors make of other processes.

A runc container is built from the rendered DaemonSet's container (uid, capabilities,
no-new-privileges, read-only root, host pid and network namespaces, the /dev/kmsg mount,
runc's default device rules) and reads a process owned by another user (uid 65534). Root only; needs runc
(Debian `runc`) and a static busybox (Debian `busybox-static`): ND_RUNC / ND_BUSYBOX, or on
PATH. tests/manifests/validate.sh provides both. Skipped, saying why, when unavailable.
"""
import json
import os
import shutil
import subprocess
import tempfile
import uuid

import pytest
import yaml

RENDERED = os.environ.get("ND_RENDERED")
RUNC = os.environ.get("ND_RUNC") or shutil.which("runc")
BUSYBOX = os.environ.get("ND_BUSYBOX") or shutil.which("busybox")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (runs a container)"),
    pytest.mark.skipif(not RUNC, reason="needs runc (Debian package runc)"),
    pytest.mark.skipif(not BUSYBOX, reason="needs a static busybox (Debian package busybox-static)"),
    pytest.mark.skipif(not RENDERED, reason="needs ND_RENDERED (run via tests/manifests/validate.sh)"),
]

# What each read proves, and the capability the kernel checks for it.
PROBES = {
    "io": "/bin/busybox head -c 6 /proc/{pid}/io",  # ptrace read check + 0400 owner file
    "fd": "/bin/busybox ls /proc/{pid}/fd",  # 0500 owner directory
    "ns": "/bin/busybox readlink /proc/{pid}/ns/net",  # ptrace read check
    "syslog": "/bin/busybox dmesg",  # syslog(2) READ_ALL, kernel.dmesg_restrict
    "kmsg": "/bin/busybox head -c 1 /dev/kmsg",  # device cgroup, then CAP_SYSLOG
}


def container_spec():
    with open(RENDERED, encoding="utf-8") as f:
        ds = next(d for d in yaml.safe_load_all(f) if d and d["kind"] == "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


@pytest.fixture(scope="module")
def sleeper():
    """A process of another user, as the agent sees the host's."""
    p = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "120"])
    yield p.pid
    p.kill()
    p.wait()


def run_probes(caps, target_pid, tmp):
    pod, ctr = container_spec()
    sc = ctr["securityContext"]
    bundle = os.path.join(tmp, uuid.uuid4().hex[:8])
    rootfs = os.path.join(bundle, "rootfs")
    for d in ("bin", "proc", "dev", "sys", "tmp"):
        os.makedirs(os.path.join(rootfs, d))
    shutil.copy(BUSYBOX, os.path.join(rootfs, "bin/busybox"))
    subprocess.run([RUNC, "spec", "--bundle", bundle], check=True)
    with open(os.path.join(bundle, "config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    script = "; ".join(f'if {cmd.format(pid=target_pid)} >/dev/null 2>&1; then echo {name}=ok; else echo {name}=no; fi'
                       for name, cmd in PROBES.items())
    proc = cfg["process"]
    proc["terminal"] = False
    proc["args"] = ["/bin/busybox", "sh", "-c", script]
    proc["user"] = {"uid": sc["runAsUser"], "gid": sc.get("runAsGroup", 0)}
    proc["noNewPrivileges"] = not sc["allowPrivilegeEscalation"]
    linux_caps = ["CAP_" + c for c in caps]
    proc["capabilities"] = {"bounding": linux_caps, "effective": linux_caps, "permitted": linux_caps}
    cfg["root"]["readonly"] = sc["readOnlyRootFilesystem"]
    if pod.get("hostPID"):
        cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "pid"]
    if pod.get("hostNetwork"):
        cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
    mounts = {m["name"]: m for m in ctr["volumeMounts"]}
    for vol in pod["volumes"]:
        hp = vol.get("hostPath")
        if hp and hp.get("type") == "CharDevice":
            opts = ["rbind", "ro" if mounts[vol["name"]]["readOnly"] else "rw"]
            cfg["mounts"].append({"destination": mounts[vol["name"]]["mountPath"], "type": "bind",
                                  "source": hp["path"], "options": opts})
    with open(os.path.join(bundle, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    out = subprocess.run([RUNC, "--root", os.path.join(tmp, "state"), "run", "--bundle", bundle,
                          "nd-" + uuid.uuid4().hex[:8]],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return dict(line.split("=") for line in out.stdout.split())


def test_the_added_capabilities_are_sufficient_and_each_is_needed(sleeper):
    _, ctr = container_spec()
    caps = ctr["securityContext"]["capabilities"]["add"]
    with tempfile.TemporaryDirectory() as tmp:
        full = run_probes(caps, sleeper, tmp)
        print(f"\nall of {caps}: {full}")
        assert full["io"] == full["fd"] == full["ns"] == full["syslog"] == "ok", full
        for cap in caps:
            without = run_probes([c for c in caps if c != cap], sleeper, tmp)
            print(f"without {cap}: {without}")
            lost = [p for p in ("io", "fd", "ns", "syslog") if full[p] == "ok" and without[p] != "ok"]
            assert lost, f"{cap} is added but no read needs it"
        # /dev/kmsg: refused by the device cgroup in an unprivileged container (docs/deploy.md,
        # "Limitation"); reported, not asserted, as it depends on the runtime's device rules.
        print(f"/dev/kmsg readable in the unprivileged container: {full['kmsg'] == 'ok'}")
