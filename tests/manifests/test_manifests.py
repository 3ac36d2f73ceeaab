"""Invariants of node-doctor's deployment that a cluster operator relies on.

Run by tests/manifests/validate.sh on the rendered overlay (ND_RENDERED, everything the
project ships) with ND_ROOT the repository root; renders it with `kubectl kustomize` itself
when ND_RENDERED is unset. The Kubernetes-version overlays are read from
ND_RENDERED_1_25_1_29 and ND_RENDERED_RRO, or rendered the same way.
"""
import copy
import os
import re
import subprocess

import jsonschema
import pytest
import yaml

from crd_schemas import SCHEMAS

ROOT = os.environ.get("ND_ROOT") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAMESPACE = "node-doctor"
# Capabilities the collectors need, and nothing else (docs/deploy.md says why for each).
ALLOWED_CAPS = {"SYS_PTRACE", "DAC_READ_SEARCH", "SYSLOG"}


def _render(env="ND_RENDERED", overlay="prometheus-operator"):
    path = os.environ.get(env)
    if path:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    else:
        text = subprocess.run(
            ["kubectl", "kustomize", os.path.join(ROOT, "manifests/overlays", overlay)],
            check=True, capture_output=True, text=True).stdout
    return [d for d in yaml.safe_load_all(text) if d]


DOCS = _render()
# The base alone: everything the prometheus-operator overlay ships but its two CRD objects.
BASE = [d for d in DOCS if d["kind"] not in ("PodMonitor", "PrometheusRule")]
OLD_K8S = _render("ND_RENDERED_1_25_1_29", "k8s-1.25-1.29")
RRO = _render("ND_RENDERED_RRO", "recursive-read-only")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def one(kind):
    found = [d for d in DOCS if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


DS = one("DaemonSet")
POD = DS["spec"]["template"]["spec"]
POD_LABELS = DS["spec"]["template"]["metadata"]["labels"]
CTR = POD["containers"][0]
SC = CTR["securityContext"]


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def test_every_namespaced_object_is_in_the_node_doctor_namespace():
    assert one("Namespace")["metadata"]["name"] == NAMESPACE
    for d in DOCS:
        if d["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
            assert d["metadata"].get("namespace") == NAMESPACE, d["kind"]


def test_daemonset_shares_the_host_pid_and_network_namespaces_but_not_ipc():
    assert POD["hostPID"] is True
    # Per-network-namespace sysctls are only the host's when read from the host's namespace
    # (docs/deploy.md, "Network namespace"); with hostNetwork the pod must ask for cluster DNS
    # explicitly, or ClusterFirst silently becomes the node's resolv.conf.
    assert POD["hostNetwork"] is True
    assert POD["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert POD.get("hostIPC", False) is False


def test_every_host_namespace_is_justified_in_a_comment():
    """`hostPID:` and `hostNetwork:` in the source are directly preceded by a comment."""
    lines = open(os.path.join(ROOT, "manifests/base/daemonset.yaml"), encoding="utf-8").read().splitlines()
    for key in ("hostPID", "hostNetwork"):
        idx = [i for i, l in enumerate(lines) if l.strip().startswith(f"{key}:")]
        assert len(idx) == 1, key
        assert lines[idx[0] - 1].strip().startswith("#"), f"{key} has no justification comment"


def test_api_access_is_exactly_what_the_reporter_needs():
    """get nodes, patch nodes/status, create/patch core events; nothing else, and only for
    the agent's ServiceAccount, whose token only the DaemonSet's pods mount."""
    assert "--kube-report" in CTR["args"]
    assert POD["automountServiceAccountToken"] is True
    assert POD["serviceAccountName"] == "node-doctor"
    assert one("ServiceAccount")["automountServiceAccountToken"] is False
    kinds = [d["kind"] for d in DOCS]
    assert not {"Role", "RoleBinding"} & set(kinds)
    role = one("ClusterRole")
    granted = set()
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""], rule
        assert "resourceNames" not in rule
        for res in rule["resources"]:
            for verb in rule["verbs"]:
                granted.add((res, verb))
    assert granted == {("nodes", "get"), ("nodes/status", "patch"),
                       ("events", "create"), ("events", "patch")}
    binding = one("ClusterRoleBinding")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "node-doctor",
                                    "namespace": NAMESPACE}]


