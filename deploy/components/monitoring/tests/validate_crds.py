#!/usr/bin/env python3
"""Validates Prometheus Operator objects against the operator's CRD schemas, offline.

Usage: validate_crds.py CRD_DIR OBJECTS.json

CRD_DIR holds the operator's CRDs (upstream/monitoring-crds/generate.sh writes them from
the operator's own API types); OBJECTS.json is a JSON list of rendered objects. Every
object of group monitoring.coreos.com is checked against the openAPIV3Schema of its kind
and version, strictly: a field the schema does not declare is an error (the API server
would prune it silently, losing what it meant), as `kubectl apply --validate=strict`
refuses it. Prints one line per problem and exits 1 if there is any, 2 on a usage error.
"""

import json
import os
import sys

import jsonschema
import yaml


def strict(schema):
    """The schema with additionalProperties: false wherever properties are declared."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def load_crds(crd_dir):
    schemas = {}
    for name in sorted(os.listdir(crd_dir)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(crd_dir, name)) as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for v in spec["versions"]:
                    key = (spec["group"], v["name"], spec["names"]["kind"])
                    schemas[key] = v["schema"]["openAPIV3Schema"]
    return schemas


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    schemas = load_crds(argv[1])
    with open(argv[2]) as f:
        objects = json.load(f)
    problems = []
    checked = 0
    for obj in objects:
        group, _, version = obj.get("apiVersion", "").rpartition("/")
        if group != "monitoring.coreos.com":
            continue
        kind = obj.get("kind", "")
        name = obj.get("metadata", {}).get("name", "?")
        schema = schemas.get((group, version, kind))
        if schema is None:
            problems.append(f"{kind}/{name}: no CRD for {group}/{version} {kind} in {argv[1]}")
            continue
        # metadata is the API server's (ObjectMeta), not the CRD's to describe.
        body = {k: v for k, v in obj.items() if k != "metadata"}
        validator = jsonschema.Draft7Validator(strict(schema))
        for e in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
            path = ".".join(str(p) for p in e.absolute_path) or "(top)"
            problems.append(f"{kind}/{name}: {path}: {e.message}")
        checked += 1
    for p in problems:
        print(p)
    print(f"{checked} objects checked, {len(problems)} problems", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
