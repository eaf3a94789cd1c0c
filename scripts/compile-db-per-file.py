#!/usr/bin/env python3
"""One compile command per source file, from a build's compile_commands.json.

A unity build (CMAKE_UNITY_BUILD) lists only its batch files (unity_N_cxx.cxx, each including
several sources), so clang-tidy would find no command for a source and guess one. Every source
of a batch is compiled with the batch's flags (CMake leaves a source with flags of its own out of
batches), so each gets the batch's command with its own path. Entries for sources outside any
batch are kept as they are.

    scripts/compile-db-per-file.py BUILD_DIR OUT_DIR    writes OUT_DIR/compile_commands.json
"""
import json
import os
import re
import sys

INCLUDE = re.compile(r'^#include "(.+)"$')


def expand(entries):
    out = []
    for entry in entries:
        batch = entry["file"]
        if not re.search(r"/Unity/unity_\d+_\w+\.\w+$", batch):
            out.append(entry)
            continue
        with open(batch, encoding="utf-8") as f:
            sources = [m.group(1) for m in map(INCLUDE.match, f.read().splitlines()) if m]
        if not sources:
            sys.exit(f"compile-db-per-file: {batch} includes no source")
        for source in sources:
            one = dict(entry, file=source)
            if "command" in one:
                one["command"] = one["command"].replace(batch, source)
            if "arguments" in one:
                one["arguments"] = [source if a == batch else a for a in one["arguments"]]
            out.append(one)
    return out


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(os.path.join(sys.argv[1], "compile_commands.json"), encoding="utf-8") as f:
        entries = json.load(f)
    os.makedirs(sys.argv[2], exist_ok=True)
    target = os.path.join(sys.argv[2], "compile_commands.json")
    with open(target + ".tmp", "w", encoding="utf-8") as f:
        json.dump(expand(entries), f, indent=1)
    os.replace(target + ".tmp", target)


if __name__ == "__main__":
    main()
