#!/usr/bin/env python3
"""Validates manifests/examples/repair/ (docs/kubernetes.md, "Repair").

- NodeHealthCheck, MachineHealthCheck and NodePool against the projects' own CRD schemas
  (vendored in tests/manifests/crds/, SOURCES.md says from where), strictly: a field the
  schema does not know is an error, as with `kubectl apply --validate=strict`;
- every condition type an example lists is one of node-doctor's repair-worthy classes
  (collectors/rules/cluster.toml, `repair = true`), with the status that means a problem
  under the naming it uses (True for node-doctor's own names);
- every example sets its safety limit (minHealthy or maxUnhealthy and a storm cooldown,
  unhealthyLessThanOrEqualTo, a cordon limit);
- and the check has teeth: objects broken on purpose are refused.

Usage: validate_repair_examples.py ROOT  (exit 1 on any failure)
"""

import copy
import re
import sys
import tomllib
from pathlib import Path

import jsonschema
import yaml

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
EXAMPLES = ROOT / "manifests/examples/repair"
CRDS = ROOT / "tests/manifests/crds"

METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "additionalProperties": False,
}


def strict(schema):
    """The CRD's structural schema as a strict JSON schema: unknown fields refused (where the
    CRD neither allows additional properties nor preserves unknown fields)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if (
            "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(x) for x in schema]
    return schema


def crd_schemas():
    """(group/version, kind) -> strict schema, for every vendored CRD."""
    out = {}
    for f in sorted(CRDS.glob("*.yaml")):
        crd = yaml.safe_load(f.read_text())
        spec = crd["spec"]
        for v in spec["versions"]:
            s = copy.deepcopy(v["schema"]["openAPIV3Schema"])
            s = strict(s)
            s["properties"]["metadata"] = METADATA
            s["required"] = sorted(set(s.get("required", [])) | {"apiVersion", "kind", "metadata"})
            out[(f"{spec['group']}/{v['name']}", spec["names"]["kind"])] = s
    return out


def cluster_classes():
    data = tomllib.loads((ROOT / "collectors/rules/cluster.toml").read_text())
    classes = data["node_condition"]
    worthy = {c["type"] for c in classes if c["repair"]}
    advisory = {c["type"] for c in classes if not c["repair"]}
    nma = {c["nma"]["type"] for c in classes if c.get("nma")}
    return worthy, advisory, nma


def validate(obj, schemas):
    key = (obj.get("apiVersion"), obj.get("kind"))
    if key not in schemas:
        return [f"no vendored schema for {key}"]
    v = jsonschema.Draft202012Validator(schemas[key])
    return [f"{'/'.join(map(str, e.absolute_path)) or '.'}: {e.message}" for e in v.iter_errors(obj)]


def conditions_of(obj):
    """(type, status) an example's object acts on."""
    spec = obj.get("spec", {})
    if obj["kind"] == "NodeHealthCheck":
        return [(c["type"], c["status"]) for c in spec.get("unhealthyConditions", [])]
    if obj["kind"] == "MachineHealthCheck":
        return [(c["type"], c["status"]) for c in spec.get("checks", {}).get("unhealthyNodeConditions", [])]
    return []


def limit_errors(obj):
    spec = obj.get("spec", {})
    if obj["kind"] == "NodeHealthCheck":
        errs = []
        if "minHealthy" not in spec and "maxUnhealthy" not in spec:
            errs.append("NodeHealthCheck: no minHealthy or maxUnhealthy")
        if "stormCooldownDuration" not in spec:
            errs.append("NodeHealthCheck: no stormCooldownDuration")
        return errs
    if obj["kind"] == "MachineHealthCheck":
        trig = spec.get("remediation", {}).get("triggerIf", {})
        if "unhealthyLessThanOrEqualTo" not in trig and "unhealthyInRange" not in trig:
            return ["MachineHealthCheck: no remediation.triggerIf.unhealthyLessThanOrEqualTo"]
    return []


