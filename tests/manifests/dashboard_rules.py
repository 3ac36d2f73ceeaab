#!/usr/bin/env python3
"""Turn every PromQL query of the Grafana dashboard into a recording rule, so that
`promtool check rules` parses them all: dashboard_rules.py DASHBOARD.json OUT.yaml.
Grafana variables are replaced by what Grafana would send ($node -> .*)."""
import json
import sys


def exprs(panels):
    for p in panels:
        yield from exprs(p.get("panels", []))
        for t in p.get("targets", []):
            yield p["title"], t["expr"]


def main(dashboard, out):
    with open(dashboard, encoding="utf-8") as f:
        dash = json.load(f)
    rules = []
    for i, (title, expr) in enumerate(exprs(dash["panels"])):
        rules.append({"record": f"dashboard:panel_{i}", "expr": expr.replace("$node", ".*")})
    if not rules:
        sys.exit("FAIL: the dashboard has no queries")
    import yaml  # only for writing; the venv has it
    with open(out, "w", encoding="utf-8") as f:
        yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, sort_keys=False)
    print(f"    {len(rules)} dashboard queries")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
