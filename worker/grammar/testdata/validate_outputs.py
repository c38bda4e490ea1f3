#!/usr/bin/python3
"""Validates structured-output completions with python-jsonschema, independently of our grammar code.

Input: a JSON file of [{"name", "schema", "outputs": [text, ...]}]. Every text
must parse as JSON and validate against its schema (the draft the schema's
$schema names, else 2020-12), formats checked: jsonschema's own 2020-12
checkers for date, email, uuid and ipv4, and time and date-time by RFC 3339
section 5.6 as written below (jsonschema checks those two only with the
rfc3339-validator package, which Debian does not ship). Prints one line per
failure and a summary; exits 1 if any failed.

    /usr/bin/python3 validate_outputs.py results.json
"""

import datetime
import json
import re
import sys
from importlib import metadata

import jsonschema

CHECKER = jsonschema.draft202012_format_checker

# RFC 3339 full-time: partial-time time-offset.
FULL_TIME = re.compile(r"(\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))")


def check_full_time(value):
    m = FULL_TIME.fullmatch(value)
    if not m:
        raise ValueError(f"{value!r}: not RFC 3339 full-time")
    hour, minute, second = int(m[1]), int(m[2]), int(m[3])
    if hour > 23 or minute > 59 or second > 60:
        raise ValueError(f"{value!r}: time out of range")
    if m[6] is not None and (int(m[6]) > 23 or int(m[7]) > 59):
        raise ValueError(f"{value!r}: offset out of range")


@CHECKER.checks("time", raises=ValueError)
def is_time(value):
    if isinstance(value, str):
        check_full_time(value)
    return True


@CHECKER.checks("date-time", raises=ValueError)
def is_date_time(value):
    if not isinstance(value, str):
        return True
    date, time = value[:10], value[11:]
    if len(value) < 11 or value[10] not in "Tt" or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise ValueError(f"{value!r}: expected RFC 3339 date-time")
    datetime.date.fromisoformat(date)
    check_full_time(time)
    return True


def main():
    with open(sys.argv[1]) as f:
        results = json.load(f)
    total = failed = 0
    formats = set()
    for r in results:
        schema = r["schema"]
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            validator_class.check_schema(schema)
        except jsonschema.exceptions.SchemaError as e:
            # Published schemas are not always valid against their
            # metaschema (OpenAI's lists a property twice in "required");
            # their instances are validated as the schema says all the same.
            print(f"note {r['name']}: the schema breaks its metaschema ({e.message}); validated as published")
        validator = validator_class(schema, format_checker=CHECKER)
        for text in r["outputs"]:
            total += 1
            try:
                value = json.loads(text)
            except json.JSONDecodeError as e:
                failed += 1
                print(f"FAIL {r['name']}: not JSON ({e}): {text!r}")
                continue
            errors = list(validator.iter_errors(value))
            if errors:
                failed += 1
                print(f"FAIL {r['name']}: {errors[0].message} at {list(errors[0].absolute_path)}: {text!r}")
        formats.update(f for f in re.findall(r'"format": "([a-z-]+)"', json.dumps(schema)) if f in CHECKER.checkers)
    print(f"validated {total} outputs of {len(results)} schemas with python-jsonschema "
          f"{metadata.version('jsonschema')} (formats named and checked: "
          f"{', '.join(sorted(formats))}): {total - failed} valid, {failed} invalid")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
