#!/usr/bin/env python3
"""emu/tests/one_way.py — CTest emu.src.one_way: no two translation units of emu/src call each other.

    emu/tests/one_way.py <nm> <libfsemu.a>

A file "calls" another when its object refers to a symbol (a function or a variable) the other's
object defines. The calls must go one way (emu/README.md, "The files"): the scheduler publishes
events and knows nothing of the models that observe them. Prints every file's calls, then each
group of files that call each other, directly or around a circle, and fails if there is one.
"""
import collections
import re
import subprocess
import sys


def calls(nm, library):
    """{caller: {callee: {symbol}}} between the objects of `library`."""
    out = subprocess.run([nm, "-A", "-C", library], capture_output=True, text=True, check=True)
    defined, used = {}, collections.defaultdict(set)
    for line in out.stdout.splitlines():
        # "<library>:<object>: [address] <type> <symbol>"
        m = re.match(r"^.*?:([^:/]+\.o):\s*[0-9a-fA-F]*\s+([A-Za-z])\s+(.+)$", line)
        if not m:
            continue
        obj, kind, symbol = m.groups()
        obj = obj[:-2]  # scheduler.cpp.o -> scheduler.cpp
        if kind in "TDBR":  # a strong definition (code, data, zeroed data, read-only)
            defined.setdefault(symbol, obj)
        elif kind == "U":
            used[obj].add(symbol)
    graph = collections.defaultdict(lambda: collections.defaultdict(set))
    for obj, symbols in used.items():
        for symbol in symbols:
            callee = defined.get(symbol)
            if callee and callee != obj:
                graph[obj][callee].add(re.sub(r"\(.*", "", symbol))
    return graph


def circles(graph):
    """The groups of files that reach each other (Tarjan's strongly connected components)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    graph = calls(sys.argv[1], sys.argv[2])
    for caller in sorted(graph):
        for callee in sorted(graph[caller]):
            print(f"{caller} -> {callee}: {', '.join(sorted(graph[caller][callee]))}")
    groups = circles(graph)
    for group in groups:
        print(f"one_way.py: these files call each other: {' '.join(group)}", file=sys.stderr)
        for a in group:
            for b in group:
                if b in graph.get(a, {}):
                    print(f"  {a} -> {b}: {', '.join(sorted(graph[a][b]))}", file=sys.stderr)
    if not groups:
        print("every call between the files of emu/src goes one way")
    return 1 if groups else 0


if __name__ == "__main__":
    sys.exit(main())
