#!/usr/bin/env python3
"""Validates JSON documents against a JSON Schema (Debian's python3-jsonschema).

usage: validate_json.py SCHEMA.json DOCUMENT.json...
"""
import json
import sys

import jsonschema


def main():
    schema = json.load(open(sys.argv[1]))
    validator = jsonschema.Draft202012Validator(schema)
    bad = 0
    for path in sys.argv[2:]:
        errors = sorted(validator.iter_errors(json.load(open(path))), key=lambda e: list(e.path))
        for e in errors:
            print(f"{path}: {'/'.join(map(str, e.path)) or '(top)'}: {e.message}")
        bad += bool(errors)
        if not errors:
            print(f"{path}: valid against {schema.get('$id', sys.argv[1])}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
