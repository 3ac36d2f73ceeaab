"""Vendors the official Kubernetes JSON schemas of the objects node-doctor writes.

The schemas come from the `kubernetes-validate` package (the one tests/manifests/validate.sh
installs): its `-local-strict` variants (additionalProperties: false, so a misspelt field is an
error). For each kind, the kind's schema and every definition it reaches through `$ref` are
written as one self-contained JSON Schema (draft 2020-12) with the references rewritten to
`#/$defs/...`. Re-run after changing the versions:

    ~/.cache/node-doctor-validate/venv/bin/python kube-standin/schemas/vendor.py
"""
import glob
import json
import os
import sys

VERSIONS = ["1.30.0", "1.37.0"]
KINDS = {"node-v1.json": "Node", "event-v1.json": "Event"}
HERE = os.path.dirname(os.path.abspath(__file__))


def package_dir():
    import kubernetes_validate
    return os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")


def rewrite(node):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                out[k] = "#/$defs/" + v.split("#/$defs/", 1)[1]
            else:
                out[k] = rewrite(v)
        return out
    if isinstance(node, list):
        return [rewrite(v) for v in node]
    return node


def refs(node, acc):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "$ref" and isinstance(v, str):
                acc.add(v.split("#/$defs/", 1)[1])
            else:
                refs(v, acc)
    elif isinstance(node, list):
        for v in node:
            refs(v, acc)


def main():
    base = package_dir()
    for version in VERSIONS:
        src = os.path.join(base, f"v{version}-local-strict")
        defs = json.load(open(os.path.join(src, "_definitions.json")))["$defs"]
        out_dir = os.path.join(HERE, f"v{version}")
        os.makedirs(out_dir, exist_ok=True)
        for name in KINDS:
            schema = json.load(open(os.path.join(src, name)))
            needed, todo = set(), set()
            refs(schema, todo)
            while todo:
                d = todo.pop()
                if d in needed:
                    continue
                needed.add(d)
                refs(defs[d], todo)
            schema = rewrite(schema)
            schema.pop("$id", None)
            schema["$defs"] = {d: rewrite(defs[d]) for d in sorted(needed)}
            with open(os.path.join(out_dir, name), "w") as f:
                json.dump(schema, f, indent=1, sort_keys=True)
                f.write("\n")
            print(f"v{version}/{name}: {len(needed)} definitions")


if __name__ == "__main__":
    sys.exit(main())
