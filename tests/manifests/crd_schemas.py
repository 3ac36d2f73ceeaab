"""JSON schemas for the two Prometheus Operator kinds node-doctor ships.

kubernetes-validate knows only the built-in Kubernetes kinds, so PodMonitor and
PrometheusRule (monitoring.coreos.com/v1) are checked against these schemas instead.
They are written for this project from the Prometheus Operator API reference (v0.7x,
monitoring.coreos.com/v1), and cover the fields node-doctor's manifests may use: unknown
fields are rejected (as `kubectl apply` with strict field validation would), required
fields and value formats (durations, relabel actions, label names) are enforced.
"""

# Prometheus duration, as the Operator's CRDs spell it.
DURATION = {
    "type": "string",
    "pattern": r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$",
}
LABEL_NAME = {"type": "string", "pattern": r"^[a-zA-Z_][a-zA-Z0-9_]*$"}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

METADATA = {
    "type": "object",
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 253},
        "namespace": {"type": "string"},
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    "additionalProperties": False,
}

LABEL_SELECTOR = {
    "type": "object",
    "properties": {
        "matchLabels": STRING_MAP,
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
                "additionalProperties": False,
            },
        },
    },
    "additionalProperties": False,
}

RELABEL_ACTIONS = [
    "replace", "Replace", "keep", "Keep", "drop", "Drop", "hashmod", "HashMod",
    "labelmap", "LabelMap", "labeldrop", "LabelDrop", "labelkeep", "LabelKeep",
    "lowercase", "Lowercase", "uppercase", "Uppercase", "keepequal", "KeepEqual",
    "dropequal", "DropEqual",
]
RELABEL_CONFIG = {
    "type": "object",
    "properties": {
        "action": {"enum": RELABEL_ACTIONS},
        "modulus": {"type": "integer", "minimum": 0},
        "regex": {"type": "string"},
        "replacement": {"type": "string"},
        "separator": {"type": "string"},
        "sourceLabels": {"type": "array", "items": LABEL_NAME},
        "targetLabel": {"type": "string"},
    },
    "additionalProperties": False,
}

POD_METRICS_ENDPOINT = {
    "type": "object",
    "properties": {
        "port": {"type": "string"},
        "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
        "path": {"type": "string"},
        "scheme": {"enum": ["http", "https", "HTTP", "HTTPS"]},
        "params": {"type": "object"},
        "interval": DURATION,
        "scrapeTimeout": DURATION,
        "honorLabels": {"type": "boolean"},
        "honorTimestamps": {"type": "boolean"},
        "filterRunning": {"type": "boolean"},
        "enableHttp2": {"type": "boolean"},
        "followRedirects": {"type": "boolean"},
        "relabelings": {"type": "array", "items": RELABEL_CONFIG},
        "metricRelabelings": {"type": "array", "items": RELABEL_CONFIG},
        "bearerTokenSecret": {"type": "object"},
        "authorization": {"type": "object"},
        "basicAuth": {"type": "object"},
        "tlsConfig": {"type": "object"},
    },
    "additionalProperties": False,
}

PODMONITOR = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "required": ["selector"],
            "properties": {
                "jobLabel": {"type": "string"},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "podMetricsEndpoints": {"type": "array", "items": POD_METRICS_ENDPOINT},
                "selector": LABEL_SELECTOR,
                "namespaceSelector": {
                    "type": "object",
                    "properties": {
                        "any": {"type": "boolean"},
                        "matchNames": {"type": "array", "items": {"type": "string"}},
                    },
                    "additionalProperties": False,
                },
                "sampleLimit": {"type": "integer", "minimum": 0},
                "targetLimit": {"type": "integer", "minimum": 0},
                "labelLimit": {"type": "integer", "minimum": 0},
                "scrapeProtocols": {"type": "array", "items": {"type": "string"}},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

RULE = {
    "type": "object",
    "required": ["expr"],
    "properties": {
        "alert": {"type": "string", "minLength": 1},
        "record": {"type": "string", "minLength": 1},
        "expr": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "integer"}]},
        "for": DURATION,
        "keep_firing_for": {"type": "string", "minLength": 1},
        "labels": STRING_MAP,
        "annotations": STRING_MAP,
    },
    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
    "additionalProperties": False,
}

PROMETHEUSRULE = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PrometheusRule"},
        "metadata": METADATA,
        "spec": {
            "type": "object",
            "properties": {
                "groups": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string", "minLength": 1},
                            "interval": DURATION,
                            "query_offset": DURATION,
                            "limit": {"type": "integer"},
                            "partial_response_strategy": {"type": "string"},
                            "labels": STRING_MAP,
                            "rules": {"type": "array", "items": RULE},
                        },
                        "additionalProperties": False,
                    },
                },
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

SCHEMAS = {
    ("monitoring.coreos.com/v1", "PodMonitor"): PODMONITOR,
    ("monitoring.coreos.com/v1", "PrometheusRule"): PROMETHEUSRULE,
}
