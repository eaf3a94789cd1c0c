#!/usr/bin/env python3
"""Enforces the include rules in include_rules.txt over the source tree.

    check_includes.py ROOT            exit 1 and list every violation, exit 0 when clean
    check_includes.py --self-test     proves each kind of rule catches a violation
"""
import fnmatch
import os
import re
import sys
import tempfile

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')
SCANNED_DIRS = ("src", "engine", "bench")
EXTENSIONS = (".c", ".cc", ".cpp", ".h", ".hh", ".hpp", ".cu", ".cuh")


def load_rules(path):
    only, deny = [], []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split() if not line.lstrip().startswith("#") else []
            if not words:
                continue
            kind = words[0]
            if kind == "only" and len(words) >= 3:
                only.append((re.compile(words[1]), words[2:], lineno))
            elif kind == "deny" and len(words) >= 3:
                deny.append((words[1], re.compile(words[2]), " ".join(words[3:]), lineno))
            else:
                raise SystemExit(f"{path}:{lineno}: cannot read rule: {line.rstrip()}")
    return only, deny


def source_files(root):
    for top in SCANNED_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    full = os.path.join(dirpath, name)
                    yield os.path.relpath(full, root).replace(os.sep, "/"), full


def check(root, rules_path):
    only, deny = load_rules(rules_path)
    violations = []
    for rel, full in source_files(root):
        with open(full, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = m.group(1)
                for pattern, allowed, rule_line in only:
                    if pattern.search(header) and not any(fnmatch.fnmatch(rel, g) for g in allowed):
                        violations.append(
                            f"{rel}:{lineno}: includes <{header}>, allowed only in "
                            f"{' '.join(allowed)} (rule at include_rules.txt:{rule_line})")
                for glob, pattern, why, rule_line in deny:
                    if fnmatch.fnmatch(rel, glob) and pattern.search(header):
                        violations.append(
                            f"{rel}:{lineno}: includes <{header}>: {why} "
                            f"(rule at include_rules.txt:{rule_line})")
    return violations


def self_test(rules_path):
    """Each case plants one file in an empty tree; the checker must flag exactly the bad ones."""
    cases = [
        ("src/dljob/app/jobs/submit.cpp", "#include <sqlite3.h>", True),
        ("src/dljob/adapters/sqlite_db.cpp", "#include <sqlite3.h>", False),
        ("src/dljob/adapters/other.cpp", "#include <archive.h>", True),
        ("src/dljob/config/recipe.cpp", '#include "yaml-cpp/yaml.h"', True),
        ("src/dljob/app/reports/status.cpp", "#include <boost/process.hpp>", True),
        ("src/dljob/app/data/fetch.cpp", "  #  include <curl/curl.h>", True),
        ("src/dljob/app/x.cpp", "#include <CLI/CLI.hpp>", True),
        ("engine/src/cpu/conv.cpp", "#include <cudnn.h>", True),
        ("engine/src/cuda/conv.cu", "#include <cudnn.h>", False),
        ("engine/include/dl/tensor.hpp", "#include <cuda_runtime.h>", True),
        ("src/dljob/app/train.cpp", "#include <dl/net.hpp>", True),
        ("engine/src/net/net.cpp", "#include <dljob/domain/error.hpp>", True),
        ("src/dljob/domain/job.hpp", "#include <dljob/adapters/sqlite_db.hpp>", True),
        ("src/dljob/domain/job.hpp", "#include <dljob/domain/error.hpp>", False),
        ("src/dljob/app/jobs/submit.cpp", "#include <dljob/cli/cli.hpp>", True),
        ("src/dljob/cli/command_submit.cpp", "#include <dljob/app/jobs/submit.hpp>", False),
        ("src/dljob/schedulers/slurm.cpp", "#include <dljob/adapters/process_boost.hpp>", True),
        ("src/dljob/schedulers/slurm.cpp", "#include <dljob/render/job_script.hpp>", True),
        ("src/dljob/render/job_script.cpp", "#include <dljob/schedulers/family.hpp>", False),
        ("engine/src/net/net.cpp", "#include <dlfcn.h>", True),
        ("engine/src/backends/cuda_loader.cpp", "#include <dlfcn.h>", False),
        ("src/dljob/app/data/pack.cpp", "#include <zstd.h>", True),
        ("engine/src/data/pack_reader.cpp", "#include <zstd.h>", True),
        ("src/dljob/adapters/compress_zstd.cpp", "#include <zstd.h>", False),
        ("engine/src/data/pack_zstd.cpp", "#include <zstd.h>", False),
        ("engine/src/train/train.cpp", '#include "cuda/cuda_backend.hpp"', True),
        ("engine/src/backends/cuda_loader.hpp", '#include "cuda/cuda_plugin.hpp"', False),
        ("engine/src/parallel/communicator.cpp", "#include <gloo/context.h>", True),
        ("engine/src/parallel/communicator.cpp", '#include "gloo/gloo_plugin.hpp"', False),
        ("engine/src/gloo/gloo_communicator.cpp", "#include <gloo/context.h>", False),
        ("engine/src/train/train.cpp", '#include "gloo/gloo_plugin.hpp"', True),
        ("src/dljob/app/data/stage_read.cpp", "#include <csetjmp>", True),
        ("src/dljob/adapters/filesystem_posix.cpp", "#include <csetjmp>", False),
    ]
    failures = []
    for rel, line, expect_violation in cases:
        with tempfile.TemporaryDirectory() as root:
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path))
            with open(path, "w", encoding="utf-8") as f:
                f.write("// planted by the self-test\n" + line + "\n")
            found = check(root, rules_path)
            if bool(found) != expect_violation:
                failures.append(f"{rel} with '{line}': expected "
                                f"{'a violation' if expect_violation else 'no violation'}, "
                                f"got {found or 'none'}")
    for f in failures:
        print("self-test FAILED:", f)
    print(f"{len(cases) - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    rules = os.path.join(here, "include_rules.txt")
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test(rules)
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    violations = check(argv[1], rules)
    for v in violations:
        print(v)
    print(f"include rules: {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
