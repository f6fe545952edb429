#!/usr/bin/env bash
# tests/stages/new-stage.sh — a stage is its folder. In a throwaway copy of the repository (its
# tracked and untracked files, committed there as one commit), copies stage 00_scalar's folder as
# stages/00x_copy, gives it its own manifest (PARENT 00_scalar) and its own planted faults, and
# shows that without touching any other file:
#   - configure declares it: the stage tree (stages.json) has it, with its parent, runner,
#     title and faults, and its runner prints the manifest's name and title;
#   - its emulated suite builds, CTest lists it, and it passes a case that runs its kernels (the
#     whole suite on these kernels, 00_scalar's byte for byte, is emu.00_scalar's); its planted
#     fault builds and CTest's entry for it passes (the suite catches it);
#   - README's check fails until its generated blocks are regenerated, and regenerating them adds
#     exactly its two rows (the stage table's and the status table's); the book's generated lists (Part II's pages, the front page's table) and
#     chapter list have it;
#   - git status shows nothing changed outside stages/00x_copy (and README's generated row).
#
#   tests/stages/new-stage.sh WORK PTX_DIR FS_TABLE [PARENT_BUILD]
# PTX_DIR: a build's per-stage PTX hashes (<build>/ptx), so that README's status block, which the
# copy regenerates with its stage table, reads as the committed README's. FS_TABLE: that build's
# table tool, run on the copy (fs_table --source-dir: the copy's stage folders and bench/ files;
# --stage-list: the copy's stage tree), so that the copy does not build it again.
# Builds what it needs in WORK/copy/build (fsemu, the common libraries, one stage's emulated
# suite, one fault). PARENT_BUILD: the build of this working tree that CTest tests; the copy is
# configured with its options and reuses each object it compiled with the same command from the
# same source (tests/stages/reuse-objects.py): only the new stage's files are compiled. Without
# it, everything is compiled: a few minutes on two cores. Exit 0 ok, 1 a check failed.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
usage="usage: tests/stages/new-stage.sh WORK PTX_DIR FS_TABLE [PARENT_BUILD]"
work=${1:?$usage}
ptx=${2:?$usage}
fs_table=${3:?$usage}
parent_build=${4:-}
[[ -d $ptx ]] || { echo "new-stage: no PTX hashes in $ptx (build the ptx_* targets)" >&2; exit 1; }
[[ -x $fs_table ]] || { echo "new-stage: $fs_table is not the built table tool" >&2; exit 1; }
[[ -z $parent_build || -f $parent_build/compile_commands.json ]] ||
  { echo "new-stage: $parent_build is not a build with compile_commands.json" >&2; exit 1; }
