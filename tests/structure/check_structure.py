#!/usr/bin/env python3
"""Checks the code's shape against what docs/ says of it.

Usage: check_structure.py REPO_ROOT CHECK
CHECK is one of:
  architecture  every top-level and second-level folder is named in docs/architecture.md
                (as a backquoted `path/`), and every folder the page names exists
  includes      server/ never includes client/ and the reverse; report/ includes neither;
                no include cycle between the folders of agent/ or of server/
  sizes         no product source file over 600 lines, no function over 120 lines, no class
                with more than 25 methods, and the README at most 150 lines, except what
                docs/development.md lists under "Size exceptions"
Prints what is wrong, one line each, and exits 1; prints a summary and exits 0 when all holds.
"""
import os
import re
import subprocess
import sys

ROOT = sys.argv[1]
CHECK = sys.argv[2]


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    if out.returncode == 0 and out.stdout.strip():
        return [f for f in out.stdout.splitlines() if os.path.exists(os.path.join(ROOT, f))]
    files = []  # not a git checkout (a source tarball): walk the tree
    for d, dirs, names in os.walk(ROOT):
        dirs[:] = [x for x in dirs if not x.startswith(".") and x != "build"]
        files += [os.path.relpath(os.path.join(d, n), ROOT) for n in names]
    return files


def folders(files):
    """Top-level and second-level folders that hold tracked files, as 'a/' and 'a/b/'."""
    out = set()
    for f in files:
        parts = f.split("/")
        if parts[0].startswith("."):
            continue
        if len(parts) > 1:
            out.add(parts[0] + "/")
        if len(parts) > 2:
            out.add(parts[0] + "/" + parts[1] + "/")
    return out


def check_architecture(files):
    page = open(os.path.join(ROOT, "docs/architecture.md")).read()
    named = set(re.findall(r"`([a-z_][a-z0-9_\-]*/(?:[a-z0-9_\-]+/)?)`", page))
    exist = folders(files)
    problems = [f"folder {d} exists but docs/architecture.md does not name it (as `{d}`)"
                for d in sorted(exist - named)]
    problems += [f"docs/architecture.md names `{d}`, which does not exist" for d in sorted(named - exist)]
    return problems, f"{len(exist)} folders named"


INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
FORBIDDEN = {"server": ("client/",), "client": ("server/",), "report": ("client/", "server/", "agent/")}


def check_includes(files):
    problems = []
    edges = {}  # (component, folder) -> set of folders it includes
    for f in files:
        if not f.endswith((".cc", ".h", ".cpp", ".hpp")):
            continue
        top = f.split("/")[0]
        text = open(os.path.join(ROOT, f), errors="replace").read()
        for inc in INCLUDE.findall(text):
            for bad in FORBIDDEN.get(top, ()):
                if inc.startswith(bad):
                    problems.append(f"{f} includes {inc}: {top}/ must not include {bad}")
            # A thin main is the assembly's root, above every folder it wires.
            if top in ("agent", "server") and inc.startswith(top + "/") and not f.endswith("/main.cc"):
                src = os.path.dirname(f)
                dst = os.path.dirname(inc)
                if src != dst:
                    edges.setdefault(src, set()).add(dst)
    # Cycles between folders (Tarjan would do; the graphs are tiny, so a DFS per node).
    def reaches(a, b, seen):
        for n in edges.get(a, ()):
            if n == b:
                return True
            if n not in seen:
                seen.add(n)
                if reaches(n, b, seen):
                    return True
        return False
    for src in sorted(edges):
        for dst in sorted(edges[src]):
            if src < dst and reaches(dst, src, {dst}):
                problems.append(f"include cycle between folders {src}/ and {dst}/")
    return problems, f"{sum(len(v) for v in edges.values())} folder include edges, no cycle"


FUNCTION_START = re.compile(r"^(?:[A-Za-z_][\w:<>,\s\*&]*\s+)?([~\w:]+)\(")


def long_functions(path, limit):
    """Functions defined at column 0 (namespace scope, Google style) longer than `limit` lines."""
    lines = open(path, errors="replace").read().split("\n")
    found, i = [], 0
    while i < len(lines):
        m = FUNCTION_START.match(lines[i])
        if m and not lines[i].rstrip().endswith(";") and not lines[i].startswith(("#", "//")):
            depth, started, j = 0, False, i
            while j < len(lines):
                code = lines[j].split("//")[0]
                depth += code.count("{") - code.count("}")
                started = started or "{" in code
                if (started and depth == 0) or (not started and code.rstrip().endswith(";")):
                    break
                j += 1
            if started and j - i + 1 > limit:
                found.append((m.group(1), j - i + 1))
            i = j
        i += 1
    return found


