#!/usr/bin/python3
"""Gathers the real-schema corpus of worker/grammar/testdata/real_schemas.

Reads two public collections from git snapshots (read with `git show`, so
no work tree is needed) and writes one JSON text a line, xz-compressed:
{"name", "source", "schema"}:

- JSON Schema Store's catalogue (github.com/SchemaStore/schemastore,
  src/schemas/json/*.json): the schemas editors fetch for configuration
  files, every draft from 4 to 2020-12, as published.
- The component schemas of OpenAI's OpenAPI 3.1 description
  (github.com/openai/openai-openapi, openapi.json): each component with
  the components it references, transitively, under "$defs" (its
  "#/components/schemas/X" references rewritten to "#/$defs/X"), so that
  each is a JSON Schema of its own, as a function's or response format's
  schema is.

Schemas over --max_bytes (compact) are left out, and duplicates (the same
compact text) are kept once. The output is the same for the same commits.

    /usr/bin/python3 tools/gather_schema_corpus.py \\
        --schemastore=/work/.mirror/SchemaStore+schemastore/repo \\
        --openapi=/work/.mirror/openai+openai-openapi/repo \\
        --out=worker/grammar/testdata/real_schemas/corpus.jsonl.xz
"""

import argparse
import json
import lzma
import subprocess
import sys


def git(repo, *args):
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def head(repo):
    return git(repo, "rev-parse", "HEAD").decode().strip()


def schemastore(repo):
    commit = head(repo)
    names = git(repo, "ls-tree", "--name-only", "HEAD", "src/schemas/json/").decode().split("\n")
    for path in sorted(n for n in names if n.endswith(".json")):
        try:
            schema = json.loads(git(repo, "show", f"HEAD:{path}"))
        except subprocess.CalledProcessError:  # A snapshot may lack its largest files.
            print(f"{path}: not in the snapshot, left out", file=sys.stderr)
            continue
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            print(f"{path}: not JSON ({e}), left out", file=sys.stderr)
            continue
        yield path.rsplit("/", 1)[1], f"SchemaStore/schemastore@{commit[:12]}:{path}", schema


def references(value, found):
    """Adds the component names `value` references to `found`."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref[len("#/components/schemas/"):])
        for v in value.values():
            references(v, found)
    elif isinstance(value, list):
        for v in value:
            references(v, found)


def rewrite(value):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k == "$ref" and isinstance(v, str) and v.startswith("#/components/schemas/"):
                out[k] = "#/$defs/" + v[len("#/components/schemas/"):]
            else:
                out[k] = rewrite(v)
        return out
    if isinstance(value, list):
        return [rewrite(v) for v in value]
    return value


def openapi_components(repo):
    commit = head(repo)
    components = json.loads(git(repo, "show", "HEAD:openapi.json"))["components"]["schemas"]
    for name in sorted(components):
        needed, todo = set(), [name]
        while todo:
            found = set()
            references(components[todo.pop()], found)
            for ref in sorted(found - needed - {name}):
                if ref in components:
                    needed.add(ref)
                    todo.append(ref)
        schema = rewrite(components[name])
        if needed:
            schema = dict(schema)
            schema["$defs"] = {ref: rewrite(components[ref]) for ref in sorted(needed)}
        yield name, f"openai/openai-openapi@{commit[:12]}:openapi.json#/components/schemas/{name}", schema


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--schemastore", required=True, help="git directory of SchemaStore/schemastore")
    parser.add_argument("--openapi", required=True, help="git directory of openai/openai-openapi")
    parser.add_argument("--out", required=True)
    parser.add_argument("--max_bytes", type=int, default=256 * 1024)
    args = parser.parse_args()
    seen, lines, too_big = set(), [], 0
    for name, source, schema in [*schemastore(args.schemastore), *openapi_components(args.openapi)]:
        compact = json.dumps(schema, separators=(",", ":"), ensure_ascii=False)
        if len(compact.encode()) > args.max_bytes:
            too_big += 1
            continue
        if compact in seen:
            continue
        seen.add(compact)
        lines.append(json.dumps({"name": name, "source": source, "schema": schema}, ensure_ascii=False))
    with lzma.open(args.out, "wt", encoding="utf-8", preset=9) as out:
        out.write("\n".join(lines) + "\n")
    print(f"{len(lines)} schemas written to {args.out}; {too_big} over {args.max_bytes} bytes left out")


if __name__ == "__main__":
    main()