fail() { echo "new-stage: FAIL: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work/copy"
work=$(cd "$work" && pwd)
copy=$work/copy
# The working tree as git sees it (committed, staged, and untracked but not ignored), committed.
while IFS= read -r -d '' f; do
  # A tracked file deleted in the working tree is left out, as git add -A would.
  if [[ -e $root/$f || -L $root/$f ]]; then (cd "$root" && cp -P --parents "$f" "$copy"); fi
done < <(git -C "$root" ls-files -z --cached --others --exclude-standard)
git -C "$copy" init -q
git -C "$copy" add -A
git -C "$copy" -c user.name=test -c user.email=test@localhost commit -qm "the repository as it is"

# The tree before the new stage, for README's check below.
cmake -DOUT="$work/stages-before.json" -DROOT="$copy" -P "$copy/stages/stage-tree.cmake"

# The new stage: a copy of its parent's folder, with a manifest and faults of its own.
new=stages/00x_copy
cp -r "$copy/stages/00_scalar" "$copy/$new"
cat >"$copy/$new/stage.cmake" <<'EOF'
flashsteps_stage(
  PARENT 00_scalar
  TITLE "A copy of stage 00"
  TEACHES "nothing new: tests/stages/new-stage.sh's copy of `00_scalar`"
  CHAPTER stages/00x_copy/chapter.md)
EOF
sed -e 's/^flashsteps_fault(00_/flashsteps_fault(00x_/' -e 's/STAGE 00_scalar/STAGE 00x_copy/' \
  "$copy/stages/00_scalar/faults.cmake" >"$copy/$new/faults.cmake"
# Its emulator bands name it, as a folder's bands must (fs_table refuses another stage's).
sed -e 's/^00_scalar /00x_copy /' "$copy/stages/00_scalar/emu-bands.txt" >"$copy/$new/emu-bands.txt"
# Its chapter, in its own folder as its manifest says, with its run box and two exercises.
cat >"$copy/$new/chapter.md" <<'EOF'
# A copy of stage 00 {#stage00x}

\include{doc} run_00x_copy.md

# Exercises {#stage00x_exercises}

\include{doc} exercise_00x_pv_skips_first_key.md

\include{doc} exercise_00x_scale_dropped.md
EOF
[[ -z $(git -C "$copy" status --porcelain -- . ":!$new") ]] ||
  fail "the new stage changed files outside its folder"

# Configure: the stage tree has it. With a parent build, with the parent's options (those the
# presets set), and every C++ compile through reuse-objects.py, which copies the parent's object
# where the parent compiled the same output with the same command from the same bytes. Without
# one, the copy's host code compiles at -O0, not Release's -O3: what it builds proves the folder
# is a stage, and its one small emulated case runs in a second or two either way.
build=$copy/build
options=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=80 "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG")
if [[ -n $parent_build ]]; then
  options=()
  for var in CMAKE_BUILD_TYPE CMAKE_CUDA_ARCHITECTURES FLASHSTEPS_PYTHON FLASHSTEPS_PYTHON_GPU \
    FLASHSTEPS_WATCHDOG_SUITES FLASHSTEPS_EMULATION_SANITIZERS Python_EXECUTABLE; do
    value=$(sed -n "s/^$var:[A-Z]*=//p" "$parent_build/CMakeCache.txt")
    [[ -z $value ]] || options+=("-D$var=$value")
  done
  "$copy/tests/stages/reuse-objects.py" index "$parent_build" "$work/parent-objects.json"
  options+=("-DCMAKE_CXX_COMPILER_LAUNCHER=$copy/tests/stages/reuse-objects.py;run;$work/parent-objects.json;$copy;$build;$work/reuse.log;--")
fi
cmake -S "$copy" -B "$build" -G Ninja "${options[@]}" -DFLASHSTEPS_BUILD_BOOK=OFF \
  >"$work/configure.log" 2>&1 || { tail -20 "$work/configure.log"; fail "configure failed"; }
tree=$build/stages.json
field() { python3 "$copy/bench/stage_tree.py" "$tree" field "$1" 00x_copy | cut -f2; }
[[ $(field parent) == 00_scalar ]] || fail "stages.json: 00x_copy's parent is '$(field parent)'"
[[ $(field runner) == stage00x ]] || fail "stages.json: 00x_copy's runner is '$(field runner)'"
[[ $(field title) == "A copy of stage 00" ]] || fail "stages.json: its title is '$(field title)'"
[[ $(field faults) == "00x_pv_skips_first_key 00x_scale_dropped" ]] ||
  fail "stages.json: its faults are '$(field faults)'"
[[ $(field chapter) == stages/00x_copy/chapter.md ]] || fail "stages.json: chapter '$(field chapter)'"

# Its emulated suite and runner, and one of its faults.
cmake --build "$build" -j"$(nproc)" --target test_emu_00x_copy stage00x_emulated \
  test_fault_00x_scale_dropped >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; fail "building the new stage's emulated suite failed"; }
if [[ -n $parent_build ]]; then
  # Only what the new folder holds is compiled here; the rest is the parent build's, byte for byte.
  ! grep -q "^reused .*00x_copy" "$work/reuse.log" || fail "an object of the new stage was reused"
  grep -q "^compiled .*00x_copy" "$work/reuse.log" || fail "the new stage's files were not compiled"
  echo "new-stage: $(grep -c '^reused' "$work/reuse.log") objects reused from $parent_build," \
    "$(grep -c '^compiled' "$work/reuse.log") compiled (the new stage's and those the parent has not)"