def test_runs_everywhere_even_on_failing_nodes():
    assert POD["priorityClassName"] == "system-node-critical"
    # One toleration with operator Exists and no key/effect tolerates every taint.
    assert {"operator": "Exists"} in POD["tolerations"]
    strategy = DS["spec"]["updateStrategy"]
    assert strategy["type"] == "RollingUpdate"
    assert strategy["rollingUpdate"]["maxUnavailable"]
    # The namespace admits system-node-critical pods where quota rules demand it.
    quota = one("ResourceQuota")
    exprs = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert any(e["scopeName"] == "PriorityClass" and "system-node-critical" in e["values"] for e in exprs)


def test_image_is_pinned():
    image = CTR["image"]
    assert re.fullmatch(r"ghcr\.io/node-doctor/node-doctor(:[0-9]+\.[0-9]+\.[0-9]+|@sha256:[0-9a-f]{64})", image), image


def test_command_line_node_name_and_port():
    assert "serve" in CTR["args"]
    assert "--host-root=/host" in CTR["args"]
    assert "--listen=0.0.0.0:9808" in CTR["args"]
    env = {e["name"]: e for e in CTR["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert {"name": "http", "containerPort": 9808, "protocol": "TCP"} in CTR["ports"]


def test_probes():
    assert CTR["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert CTR["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def _qty(v):
    units = {"m": 1e-3, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for u, f in units.items():
        if str(v).endswith(u):
            return float(str(v)[: -len(u)]) * f
    return float(v)


def test_resources_requests_and_limits():
    r = CTR["resources"]
    for res in ("cpu", "memory"):
        assert _qty(r["requests"][res]) <= _qty(r["limits"][res])
    # The RSS target is 15 MiB: the request covers it, the limit bounds a runaway.
    assert _qty(r["requests"]["memory"]) >= 15 * 2**20
    assert _qty(r["limits"]["memory"]) <= 256 * 2**20


def test_security_context_is_least_privilege():
    assert SC["readOnlyRootFilesystem"] is True
    assert SC["allowPrivilegeEscalation"] is False
    assert SC["privileged"] is False
    assert SC["capabilities"]["drop"] == ["ALL"]
    assert set(SC["capabilities"]["add"]) <= ALLOWED_CAPS
    seccomp = SC.get("seccompProfile") or POD["securityContext"]["seccompProfile"]
    assert seccomp == {"type": "RuntimeDefault"}


def test_every_added_capability_is_justified_in_a_comment():
    """Each `- CAP` under `add:` in the source is directly preceded by a comment."""
    lines = open(os.path.join(ROOT, "manifests/base/daemonset.yaml"), encoding="utf-8").read().splitlines()
    for cap in SC["capabilities"]["add"]:
        idx = [i for i, l in enumerate(lines) if l.strip() == f"- {cap}"]
        assert len(idx) == 1, cap
        assert lines[idx[0] - 1].strip().startswith("#"), f"{cap} has no justification comment"


def test_host_mounts_are_read_only():
    volumes = {v["name"]: v for v in POD["volumes"]}
    mounts = {m["name"]: m for m in CTR["volumeMounts"]}
    for name, vol in volumes.items():
        if "hostPath" in vol:
            assert mounts[name]["readOnly"] is True, name
            # No container runtime socket: node-doctor never talks to the runtime's API.
            assert not vol["hostPath"]["path"].endswith(".sock"), name
    root = mounts["host-root"]
    assert volumes["host-root"]["hostPath"]["path"] == "/"
    assert root["mountPath"] == "/host"
    assert root["mountPropagation"] == "HostToContainer"
    assert volumes["kmsg"]["hostPath"] == {"path": "/dev/kmsg", "type": "CharDevice"}
    assert mounts["kmsg"]["mountPath"] == "/dev/kmsg"


def _key(d):
    return (d["kind"], d["metadata"]["name"])


def _daemonset(docs):
    found = [d for d in docs if d["kind"] == "DaemonSet"]
    assert len(found) == 1
    return found[0]


def _same_objects_but_the_daemonset(docs, expected_ds):
    """docs are the base's objects, the DaemonSet replaced by expected_ds."""
    want = [expected_ds if d["kind"] == "DaemonSet" else d for d in BASE]
    assert sorted(docs, key=_key) == sorted(want, key=_key)


def test_overlay_1_25_1_29_is_the_base_with_apparmor_as_an_annotation():
    ds = _daemonset(OLD_K8S)
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    assert "appArmorProfile" not in ctr["securityContext"]
    assert "appArmorProfile" not in ds["spec"]["template"]["spec"].get("securityContext", {})
    ann = ds["spec"]["template"]["metadata"]["annotations"]
    assert ann[APPARMOR_ANNOTATION + ctr["name"]] == "unconfined"
    # The base says the same in the 1.30 field; nothing else differs.
    assert SC["appArmorProfile"] == {"type": "Unconfined"}
    expected = copy.deepcopy(DS)
    del expected["spec"]["template"]["spec"]["containers"][0]["securityContext"]["appArmorProfile"]
    expected["spec"]["template"]["metadata"]["annotations"][APPARMOR_ANNOTATION + CTR["name"]] = "unconfined"
    _same_objects_but_the_daemonset(OLD_K8S, expected)


def test_base_uses_the_field_not_the_deprecated_annotation():
    ann = DS["spec"]["template"]["metadata"].get("annotations", {})
    assert not [k for k in ann if k.startswith(APPARMOR_ANNOTATION)]


def test_overlay_recursive_read_only_is_the_base_with_the_host_root_recursively_read_only():
    ds = _daemonset(RRO)
    mounts = {m["name"]: m for m in ds["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    root = mounts["host-root"]
    assert root["readOnly"] is True
    assert root["recursiveReadOnly"] == "Enabled"
    expected = copy.deepcopy(DS)
    m = {x["name"]: x for x in expected["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]}
    m["host-root"]["mountPropagation"] = "None"
    m["host-root"]["recursiveReadOnly"] = "Enabled"
    _same_objects_but_the_daemonset(RRO, expected)


@pytest.mark.parametrize("docs", [DOCS, OLD_K8S, RRO], ids=["base", "k8s-1.25-1.29", "recursive-read-only"])
def test_recursive_read_only_mounts_follow_the_api_rules(docs):
    """The API server refuses recursiveReadOnly (Enabled or IfPossible) unless the mount is
    readOnly and its propagation None (or unset); a schema does not check that."""
    for m in _daemonset(docs)["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]:
        rro = m.get("recursiveReadOnly", "Disabled")
        assert rro in ("Disabled", "IfPossible", "Enabled"), m
        if rro != "Disabled":
            assert m.get("readOnly") is True, m
            assert m.get("mountPropagation", "None") == "None", m


def test_scrape_annotations_match_the_port():
    ann = DS["spec"]["template"]["metadata"]["annotations"]
    assert ann["prometheus.io/scrape"] == "true"
    assert ann["prometheus.io/port"] == "9808"
    assert ann["prometheus.io/path"] == "/metrics"


def test_headless_service_selects_the_agent():
    svc = one("Service")
    assert svc["spec"]["clusterIP"] == "None"
    assert selects(svc["spec"]["selector"], POD_LABELS)
    assert svc["spec"]["ports"][0]["targetPort"] == "http"


def test_network_policy_selects_the_agent_and_allows_only_the_api_server_kube_proxy_health_and_dns_ports_out():
    np = one("NetworkPolicy")
    assert selects(np["spec"]["podSelector"]["matchLabels"], POD_LABELS)
    assert set(np["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    assert np["spec"]["egress"] == [{"ports": [{"port": 443, "protocol": "TCP"},
                                               {"port": 6443, "protocol": "TCP"}]},
                                    {"ports": [{"port": 10256, "protocol": "TCP"}]},
                                    {"ports": [{"port": 53, "protocol": "UDP"},
                                               {"port": 53, "protocol": "TCP"}]}]
    assert np["spec"]["ingress"] == [{"ports": [{"port": "http", "protocol": "TCP"}]}]


def test_pod_monitor_scrapes_the_agent_and_labels_the_node():
    pm = one("PodMonitor")
    assert selects(pm["spec"]["selector"]["matchLabels"], POD_LABELS)
    assert NAMESPACE in pm["spec"]["namespaceSelector"]["matchNames"]
    ep = pm["spec"]["podMetricsEndpoints"][0]
    assert ep["port"] == "http" and ep["path"] == "/metrics"
    assert {"sourceLabels": ["__meta_kubernetes_pod_node_name"], "targetLabel": "instance",
            "action": "replace"} in ep["relabelings"]


def test_alerts_on_warning_and_critical_findings_carry_id_and_subject():
    rules = [r for g in one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    by_sev = {}
    for r in rules:
        m = re.search(r'node_doctor_finding\{severity="(\w+)"\}', r["expr"])
        if m:
            by_sev[m.group(1)] = r
    assert set(by_sev) == {"warning", "critical"}
    for sev, r in by_sev.items():
        assert r["labels"]["severity"] == sev
        assert "$labels.id" in r["annotations"]["summary"]
        assert r["annotations"]["finding_id"] == "{{ $labels.id }}"
        assert "/findings" in r["annotations"]["description"]


def test_finding_alerts_link_to_the_rule_page_and_nothing_links_to_a_site_that_does_not_exist():
    """An operator reaches the remediation from a finding's alert: its runbook_url is the
    rule's page the agent names (`node_doctor_finding_info{runbook}`: <docs-url>/rules/<id>, or
    the agent's own page); no alert, and nothing else shipped, names the made-up project site."""
    rules = [r for g in one("PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    findings_doc = open(os.path.join(ROOT, "docs/findings.md"), encoding="utf-8").read()
    for r in rules:
        url = r["annotations"].get("runbook_url")
        if "node_doctor_finding" in r["expr"]:
            assert url is not None, r["alert"]
            assert "node_doctor_finding_info{" in url and 'label "runbook"' in url, url
        for text in r["annotations"].values():
            assert "github.com" not in text, (r["alert"], text)
    for dirpath, _, files in os.walk(os.path.join(ROOT, "manifests")):
        for f in files:
            text = open(os.path.join(dirpath, f), encoding="utf-8").read()
            assert "github.com/node-doctor" not in text, os.path.join(dirpath, f)
    # Every finding id the agent can report has its anchor there.
    ids = set()
    for md in os.listdir(os.path.join(ROOT, "docs/collectors")):
        text = open(os.path.join(ROOT, "docs/collectors", md), encoding="utf-8").read()
        # Rule ids are in the collector pages' rule tables (`| `id` |`) or headings (### `id`).
        # A page's rules carry its collector's prefix (disk.md also tables the `runtime.*`
        # settings it reads: those are not rules).
        ids |= set(re.findall(r"^(?:\| |### )`(%s\.[a-z_0-9]+)`" % re.escape(md[:-3]), text, re.M))
    assert len(ids) > 40 and any(i.startswith("runtime.") for i in ids), ids
    for i in sorted(ids):
        assert f'<a id="{i}"></a>' in findings_doc, f"docs/findings.md has no anchor for {i}"


@pytest.mark.parametrize("kind", ["PodMonitor", "PrometheusRule"])
def test_vendored_schema_rejects_a_misspelt_field(kind):
    doc = one(kind)
    validator = jsonschema.Draft202012Validator(SCHEMAS[(doc["apiVersion"], kind)])
    assert not list(validator.iter_errors(doc))
    bad = copy.deepcopy(doc)
    if kind == "PodMonitor":
        bad["spec"]["podMetricsEndpoints"][0]["scrapeInterval"] = "30s"  # it is `interval`
    else:
        bad["spec"]["groups"][0]["rules"][0]["for"] = "2 minutes"  # not a duration
    assert list(validator.iter_errors(bad))


def test_every_checkov_skip_has_a_reason_and_is_documented():
    doc = open(os.path.join(ROOT, "docs/deploy.md"), encoding="utf-8").read()
    skips = {k: v for k, v in DS["metadata"]["annotations"].items() if k.startswith("checkov.io/skip")}
    assert skips
    for value in skips.values():
        check, _, reason = value.partition("=")
        assert re.fullmatch(r"CKV2?_K8S_[0-9]+", check), value
        assert len(reason.split()) >= 5, f"{check}: reason too short"
        assert check in doc, f"{check} is not explained in docs/deploy.md"


def test_dockerfile_is_multi_stage_minimal_and_exec_form():
    text = open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8").read()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert len(froms) == 2 and froms[0].startswith("rust:")
    assert froms[1].startswith("gcr.io/distroless/")
    assert re.search(r"^USER\s+\S+", text, re.M)
    assert re.search(r'^ENTRYPOINT\s+\["/usr/local/bin/node-doctor"\]', text, re.M)
    assert "--locked" in text
