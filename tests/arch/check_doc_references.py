#!/usr/bin/env python3
"""Every Markdown file that the repository's files name exists in the repository.

Comments, docs and profiles cite files (`docs/engine.md`); a name of a file that is not here
(a note kept outside the repository, a doc since renamed) sends the reader nowhere. A name is
looked for beside the file that names it, at the repository's root and in docs/; paths of the
installed bundle (share/doc/dljob/...) and the README at the install's doc root are its own.

    check_doc_references.py ROOT
"""
import re
import subprocess
import sys
from pathlib import Path

NAME = re.compile(r"[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b")
BUNDLE = ("share/doc/dljob/",)


def main(root):
    root = Path(root)
    files = subprocess.run(["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"],
                           check=True, capture_output=True, text=True).stdout.split()
    missing = []
    for rel in files:
        path = root / rel
        if not path.is_file() or path.suffix in (".png", ".svg", ".gz", ".datum",
                                                 ".caffemodel", ".binaryproto"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for match in NAME.finditer(line):
                name = match.group(0).lstrip("./")
                if name.startswith(BUNDLE) or "://" in line[max(0, match.start() - 60):match.start()]:
                    continue
                candidates = [path.parent / name, root / name, root / "docs" / name]
                if not any(c.is_file() for c in candidates):
                    missing.append(f"{rel}:{lineno}: names {name}, which is not in the repository")
    for line in missing:
        print(line)
    if missing:
        return 1
    print(f"doc references: {len(files)} files, every .md they name is here")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
