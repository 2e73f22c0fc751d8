#!/usr/bin/env python3
"""tests/structure/check_layers.py -- the folders are the layers.

Each source folder may include headers from its own layer and the layers
below it, never from a layer above:

    sim (core) <- traces <- models <- engine <- analysis <- cli

Run from anywhere: check_layers.py SOURCE_DIR.  Prints every include that
runs upwards (file:line) and exits 1 if there is one.  Also fails on an
include cycle between the files of one folder, since a circle there hides
an order the layers should make explicit.
"""
import os
import re
import sys

LAYERS = ["sim", "traces", "models", "engine", "analysis", "cli"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path, root):
    rel = os.path.relpath(path, root).split(os.sep)
    return rel[0] if rel[0] in LAYERS else None


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1)


def find_cycle(graph):
    state = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in graph.get(node, ()):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad = []
    graph = {}
    for layer in LAYERS:
        for dirpath, _, files in os.walk(os.path.join(root, layer)):
            for name in sorted(files):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(dirpath, name)
                here = LAYERS.index(layer)
                for line, inc in includes(path):
                    target = os.path.normpath(os.path.join(dirpath, inc))
                    tl = layer_of(target, root)
                    if tl is None:
                        continue
                    if LAYERS.index(tl) > here:
                        bad.append(f"{os.path.relpath(path, root)}:{line}: "
                                   f"includes {inc} ({tl} is above {layer})")
                    if name.endswith(".h") and target.endswith(".h"):
                        graph.setdefault(path, set()).add(target)
    cycle = find_cycle(graph)
    if cycle:
        bad.append("include cycle: " +
                   " -> ".join(os.path.relpath(p, root) for p in cycle))
    for b in bad:
        print(b)
    if bad:
        return 1
    print(f"layers ok: {' <- '.join(LAYERS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
