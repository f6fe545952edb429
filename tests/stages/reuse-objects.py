#!/usr/bin/env python3
"""tests/stages/reuse-objects.py — new-stage.sh's compiler launcher: a copy of the repository reuses
the objects its parent build already compiled from the same sources with the same command.

new-stage.sh builds, in a throwaway copy of the working tree, the emulator, the common libraries,
the harness and one new stage. All but the new stage are the build under test's own objects,
compiled from the same bytes (the copy is that working tree): compiling them again cost 2.5 of the
test's 3 CPU-minutes. So the copy's build runs every C++ compile through this launcher, which
copies the parent build's object when the parent compiled the same output with the same command
(paths of the copy read as the parent's) from a source file of the same bytes, and compiles
otherwise. The new stage's files, which the parent has no command for, are always compiled.

    reuse-objects.py index PARENT_BUILD OUT        the parent's commands by output, as JSON
    reuse-objects.py run INDEX COPY_ROOT COPY_BUILD LOG -- COMPILER ARGS...   (the launcher)

The launcher writes one line per compile to LOG: "reused OBJECT" or "compiled OBJECT (why)".
A reused object gets a depfile naming its source only (Ninja's deps=gcc reads one for every
compile): the copy is built once and thrown away, never rebuilt after an edit.
"""
import filecmp
import json
import os
import shlex
import shutil
import sys


def without_depfile_flags(args):
    """The arguments without Ninja's -MD/-MT x/-MF x (compile_commands.json has none)."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-MT", "-MF", "-MQ"):
            skip = True
        elif a not in ("-MD", "-MMD"):
            out.append(a)
    return out


def value_of(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


def same_source(mine, theirs, copy_root, copy_build, parent):
    """The same bytes; a file the build generated (the emulator's wrappers, which #include sources
    by absolute path) the same once the copy's paths read as the parent's."""
    if filecmp.cmp(mine, theirs, shallow=False):
        return True
    if not os.path.abspath(mine).startswith(copy_build + os.sep):
        return False
    with open(mine, encoding="utf-8", errors="surrogateescape") as f:
        text = f.read().replace(copy_build, parent["build"]).replace(copy_root, parent["root"])
    with open(theirs, encoding="utf-8", errors="surrogateescape") as f:
        return text == f.read()


def index(parent_build, out):
    with open(os.path.join(parent_build, "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    cache = {}
    with open(os.path.join(parent_build, "CMakeCache.txt"), encoding="utf-8") as f:
        for line in f:
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                cache["root"] = line.split("=", 1)[1].strip()
    commands = {}
    for e in entries:
        args = shlex.split(e["command"])
        obj = value_of(args, "-o")
        if obj is None or e["directory"] != os.path.abspath(parent_build):
            continue
        commands[obj] = {"args": args, "file": e["file"]}
    json.dump({"build": os.path.abspath(parent_build), "root": cache["root"],
               "commands": commands}, open(out, "w", encoding="utf-8"))


def run(index_file, copy_root, copy_build, log, argv):
    with open(index_file, encoding="utf-8") as f:
        parent = json.load(f)
    args = without_depfile_flags(argv)
    obj, dep, src = value_of(argv, "-o"), value_of(argv, "-MF"), value_of(argv, "-c")

    def compile_it(why):
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"compiled {obj} ({why})\n")
        os.execvp(argv[0], argv)

    if obj is None or src is None:
        compile_it("not one source to one object")
    known = parent["commands"].get(obj)
    if known is None:
        compile_it("the parent build has no such object")
    # The copy's paths as the parent's: its build tree first (it lies inside the copy).
    mine = [a.replace(copy_build, parent["build"]).replace(copy_root, parent["root"]) for a in args]
    if mine != known["args"]:
        compile_it("the parent compiled it with another command")
    theirs = os.path.join(parent["build"], obj)
    if not os.path.exists(theirs) or not same_source(src, known["file"], copy_root, copy_build,
                                                     parent):
        compile_it("the parent's object is missing or its source differs")
    if os.path.getmtime(theirs) < os.path.getmtime(known["file"]):
        compile_it("the parent's object is older than its source")
    os.makedirs(os.path.dirname(os.path.abspath(obj)) or ".", exist_ok=True)
    shutil.copyfile(theirs, obj)
    if dep:
        with open(dep, "w", encoding="utf-8") as f:
            f.write(f"{obj}: {src}\n")
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"reused {obj}\n")
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "index":
        index(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) > 7 and sys.argv[1] == "run" and sys.argv[6] == "--":
        return run(*sys.argv[2:6], sys.argv[7:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
