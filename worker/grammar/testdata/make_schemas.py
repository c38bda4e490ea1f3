#!/usr/bin/python3
"""Writes schemas.json (//worker/grammar:schemas, at build time): JSON Schemas of varied features for structured output tests.

Each entry is {"name", "schema", "example"}: `example` is compact JSON text that
the schema accepts, written as the grammar from json_schema.h writes values
(properties in schema order, no blanks), so that the C++ corpus test can check
both that every schema compiles and that the grammar takes a valid value.

The schemas keep generation by a model with random weights finite: strings have a
maxLength of at most 12, an enum, a const, a bounded pattern or a format; arrays
have maxItems; $ref chains end (no recursion); oneOf branches have different
types, so no value matches two of them. Deterministic: seeded, standard library
only (run with Debian's /usr/bin/python3).

    /usr/bin/python3 worker/grammar/testdata/make_schemas.py [output]
"""

import json
import random
import sys

COUNT = 240

# Regexes with a matching string; most are bounded in length.
PATTERNS = [
    (r"^[a-z]{3,8}$", "hello"),
    (r"^[A-Z]{2}-\d{3}$", "AB-123"),
    (r"^\d{3}-\d{4}$", "555-1234"),
    (r"^(red|green|blue)$", "green"),
    (r"^[a-f0-9]{6}$", "a1b2c3"),
    (r"^v\d{1,2}\.\d{1,2}\.\d{1,3}$", "v1.22.333"),
    (r"^\+?[0-9]{7,12}$", "+1234567"),
    (r"^#[0-9A-F]{6}$", "#00FF7A"),
    (r"^(?:[A-Z][a-z]{1,6} ?){1,3}$", "Hello World"),
    (r"^[^\s\"]{1,5}$", "x-y"),
    (r'^say "[a-z]{1,4}"$', 'say "hi"'),
]

FORMATS = {
    "date": "2024-03-15",
    "time": "12:34:56Z",
    "date-time": "2024-03-15T12:34:56.5+02:00",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "email": "user.name@example.com",
    "ipv4": "10.0.0.255",
}

WORDS = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]


