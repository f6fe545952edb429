#!/usr/bin/env python3
"""bench/stage_tree.py — the stage tree as the build wrote it (<build>/stages.json), for scripts.

The tree is declared once, by each stage folder's manifest (stages/<name>/stage.cmake); the build
writes it to stages.json (a bundle carries that file). Every script reads a stage's name, runner,
parent, ancestors, architectures and watchdog from there through this module, never from the shape
of a name.

    stage_tree.py TREE names [WORD ...]          the stages (then the baselines) WORDs pick
    stage_tree.py TREE field FIELDS [WORD ...]    "<name>\\t<field>..." for each; FIELDS is a comma
                                                  list of: runner, parent, dir, archs (space-
                                                  separated; empty: every architecture of the
                                                  build), watchdog (yes/no), measured_as, role
                                                  (stage or baseline), kind (forward or backward),
                                                  number, title, teaches, chapter, anchor, faults,
                                                  part (the book's part: forward, backward, ...)
    stage_tree.py TREE ancestors NAME [FIELDS]    NAME's parent, its parent, ... to the first stage,
                                                  nearest first (with FIELDS as for field)

A WORD picks by name or by number: a whole name (`07d_overlap`, `baseline_cublas`), a stage's
number with its letter (`06a`), a number without one (`07`: 07a to 07d), or a name the stage
was measured under (`07_hopper`: MEASURED_AS). No WORD picks every stage and baseline. A WORD that
picks nothing is an error that lists what exists (exit 2).
"""
import json
import re
import sys


class TreeError(Exception):
    """Bad input: a missing or malformed tree, or a WORD that picks nothing."""


def load(path):
    """The tree of a stages.json: {"stages": [...], "baselines": [...]}, each entry a dict with
    name, dir, runner (and, for stages, parent and the optional keys)."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = json.load(f)
    except OSError as e:
        raise TreeError(f"cannot read the stage tree {path}: {e.strerror}") from None
    except ValueError as e:
        raise TreeError(f"{path} is not the stage tree the build writes (stages.json): {e}") from None
    for key in ("stages", "baselines"):
        if not isinstance(tree.get(key), list):
            raise TreeError(f"{path} has no \"{key}\" list: not the stages.json the build writes")
        for entry in tree[key]:
            for field in ("name", "runner"):
                if not isinstance(entry.get(field), str):
                    raise TreeError(f"{path}: an entry of \"{key}\" has no {field}")
    return tree


def entries(tree):
    """Every stage, in tree order, then every baseline; each with "role" set (stage or
    baseline; "kind" is the manifest's: forward or backward)."""
    out = []
    for key, role in (("stages", "stage"), ("baselines", "baseline")):
        for e in tree[key]:
            out.append(dict(e, role=role))
    return out


def number(name):
    """A stage's number with its letter ("06a" of 06a_mma_sync); None for a baseline's name."""
    m = re.match(r"^([0-9]+[a-z]?)_", name)
    return m.group(1) if m else None


def picks(word, entry):
    """Does WORD pick this entry (see the module's text)?"""
    name = entry["name"]
    if word in (name, entry.get("measured_as")):
        return True
    nn = number(name)
    if nn is None:
        return name.startswith(word + "_") or name.split("_")[0] == word
    return nn == word or (word.isdigit() and re.fullmatch(word + r"[a-z]?", nn) is not None)


def select(tree, words=()):
    """The entries WORDs pick, in tree order (stages, then baselines); every entry without WORDs.
    Raises TreeError naming a WORD that picks nothing."""
    every = entries(tree)
    words = [w for w in words for w in w.replace(",", " ").split()]
    if not words:
        return every
    for w in words:
        if not any(picks(w, e) for e in every):
            known = " ".join(e["name"] for e in every)
            raise TreeError(f"'{w}' names no stage or baseline of the tree (a name, a number such "
                            f"as 06a or 07, or a MEASURED_AS name; the tree has: {known})")
    return [e for e in every if any(picks(w, e) for w in words)]


def by_name(tree):
    return {e["name"]: e for e in entries(tree)}


def ancestors(tree, name):
    """NAME's parent, grandparent, ... up to the first stage: the walk the build made once
    ("ancestors" in stages.json, nearest first)."""
    index = by_name(tree)
    if name not in index:
        raise TreeError(f"no stage {name} in the tree")
    return list(index[name].get("ancestors", []))


def nearest_ancestor(tree, name, accept):
    """The first of NAME's ancestors for which accept(entry) holds, or None."""
    index = by_name(tree)
    for a in ancestors(tree, name):
        if accept(index[a]):
            return index[a]
    return None


def field(entry, key):
    """One field as text, for the command line."""
    if key in ("archs", "faults"):
        return " ".join(entry.get(key, []))
    if key == "watchdog":
        return "yes" if entry.get("watchdog") else "no"
    value = entry.get(key)
    return "" if value is None else str(value)


FIELDS = ("runner", "parent", "dir", "archs", "watchdog", "measured_as", "role", "kind", "number",
          "title", "teaches", "chapter", "anchor", "faults", "part")


def main(argv):
    if len(argv) < 3 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) > 1 and argv[1] in ("-h", "--help") else 2
    try:
        tree = load(argv[1])
        cmd, rest = argv[2], argv[3:]
        if cmd == "names":
            for e in select(tree, rest):
                print(e["name"])
        elif cmd == "field":
            keys = rest[0].split(",") if rest else []
            if not keys or any(k not in FIELDS for k in keys):
                raise TreeError(f"field takes a comma list of: {' '.join(FIELDS)}")
            for e in select(tree, rest[1:]):
                print("\t".join([e["name"]] + [field(e, k) for k in keys]))
        elif cmd == "ancestors":
            if len(rest) not in (1, 2):
                raise TreeError("ancestors takes one stage name and optionally FIELDS")
            keys = rest[1].split(",") if len(rest) == 2 else []
            if any(k not in FIELDS for k in keys):
                raise TreeError(f"FIELDS is a comma list of: {' '.join(FIELDS)}")
            index = by_name(tree)
            for a in ancestors(tree, rest[0]):
                print("\t".join([a] + [field(index[a], k) for k in keys]))
        else:
            raise TreeError(f"unknown command '{cmd}' (names, field, ancestors; see --help)")
    except TreeError as e:
        print(f"stage_tree.py: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
