#!/usr/bin/env python3
"""Split a rendered kustomize stream for validation.

    split_validate.py RENDERED.yaml OUTDIR

Built-in Kubernetes kinds go to OUTDIR/core.yaml (for kubernetes-validate). Prometheus
Operator kinds are validated here against crd_schemas.py; any other custom kind is an
error (no schema, no pass). The rules of every PrometheusRule are written to
OUTDIR/rules.yaml as a plain Prometheus rule file (for `promtool check rules` and
`promtool test rules`). Exits non-zero on any failure.
"""
import os
import sys

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crd_schemas import SCHEMAS  # noqa: E402

# API groups whose kinds kubernetes-validate has schemas for.
CORE_GROUPS = {"", "apps", "batch", "policy", "networking.k8s.io", "rbac.authorization.k8s.io",
               "scheduling.k8s.io", "storage.k8s.io", "autoscaling"}


def main(rendered, outdir):
    with open(rendered, encoding="utf-8") as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    core, groups, errors = [], [], []
    for doc in docs:
        api, kind = doc.get("apiVersion", ""), doc.get("kind", "")
        name = doc.get("metadata", {}).get("name", "?")
        group = api.rsplit("/", 1)[0] if "/" in api else ""
        if group in CORE_GROUPS:
            core.append(doc)
            continue
        schema = SCHEMAS.get((api, kind))
        if schema is None:
            errors.append(f"{kind}/{name} ({api}): no schema to validate it against")
            continue
        validator = jsonschema.Draft202012Validator(schema)
        problems = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
        for p in problems:
            path = ".".join(str(x) for x in p.path) or "(root)"
            errors.append(f"{kind}/{name}: {path}: {p.message}")
        if not problems:
            print(f"PASS {kind}/{name} against the vendored {api} schema")
        if kind == "PrometheusRule":
            groups.extend(doc["spec"].get("groups", []))
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "core.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump_all(core, f, sort_keys=False)
    with open(os.path.join(outdir, "rules.yaml"), "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": groups}, f, sort_keys=False)
    for e in errors:
        print(f"FAIL {e}", file=sys.stderr)
    print(f"{len(core)} built-in objects for kubernetes-validate, "
          f"{sum(len(g.get('rules', [])) for g in groups)} alerting/recording rules")
    return 1 if errors else 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