class Generator:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def annotate(self, schema):
        if self.r.random() < 0.2:
            schema["description"] = "a " + self.r.choice(WORDS)
        if self.r.random() < 0.1:
            schema["title"] = self.r.choice(WORDS).title()
        return schema

    def string(self):
        kind = self.r.choice(["length", "length", "enum", "pattern", "format", "const"])
        if kind == "length":
            hi = self.r.randint(1, 12)
            lo = self.r.randint(0, hi)
            schema = {"type": "string", "maxLength": hi}
            if lo or self.r.random() < 0.5:
                schema["minLength"] = lo
            return schema, "x" * max(lo, 1) if hi >= 1 else ""
        if kind == "enum":
            values = self.r.sample(WORDS + ["é ü", 'q"uote', "back\\slash", "tab\there"], self.r.randint(1, 4))
            return {"type": "string", "enum": values}, self.r.choice(values)
        if kind == "pattern":
            pattern, example = self.r.choice(PATTERNS)
            return {"type": "string", "pattern": pattern}, example
        if kind == "format":
            name = self.r.choice(sorted(FORMATS))
            return {"type": "string", "format": name}, FORMATS[name]
        value = self.r.choice(WORDS)
        return {"const": value}, value

    def integer(self):
        schema = {"type": "integer"}
        lo = hi = None
        if self.r.random() < 0.7:
            lo = self.r.choice([-1000, -57, -1, 0, 1, 7, 18, 100, 12345])
            key = self.r.choice(["minimum", "exclusiveMinimum"])
            schema[key] = lo
            lo = lo + (key == "exclusiveMinimum")
        if self.r.random() < 0.7:
            hi = (lo if lo is not None else -50) + self.r.choice([0, 1, 9, 99, 1000, 123456])
            key = self.r.choice(["maximum", "exclusiveMaximum"])
            schema[key] = hi + (key == "exclusiveMaximum")
        lo = lo if lo is not None else (hi - 10 if hi is not None else -5)
        hi = hi if hi is not None else lo + 10
        return schema, self.r.randint(lo, hi)

    def number(self):
        kind = self.r.choice(["any", "nonneg", "positive", "range", "nonpos"])
        if kind == "any":
            return {"type": "number"}, self.r.choice([-2.5, 0, 3.25, 1e3])
        if kind == "nonneg":
            return {"type": "number", "minimum": 0}, 0.5
        if kind == "positive":
            return {"type": "number", "exclusiveMinimum": 0}, 0.25
        if kind == "nonpos":
            return {"type": "number", "maximum": 0}, -1.5
        lo = self.r.choice([-10, 0, 1, 5])
        hi = lo + self.r.choice([1, 10, 100])
        return {"type": "number", "minimum": lo, "exclusiveMaximum": hi}, lo + 0.5

    def scalar(self):
        kind = self.r.choice(["string", "string", "integer", "number", "boolean", "null", "enum", "nullable"])
        if kind == "string":
            return self.string()
        if kind == "integer":
            return self.integer()
        if kind == "number":
            return self.number()
        if kind == "boolean":
            return {"type": "boolean"}, self.r.random() < 0.5
        if kind == "null":
            return {"type": "null"}, None
        if kind == "enum":
            values = self.r.sample([1, 2.5, "x", None, True, {"k": [1]}, [0, "a"]], self.r.randint(1, 4))
            return {"enum": values}, self.r.choice(values)
        hi = self.r.randint(1, 8)
        return {"type": ["string", "null"], "maxLength": hi}, self.r.choice([None, "ab"[: hi]])

    def value(self, depth):
        if depth <= 0:
            return self.scalar()
        kind = self.r.choice(["scalar", "scalar", "object", "array", "tuple", "anyOf", "oneOf", "allOf"])
        if kind == "scalar":
            return self.scalar()
        if kind == "object":
            return self.object(depth - 1)
        if kind == "array":
            return self.array(depth - 1)
        if kind == "tuple":
            return self.tuple(depth - 1)
        if kind == "anyOf":
            branches = [self.value(depth - 1) for _ in range(self.r.randint(2, 3))]
            return {"anyOf": [b[0] for b in branches]}, self.r.choice(branches)[1]
        if kind == "oneOf":
            return self.one_of(depth - 1)
        return self.all_of(depth - 1)

    def object(self, depth, extra=True):
        names = self.r.sample(WORDS + ["with space", "ünï", "a/b"], self.r.randint(1, 4))
        properties, example = {}, {}
        required = [n for n in names if self.r.random() < 0.6]
        for name in names:
            schema, value = self.value(depth)
            properties[name] = self.annotate(schema)
            if name in required or self.r.random() < 0.5:
                example[name] = value
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        choice = self.r.random()
        if choice < 0.4:
            schema["additionalProperties"] = False
        elif choice < 0.55 and extra:
            schema["additionalProperties"] = {"type": "integer", "minimum": 0, "maximum": 9}
            # Keys bounded too, or a random model may write one forever.
            schema["propertyNames"] = {"maxLength": 12}
            schema["maxProperties"] = len(properties) + 3
            example["zz-extra"] = 3
        return schema, example

    def array(self, depth):
        item, value = self.value(depth)
        hi = self.r.randint(1, 4)
        lo = self.r.randint(0, hi)
        schema = {"type": "array", "items": item, "maxItems": hi}
        if lo:
            schema["minItems"] = lo
        return schema, [value] * max(lo, 1)

    def tuple(self, depth):
        items = [self.value(depth) for _ in range(self.r.randint(1, 3))]
        schema = {"type": "array", "prefixItems": [i[0] for i in items]}
        example = [i[1] for i in items]
        if self.r.random() < 0.5:
            schema["items"] = False
        else:
            schema["items"] = {"type": "boolean"}
            schema["maxItems"] = len(items) + 2
            example.append(True)
        if self.r.random() < 0.5:
            schema["minItems"] = len(items)
        return schema, example

    def one_of(self, depth):
        makers = [
            lambda: ({"type": "null"}, None),
            lambda: self.integer(),
            lambda: ({"type": "string", "maxLength": 6}, "abc"),
            lambda: ({"type": "boolean"}, False),
            lambda: self.object(depth),
            lambda: self.array(depth),
        ]
        branches = [m() for m in self.r.sample(makers, self.r.randint(2, 3))]
        return {"oneOf": [b[0] for b in branches]}, self.r.choice(branches)[1]

    def all_of(self, depth):
        if self.r.random() < 0.5:
            schema, value = self.value(depth)
            return {"allOf": [schema]}, value
        a, ea = self.object(depth, extra=False)
        b, eb = self.object(depth, extra=False)
        for part in (a, b):
            part.pop("additionalProperties", None)
        for name in list(b["properties"]):
            if name in a["properties"]:
                del b["properties"][name]
                eb.pop(name, None)
                if name in b.get("required", []):
                    b["required"].remove(name)
        if not b.get("required", True):
            del b["required"]
        merged = dict(ea)
        merged.update(eb)
        return {"allOf": [a, b]}, merged

    def with_defs(self, depth):
        """Properties that refer to a chain of definitions, which ends."""
        key = self.r.choice(["$defs", "definitions"])
        chain = self.r.randint(1, 3)
        defs = {}
        leaf, leaf_value = self.value(max(depth - 1, 0))
        defs["leaf"] = leaf
        value = leaf_value
        previous = "leaf"
        for i in range(chain):
            name = "level%d" % i
            defs[name] = {"type": "object", "properties": {"down": {"$ref": "#/%s/%s" % (key, previous)},
                                                           "n": {"type": "integer", "minimum": i}},
                          "required": ["down"], "additionalProperties": False}
            value = {"down": value}
            previous = name
        top, example = self.object(max(depth - 1, 0))
        top["properties"]["chain"] = {"$ref": "#/%s/%s" % (key, previous)}
        top.setdefault("required", []).append("chain")
        example["chain"] = value
        top[key] = defs
        return top, example

    def top(self, index):
        depth = self.r.choice([1, 1, 2, 2, 3])
        kind = index % 6
        if kind == 0:
            return self.with_defs(depth)
        if kind in (1, 2, 3):
            return self.object(depth)
        if kind == 4:
            return self.value(depth)
        return self.array(depth)


def reorder(schema, example):
    """The example with object keys in the schema's order (as the grammar writes them)."""
    if isinstance(example, dict) and isinstance(schema, dict):
        props = schema.get("properties", {})
        for part in schema.get("allOf", []):
            props = dict(props, **part.get("properties", {}))
        ordered = {k: reorder(props[k], example[k]) for k in props if k in example}
        ordered.update({k: v for k, v in example.items() if k not in props})
        return ordered
    return example


def main():
    output = sys.argv[1] if len(sys.argv) > 1 else "schemas.json"
    generator = Generator(31)
    entries = []
    for i in range(COUNT):
        schema, example = generator.top(i)
        entries.append({"name": "schema-%03d" % i, "schema": schema,
                        "example": json.dumps(reorder(schema, example), separators=(",", ":"), ensure_ascii=False)})
    with open(output, "w", encoding="utf-8") as f:
        json.dump(entries, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