fi
listed=$(cd "$build" && ctest -N -R '^emu\.00x_copy$') || fail "ctest -N failed"
grep -q "emu\.00x_copy\$" <<<"$listed" || fail "CTest does not list its emulated suite emu.00x_copy"
suite=$("$build/tests/test_emu_00x_copy" "a non-default softmax scale" --warn NoAssertions 2>&1) ||
  { echo "$suite"; fail "its emulated suite failed"; }
grep -q "^All tests passed" <<<"$suite" || { echo "$suite"; fail "its emulated suite ran no check"; }
(cd "$build" && ctest -R '^emu\.fault\.00x_scale_dropped$' --output-on-failure) ||
  fail "its planted fault's test failed"
banner=$("$build/stages/emulated/stage00x" --seq 64 2>&1) || fail "its emulated runner failed"
grep -qF "00x_copy — A copy of stage 00" <<<"$banner" || fail "the runner does not show the manifest's name and title"

# README's stage table: stale until regenerated, then it has exactly the new row.
table() { "$fs_table" --source-dir "$copy" "$@"; }
# Without the new stage the check passes; with it, it fails until README is regenerated.
table status "$copy/book/data" --readme "$copy/README.md" --check --ptx "$ptx" \
  --stage-list "$work/stages-before.json" >/dev/null || fail "README's check fails before the new stage"
if table status "$copy/book/data" --readme "$copy/README.md" --check --ptx "$ptx" \
  --stage-list "$tree" >/dev/null 2>&1; then
  fail "README's check passed with a stage its table does not list"
fi
table status "$copy/book/data" --readme "$copy/README.md" --ptx "$ptx" --stage-list "$tree" >/dev/null
# Two generated rows: the stage table's, and the status table's (no run has measured it).
diff=$(git -C "$copy" diff -U0 -- README.md | grep '^[-+][^-+]' || true)
[[ $(grep -c . <<<"$diff") == 2 && $(sed -n 1p <<<"$diff") == "+| 00x | \`stages/00x_copy\` | 00 | nothing new:"* &&
   $(sed -n 2p <<<"$diff") == "+| \`00x_copy\` | not run | not run | - |"*"not yet measured on a GPU"* ]] ||
  fail "regenerating README changed more than the new stage's two rows:"$'\n'"$diff"
# The book's generated lists and its chapter list (the configure of a book build) have it.
table book "$copy/book/data" "$work/generated" --stage-list "$tree" >/dev/null
grep -qF '\subpage stage00x' "$work/generated/stage_pages.md" || fail "Part II's page list lacks it"
grep -qF '`00x_copy` | `00_scalar` | \ref stage00x' "$work/generated/stage_table.md" ||
  fail "the front page's stage table lacks it"
cmake -S "$copy" -B "$build" -DFLASHSTEPS_BUILD_BOOK=ON >"$work/configure-book.log" 2>&1 ||
  { tail -20 "$work/configure-book.log"; fail "configure with the book failed"; }
grep -qF "$copy/$new/chapter.md" "$build/book/Doxyfile" || fail "the book's input lacks its chapter"
# Its chapter is in step with its run box and its faults (book/exercises.cmake, as book.exercises).
cmake -DSTAGE_LIST="$tree" -DCHAPTERS="$copy/book/chapters" -DFAULTS="$copy/emu/faults/faults.cmake" \
  -DGEN_DIR="$work/exercises" -P "$copy/book/exercises.cmake" >"$work/exercises.log" 2>&1 ||
  { tail -20 "$work/exercises.log"; fail "book/exercises.cmake refused its chapter"; }
grep -qF "stage00x --emulate" "$work/exercises/run_00x_copy.md" || fail "its run box is not its own"

# Nothing but the new folder and README's generated row changed.
changed=$(git -C "$copy" status --porcelain | grep -v " $new/\$" | grep -v " README.md\$" || true)
[[ -z $changed ]] || fail "files outside $new changed:"$'\n'"$changed"
echo "new-stage: PASS: stages/00x_copy is a stage: tree, emulated suite, fault, README row, book lists"
