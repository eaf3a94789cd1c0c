#!/usr/bin/env python3
"""The translation units clang-tidy reads for our sources, from a build's compile database.

    scripts/tidy-units.py BUILD_DIR FILE...

Prints, one per line, the compile database entry (its file) that compiles each FILE: the file
itself, or in a unity build (CMAKE_UNITY_BUILD) the batch (unity_N_cxx.cxx) that includes it,
each once. A batch is linted whole, so the headers every file of it includes are parsed once, not
once per file: clang-tidy over the batches took a third of its time over the files one by one
(docs/benchmarks.md, "CI time"); what it reports inside an included .cpp file is reported with
that file's name and line. Only batches made entirely of FILEs are used. Fails when a FILE is
compiled by no entry (a source the build does not know would go unlinted).
"""
import json
import os
import re
import sys

BATCH = re.compile(r"/Unity/unity_\d+_\w+\.\w+$")


def included(batch):
    with open(batch, encoding="utf-8") as f:
        return [line.split('"')[1] for line in f if line.startswith("#include \"")]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    with open(os.path.join(sys.argv[1], "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    wanted = {os.path.realpath(p) for p in sys.argv[2:]}
    units, covered = [], set()
    for entry in entries:
        name = entry["file"]
        sources = [os.path.realpath(s) for s in included(name)] if BATCH.search(name) else [
            os.path.realpath(os.path.join(entry.get("directory", ""), name))]
        if sources and all(s in wanted for s in sources) and name not in units:
            units.append(name)
            covered.update(sources)
    missing = sorted(wanted - covered)
    if missing:
        sys.exit("tidy-units: not compiled by this build: " + " ".join(missing))
    print("\n".join(units))


if __name__ == "__main__":
    main()
