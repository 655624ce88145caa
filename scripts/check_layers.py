#!/usr/bin/env python3
"""check_layers.py — every #include of csrc/ and include/zerotrain/ goes down the layer order.

The order is the table of docs/design.md §2 ("Layers"): one row per layer (a row may name several,
"config, data, app", which are then peers), top to bottom; its last column lists the folders and
files of the layer in backticks. A file belongs to the layer of the longest listed path that
contains it. A file may include headers of its own layer and of the layers above it; an include
of a lower layer is an offending edge. `#include "zerotrain/..."` resolves to include/zerotrain/,
any other quoted include to a path relative to the including file (when that file exists).

Known offending edges waiting for a fix are listed in scripts/layer_exceptions.txt
("<file> -> <included file>", paths from the repository root). A listed edge that no longer
occurs is reported too, so the list shrinks as the fixes land.

Exit 0: clean. Exit 1: offending or stale edges, each printed. Exit 2: the table, a file's layer
or the exceptions file could not be read.
Usage: check_layers.py [--root REPO] [--design PATH] [--exceptions PATH]
"""
import argparse
import os
import re
import sys

SCANNED = ("csrc", "include/zerotrain")
SOURCE_EXT = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


class InputError(Exception):
    pass


def table_rows(design_path):
    """The data rows of the §2 table of design.md, as lists of cells."""
    try:
        text = open(design_path, encoding="utf-8").read()
    except OSError as e:
        raise InputError(f"{design_path}: cannot read the layer table ({e.strerror})")
    section = re.search(r"^## 2\. Layers\n(.*?)(?=^## )", text, re.S | re.M)
    if not section:
        raise InputError(f"{design_path}: expected a section '## 2. Layers' with the layer table")
    rows = []
    for line in section.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 3 and cells[0] not in ("layer", "") and not set(cells[0]) <= set("-: "):
            rows.append(cells)
    return rows


def parse_layers(design_path):
    """[(rank, layer name, path prefix)] from the §2 table of design.md."""
    layers = []
    rows = table_rows(design_path)
    for rank, cells in enumerate(rows):
        paths = [p.rstrip("/") for p in re.findall(r"`([^`]+)`", cells[-1]) if "/" in p or os.path.splitext(p)[1]]
        if not paths:
            raise InputError(f"{design_path}: layer row '{cells[0]}' names no folder or file in backticks")
        layers += [(rank, cells[0], p) for p in paths]
    if len(rows) < 2:
        raise InputError(f"{design_path}: the §2 layer table has {len(rows)} rows, expected at least 2")
    return layers


def layer_of(path, layers):
    best = None
    for rank, name, prefix in layers:
        if path == prefix or path.startswith(prefix + "/"):
            if best is None or len(prefix) > len(best[2]):
                best = (rank, name, prefix)
    return best


def read_exceptions(path):
    """{(file, header)} from lines '<file> -> <header>'; '#' starts a comment."""
    if not os.path.exists(path):
        return {}
    edges = {}
    for n, raw in enumerate(open(path, encoding="utf-8"), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split("->")]
        if len(parts) != 2 or not all(parts):
            raise InputError(f"{path}:{n}: expected '<file> -> <included file>', got '{line}'")
        edges[tuple(parts)] = n
    return edges


def scanned_files(root):
    for top in SCANNED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def includes(root, rel):
    """(line number, included file relative to root) for each resolvable quoted include."""
    here = os.path.dirname(rel)
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            if target.startswith("zerotrain/"):
                yield n, "include/" + target
                continue
            resolved = os.path.normpath(os.path.join(here, target)).replace(os.sep, "/")
            if os.path.isfile(os.path.join(root, resolved)):
                yield n, resolved


def check(root, layers, exceptions):
    """(offending edge lines, unmapped files, exceptions seen)."""
    offending, unmapped, seen = [], [], set()
    for rel in scanned_files(root):
        src = layer_of(rel, layers)
        if src is None:
            unmapped.append(rel)
            continue
        for n, target in includes(root, rel):
            dst = layer_of(target, layers)
            if dst is None:
                unmapped.append(target)
                continue
            if dst[0] <= src[0]:
                continue
            if (rel, target) in exceptions:
                seen.add((rel, target))
                continue
            offending.append(f"{rel}:{n} -> {target} (layer '{src[1]}' includes the lower layer '{dst[1]}')")
    return offending, sorted(set(unmapped)), seen


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.dirname(here))
    ap.add_argument("--design", help="the design doc with the layer table (default ROOT/docs/design.md)")
    ap.add_argument("--exceptions", help="known offending edges (default ROOT/scripts/layer_exceptions.txt)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    try:
        layers = parse_layers(args.design or os.path.join(root, "docs/design.md"))
        exceptions_path = args.exceptions or os.path.join(root, "scripts/layer_exceptions.txt")
        exceptions = read_exceptions(exceptions_path)
        offending, unmapped, seen = check(root, layers, exceptions)
    except InputError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    if unmapped:
        for f in unmapped:
            print(f"check_layers: {f} is in no layer of the docs/design.md §2 table (add its folder there)",
                  file=sys.stderr)
        return 2
    stale = sorted(set(exceptions) - seen)
    for line in offending:
        print(line)
    for file, header in stale:
        print(f"{exceptions_path}:{exceptions[(file, header)]}: '{file} -> {header}' no longer occurs: "
              f"delete this exception")
    if offending or stale:
        print(f"check_layers: {len(offending)} offending include(s), {len(stale)} stale exception(s)",
              file=sys.stderr)
        return 1
    names = []
    for rank, name, _ in layers:
        if name not in names:
            names.append(name)
    print(f"check_layers: clean ({' > '.join(names)}; {len(seen)} listed exception(s))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
