#!/usr/bin/python3
"""Validates the Kubernetes manifests of deploy/kubernetes against their schemas.

    validate_manifests.py <launcher> <node-tools dir> <lws schema.json.gz> <manifest.yaml>...

- LeaderWorkerSet: the v1 schema of its CustomResourceDefinition
  (testdata/README.md), held strictly as `kubectl apply --validate=strict`
  does: a field the schema does not name is an error, unless the schema
  keeps unknown fields (x-kubernetes-preserve-unknown-fields).
- Deployment, Service, Secret: Kubernetes' own API types
  (kubernetes-models, generated from the API server's OpenAPI: types,
  required fields, enums), and the Deployment's pod template strictly
  against the PodTemplateSpec of the schema above (the same Go type).
- Every container that runs the launcher passes it only flags it has
  (`launcher --help`), the first argument a command it takes.

Then each check must refuse a broken copy of a manifest (a field of the
wrong type, a misspelt field, an unknown flag): a check that cannot fail
fails the test. Prints what it checked; exits 1 on any error.
"""

import copy
import gzip
import json
import re
import subprocess
import sys
import tempfile

import jsonschema
import yaml


def strict(schema):
    """`schema` with unnamed fields refused wherever it names fields."""
    if isinstance(schema, dict):
        schema = {k: strict(v) for k, v in schema.items()}
        if ("properties" in schema and "additionalProperties" not in schema and
                not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        return schema
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def schema_errors(schema, document):
    validator = jsonschema.Draft7Validator(schema)
    return ["%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(top)", e.message)
            for e in validator.iter_errors(document)]


def containers(document):
    kind = document.get("kind")
    if kind == "Deployment":
        templates = [document["spec"]["template"]]
    elif kind == "LeaderWorkerSet":
        lwt = document["spec"]["leaderWorkerTemplate"]
        templates = [lwt["workerTemplate"]] + ([lwt["leaderTemplate"]] if "leaderTemplate" in lwt else [])
    else:
        return []
    return [c for t in templates for c in t.get("spec", {}).get("containers", [])]


class Checks:
    def __init__(self, launcher, node_tools, lws_schema):
        self.node_tools = node_tools
        self.lws = strict(lws_schema)
        self.pod_template = self.lws["properties"]["spec"]["properties"]["leaderWorkerTemplate"][
            "properties"]["workerTemplate"]
        help_text = subprocess.run([launcher, "--help"], capture_output=True, text=True).stdout + \
            subprocess.run([launcher, "--help"], capture_output=True, text=True).stderr
        self.flags = set(re.findall(r"--([a-z0-9_]+)", help_text))
        if "data_parallel_size" not in self.flags:
            raise SystemExit("launcher --help lists no --data_parallel_size: cannot read its flags")

    def errors(self, documents):
        found = []
        api_types = []
        for i, d in enumerate(documents):
            where = "%s %s" % (d.get("kind"), d.get("metadata", {}).get("name"))
            if d.get("kind") == "LeaderWorkerSet":
                found += ["%s: %s" % (where, e) for e in schema_errors(self.lws, d)]
            elif d.get("kind") in ("Deployment", "Service", "Secret"):
                api_types.append(d)
                if d["kind"] == "Deployment":
                    found += ["%s: spec/template/%s" % (where, e)
                              for e in schema_errors(self.pod_template, d["spec"]["template"])]
            else:
                found.append("%s: no schema for this kind" % where)
            for c in containers(d):
                args = c.get("args", [])
                if not args or args[0] not in ("serve", "chat", "download"):
                    found.append("%s: container %s: the launcher's first argument is a command "
                                 "(serve), not %r" % (where, c.get("name"), args[:1]))
                for a in args[1:]:
                    m = re.match(r"--([a-z0-9_]+)", a)
                    if not m or m.group(1) not in self.flags:
                        found.append("%s: container %s: %r is not a launcher flag" % (where, c.get("name"), a))
        if api_types:
            with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
                json.dump(api_types, f)
                f.flush()
                check = subprocess.run(["node", sys.path[0] + "/kubernetes_models_check.mjs", self.node_tools, f.name],
                                       capture_output=True, text=True)
                if check.returncode != 0:
                    found += [l for l in (check.stdout + check.stderr).splitlines() if l.strip()]
        return found


def broken_copies(documents):
    """(what was broken, documents) for each way a check must catch."""
    def first(kind):
        return next(i for i, d in enumerate(documents) if d["kind"] == kind)

    out = []
    if any(d["kind"] == "LeaderWorkerSet" for d in documents):
        b = copy.deepcopy(documents)
        b[first("LeaderWorkerSet")]["spec"]["leaderWorkerTemplate"]["size"] = "two"
        out.append(("LeaderWorkerSet size as a string", b))
        b = copy.deepcopy(documents)
        b[first("LeaderWorkerSet")]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
            "imagePullPolicyy"] = "Always"
        out.append(("a misspelt container field in a LeaderWorkerSet", b))
    if any(d["kind"] == "Deployment" for d in documents):
        b = copy.deepcopy(documents)
        b[first("Deployment")]["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8000"
        out.append(("a port as a string in a Deployment", b))
        b = copy.deepcopy(documents)
        b[first("Deployment")]["spec"]["replicas"] = "2"
        out.append(("a Deployment's replicas as a string", b))
        b = copy.deepcopy(documents)
        b[first("Deployment")]["spec"]["template"]["spec"]["containers"][0]["args"].append("--no_such_flag=1")
        out.append(("a flag the launcher does not have", b))
    return out


def main():
    launcher, node_tools, lws_path = sys.argv[1:4]
    with gzip.open(lws_path, "rt") as f:
        checks = Checks(launcher, node_tools, json.load(f))
    failed = 0
    for path in sys.argv[4:]:
        with open(path) as f:
            documents = [d for d in yaml.safe_load_all(f) if d]
        errors = checks.errors(documents)
        for e in errors:
            print("FAIL: %s: %s" % (path, e))
        failed += bool(errors)
        print("%s: %s: %s" % (path, ", ".join(d["kind"] for d in documents), "invalid" if errors else "valid"))
        for what, broken in broken_copies(documents):
            caught = checks.errors(broken)
            if not caught:
                print("FAIL: %s: a copy with %s passed the checks" % (path, what))
                failed += 1
            else:
                print("  refused, as it must: %s (%s)" % (what, caught[0][:160]))
    print("%d manifest file(s), %s" % (len(sys.argv) - 4, "all valid" if not failed else "%d failure(s)" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