def args_conditions(path):
    """draino's `Type=Status,Duration` arguments and MCM's --node-conditions list."""
    conds, flags = [], {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--"):
            k, _, v = line.partition("=")
            flags[k] = v
            if k == "--node-conditions":
                conds += [(t, "True") for t in v.split(",")]
        else:
            m = re.fullmatch(r"([A-Za-z0-9]+)=(True|False|Unknown),([0-9]+[smh])", line)
            if not m:
                raise SystemExit(f"FAIL: {path.name}: {line!r} is not Type=Status,Duration")
            conds.append((m.group(1), m.group(2)))
    return conds, flags


def check_conditions(name, conds, worthy, advisory):
    errs = []
    if not conds:
        errs.append(f"{name}: lists no condition")
    for t, status in conds:
        if t in advisory:
            errs.append(f"{name}: {t} is advisory (repair = false in cluster.toml): repair must not act on it")
        elif t not in worthy:
            errs.append(f"{name}: {t} is not one of node-doctor's repair-worthy condition types")
        elif status != "True":
            errs.append(f"{name}: {t} means a problem when True, not {status}")
    return errs


def main():
    schemas = crd_schemas()
    worthy, advisory, nma = cluster_classes()
    errors = []
    objects = []
    for f in sorted(EXAMPLES.glob("*.yaml")):
        for obj in yaml.safe_load_all(f.read_text()):
            if not obj:
                continue
            objects.append(obj)
            errors += [f"{f.name}: {e}" for e in validate(obj, schemas)]
            errors += [f"{f.name}: {e}" for e in limit_errors(obj)]
            if obj["kind"] in ("NodeHealthCheck", "MachineHealthCheck"):
                errors += check_conditions(f.name, conditions_of(obj), worthy, advisory)
            print(f"    {f.name}: {obj['apiVersion']} {obj['kind']} {obj['metadata']['name']}")
    kinds = sorted(o["kind"] for o in objects)
    if kinds != ["MachineHealthCheck", "NodeHealthCheck", "NodePool"]:
        errors.append(f"expected a NodeHealthCheck, a MachineHealthCheck and a NodePool, found {kinds}")
    draino, dflags = args_conditions(EXAMPLES / "draino.args")
    errors += check_conditions("draino.args", draino, worthy, advisory)
    if "--max-simultaneous-cordon" not in dflags:
        errors.append("draino.args: no --max-simultaneous-cordon")
    mcm, mflags = args_conditions(EXAMPLES / "gardener-mcm.args")
    errors += check_conditions("gardener-mcm.args", mcm, worthy, advisory)
    if "--machine-health-timeout" not in mflags:
        errors.append("gardener-mcm.args: no --machine-health-timeout")
    print(f"    draino: {len(draino)} conditions; machine-controller-manager: {len(mcm)} conditions")
    note = (EXAMPLES / "karpenter-nodepool.yaml").read_text()
    for t in sorted(nma):
        if t not in note:
            errors.append(f"karpenter-nodepool.yaml: its note does not name {t}")

    # Teeth: each of these must be refused.
    by_kind = {o["kind"]: o for o in objects}
    broken = []
    mhc = copy.deepcopy(by_kind["MachineHealthCheck"])
    mhc["spec"]["unhealthyConditions"] = mhc["spec"]["checks"].pop("unhealthyNodeConditions")
    broken.append(("MachineHealthCheck with v1beta1's spec.unhealthyConditions", validate(mhc, schemas)))
    nhc = copy.deepcopy(by_kind["NodeHealthCheck"])
    nhc["spec"]["unhealthyConditions"][0]["duration"] = "10 minutes"
    broken.append(("NodeHealthCheck with duration '10 minutes'", validate(nhc, schemas)))
    nhc = copy.deepcopy(by_kind["NodeHealthCheck"])
    nhc["spec"]["minHealthy"] = "120%"
    broken.append(("NodeHealthCheck with minHealthy 120%", validate(nhc, schemas)))
    broken.append(("an advisory type", check_conditions("x", [("NodeDoctorDNSUnhealthy", "True")], worthy, advisory)))
    nhc = copy.deepcopy(by_kind["NodeHealthCheck"])
    del nhc["spec"]["minHealthy"]
    broken.append(("NodeHealthCheck without minHealthy", limit_errors(nhc)))
    for what, errs in broken:
        if not errs:
            errors.append(f"the check has no teeth: {what} was accepted")
        else:
            print(f"    refused, as it must be: {what}: {errs[0]}")

    if errors:
        for e in errors:
            print(f"FAIL: {e}", file=sys.stderr)
        sys.exit(1)
    print("    the repair examples are valid")


main()
