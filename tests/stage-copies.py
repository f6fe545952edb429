#!/usr/bin/env python3
"""tests/stage-copies.py — lists the files a stage folder shares verbatim with another stage folder
and fails on a copy that no test compiles (CTest stages.copies_tested).

    stage-copies.py STAGES_JSON SOURCE_ROOT BUILD_DIR NINJA

A verbatim copy: a file of one stage folder whose text equals that of a file of the same name in
another stage folder once each folder's own name is taken out (a copy's opening comment names its
own path). The stage folders are the stage tree's (STAGES_JSON, which the build writes from the
manifests). A copy counts as tested when an object file of a test binary's own sources (a target
named test_*, not the stage libraries it links) was compiled with it, as Ninja's dependency log
says (`ninja -t deps`): so the check runs on a built tree. Prints the copies, then
"stage-copies: PASS" or, for each untested copy, what tests compile its other copies, and exits 1.
"""
import collections
import json
import os
import re
import subprocess
import sys


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    tree_path, root, build, ninja = argv[1:]
    with open(tree_path, encoding="utf-8") as f:
        tree = json.load(f)
    stages = [(s["name"], s["dir"]) for s in tree["stages"]]

    groups = collections.defaultdict(list)  # (file name, normalized text) -> paths
    for name, rel in stages:
        folder = os.path.join(root, rel)
        for entry in sorted(os.listdir(folder)):
            path = os.path.join(folder, entry)
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                text = f.read().replace(name.encode(), b"@STAGE@")
            groups[(entry, text)].append(os.path.join(rel, entry))
    copies = [paths for paths in groups.values() if len(paths) > 1]

    deps = subprocess.run([ninja, "-C", build, "-t", "deps"], capture_output=True, text=True)
    if deps.returncode != 0:
        print(f"stage-copies: `ninja -t deps` failed in {build}: {deps.stderr.strip()}",
              file=sys.stderr)
        return 1
    compiled_by = collections.defaultdict(set)  # real path of a source or header -> test objects
    obj = None
    for line in deps.stdout.splitlines():
        if line and not line[0].isspace():
            m = re.match(r"(.+?): #deps", line)
            obj = m.group(1) if m and re.search(r"CMakeFiles/test_[^/]*\.dir/", m.group(1)) else None
        elif obj and line.strip():
            dep = os.path.realpath(os.path.join(build, line.strip()))
            compiled_by[dep].add(obj)

    untested = []
    print(f"stage-copies: {len(copies)} file(s) copied verbatim between the stage folders of "
          f"{os.path.basename(tree_path)}")
    for paths in copies:
        print("  " + " = ".join(paths))
        for p in paths:
            objs = compiled_by.get(os.path.realpath(os.path.join(root, p)), set())
            print(f"    {p}: compiled by {len(objs)} test object(s)"
                  + (f": {', '.join(sorted(objs))}" if objs else ""))
            if not objs:
                others = sorted(o for q in paths if q != p
                                for o in compiled_by.get(os.path.realpath(os.path.join(root, q)), ()))
                untested.append(f"{p}: a verbatim copy of {', '.join(q for q in paths if q != p)} "
                                f"that no test compiles (its other copies: "
                                f"{', '.join(others) if others else 'none either'}); compile the "
                                f"test of the file for every stage folder that holds it "
                                f"(flashsteps_stage_file_test, tests/CMakeLists.txt), or build first")
    if untested:
        print("stage-copies: FAIL\n  " + "\n  ".join(untested))
        return 1
    print("stage-copies: PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
