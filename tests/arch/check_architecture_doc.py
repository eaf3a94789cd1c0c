#!/usr/bin/env python3
"""docs/architecture.md's include tables say what the code does, both ways.

For dljob's layers (src/dljob/<folder>) the "may include" column of "Who may include whom", and
for the engine's folders (engine/src/<folder>) the "includes" column of "Who includes whom in
the engine", must list exactly the folders the code includes: a folder-level include the table
does not show is an error, and so is one the table shows that no file has.

    check_architecture_doc.py ROOT
"""
import re
import sys
from pathlib import Path

SOURCES = (".cpp", ".hpp", ".cu", ".cuh")


def actual(root, base, pattern):
    folders = {p.name for p in (root / base).iterdir() if p.is_dir()}
    deps = {folder: set() for folder in folders}
    for path in (root / base).rglob("*"):
        if path.suffix not in SOURCES:
            continue
        folder = path.relative_to(root / base).parts[0]
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            match = re.match(pattern, line)
            if match and match.group(1) in folders and match.group(1) != folder:
                deps[folder].add(match.group(1))
    return deps


def documented(text, heading, folders):
    start = text.index(heading)
    table = {}
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 3 or not cells[1].startswith("`"):
            continue
        folder = cells[1].strip("`/")
        if folder not in folders:
            continue
        listed = cells[2].split(";")[0]
        table[folder] = {w for w in re.findall(r"[a-z_]+", listed) if w in folders}
    return table


def compare(name, code, doc, errors):
    for folder in sorted(code):
        if folder not in doc:
            errors.append(f"{name}: folder {folder}/ has no row in docs/architecture.md")
            continue
        for dep in sorted(code[folder] - doc[folder]):
            errors.append(f"{name}: {folder}/ includes {dep}/, which docs/architecture.md "
                          f"does not show")
        for dep in sorted(doc[folder] - code[folder]):
            errors.append(f"{name}: docs/architecture.md shows {folder}/ -> {dep}/, which no "
                          f"file has")


def main(root):
    root = Path(root)
    text = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    errors = []
    dljob = actual(root, "src/dljob", r"#include <dljob/([a-z_]+)/")
    compare("dljob", dljob, documented(text, "### Who may include whom", set(dljob)), errors)
    engine = actual(root, "engine/src", r'#include ["<]([a-z_]+)/')
    compare("engine", engine, documented(text, "### Who includes whom in the engine",
                                         set(engine)), errors)
    for error in errors:
        print(error)
    if errors:
        return 1
    print(f"architecture doc: {len(dljob)} dljob and {len(engine)} engine folders as the code has them")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