METHOD = re.compile(r"^  (?! |//|using |friend |return |typedef |enum |struct |class |public:|private:|protected:)"
                    r"(?:[\w:<>,\*& ]+?\s)?(~?[A-Za-z_]\w*|operator\S+)\((?!.*\)\s*\{\s*\}\s*;)")


def class_methods(path):
    """(class, methods) for each class defined at column 0 of a header."""
    out, current, count = [], None, 0
    for line in open(path, errors="replace"):
        m = re.match(r"^class (\w+)(?: final)?\b[^;]*$", line)
        if m:
            current, count = m.group(1), 0
        elif current and line.startswith("};"):
            out.append((current, count))
            current = None
        elif current and METHOD.match(line) and "=" not in line.split("(")[0]:
            if not re.fullmatch(r"[A-Z_]+", METHOD.match(line).group(1)):  # not a macro (ABSL_GUARDED_BY)
                count += 1
    return out


def check_sizes(files):
    dev = open(os.path.join(ROOT, "docs/development.md")).read()
    m = re.search(r"### Size exceptions\n(.*?)(?:\n#|\Z)", dev, re.S)
    # One exception per bullet: "- `path` (N lines): why".
    excepted = set(re.findall(r"^- `([^`]+\.(?:cc|h|md))`", m.group(1), re.M)) if m else set()
    # "- `path` `Name`": a function or class listed by name.
    named = set(re.findall(r"^- `([^`]+)` `([^`]+)`", m.group(1), re.M)) if m else set()
    excepted -= {path for path, _ in named}
    problems = []
    needed = set()  # the exceptions something still needs; the others are stale
    product = ("agent/", "server/", "client/", "report/", "common/")
    for f in files:
        if not (f.startswith(product) and f.endswith((".cc", ".h"))):
            continue
        for name, n in long_functions(os.path.join(ROOT, f), 120):
            needed.add((f, name))
            if (f, name) not in named:
                problems.append(f"{f}: {name} is {n} lines (> 120): cut it into steps, or list it as "
                                f"- `{f}` `{name}` with its reason under 'Size exceptions' in docs/development.md")
        if f.endswith(".h"):
            for name, n in class_methods(os.path.join(ROOT, f)):
                if n > 25:
                    needed.add((f, name))
                if n > 25 and (f, name) not in named:
                    problems.append(f"{f}: class {name} has {n} methods (> 25): split it into parts, or list "
                                    "it under 'Size exceptions' in docs/development.md")
        n = sum(1 for _ in open(os.path.join(ROOT, f), errors="replace"))
        if n > 600:
            needed.add(f)
        if n > 600 and f not in excepted:
            problems.append(f"{f}: {n} lines (> 600): split it, or list it with its reason under "
                            "'Size exceptions' in docs/development.md")
    n = sum(1 for _ in open(os.path.join(ROOT, "README.md")))
    if n > 150 and "README.md" not in excepted:
        problems.append(f"README.md: {n} lines (> 150): the manual belongs in docs/")
    if n > 150:
        needed.add("README.md")
    for f in sorted(excepted):
        if not os.path.exists(os.path.join(ROOT, f)):
            problems.append(f"docs/development.md excepts {f}, which does not exist")
        elif f not in needed:
            problems.append(f"docs/development.md excepts {f}, which is within the limits now: remove the exception")
    for f, name in sorted(named):
        if not os.path.exists(os.path.join(ROOT, f)):
            problems.append(f"docs/development.md excepts {name} in {f}, which does not exist")
        elif (f, name) not in needed:
            problems.append(f"docs/development.md excepts {name} in {f}, which is within the limits now: "
                            "remove the exception")
    return problems, f"sizes within limits ({len(excepted) + len(named)} listed exceptions)"


def main():
    files = tracked_files()
    checks = {"architecture": check_architecture, "includes": check_includes, "sizes": check_sizes}
    if CHECK not in checks:
        print(f"unknown check '{CHECK}'; use one of: {', '.join(checks)}")
        return 2
    problems, summary = checks[CHECK](files)
    for p in problems:
        print(p)
    if problems:
        return 1
    print(f"{CHECK}: ok: {summary}")
    return 0


sys.exit(main())
