#!/usr/bin/env python3
"""README.md's picture of the virtual tree against the tree tracefs declares: every file and
directory that `tracefs --help` lists (generated from fs/vlayout.c, the one table of the
tree) must be named in README.md's tree block, so the hand-written overview cannot fall
behind the layout; and the trace format version README.md names must be the one `tracefs
--version` writes. TAP output. Stdlib only."""
import argparse
import re
import subprocess
import sys


def help_names(tracefs):
    out = subprocess.run([tracefs, "--help"], capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    start = text.index("The virtual tree of a trace")
    names = set()
    for line in text[start:].splitlines()[1:]:
        if not line.startswith("  ") or line.startswith("  ("):
            continue
        body = line.strip()
        if not line.startswith("    "):  # "<dir> entry, entry": the directory, then entries
            head, _, body = body.partition(" ")
            if head != "/":  # "ranks/<r>/", ".../calls/<name>/" as "calls/<name>/"
                names.add("/".join(head.rstrip("/").split("/")[-2:]) + "/")
            if body.startswith("(the root) "):
                body = body[len("(the root) "):]
        for e in body.split(","):
            e = e.strip().rstrip("*")
            if e:
                names.add(e)
    return names


def readme_block(path):
    text = open(path, encoding="utf-8").read()
    start = text.index("The virtual tree of a trace")
    m = re.search(r"```\n(.*?)```", text[start:], re.S)
    return m.group(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--readme", required=True)
    a = ap.parse_args()
    names = help_names(a.tracefs)
    block = readme_block(a.readme)
    missing = sorted(n for n in names if n not in block)
    out = subprocess.run([a.tracefs, "--version"], capture_output=True, text=True, timeout=60)
    m = re.search(r"trace format (\d+\.\d+)", out.stdout)
    writes = m.group(1) if m else None
    said = re.findall(r"The trace is one file \(format (\d+\.\d+)",
                      open(a.readme, encoding="utf-8").read())
    print("1..3")
    print("%sok 1 - tracefs --help lists %d names of the tree" %
          ("" if len(names) > 20 else "not ", len(names)))
    print("%sok 2 - README.md's tree names every one of them" % ("not " if missing else ""))
    for n in missing:
        print("# missing from README.md: %s" % n)
    same = writes is not None and said == [writes]
    print("%sok 3 - README.md gives the format tracefs writes (%s)" %
          ("" if same else "not ", writes))
    if not same:
        print("# README.md says %s" % (", ".join(said) or "no format"))
    return 1 if missing or len(names) <= 20 or not same else 0


if __name__ == "__main__":
    sys.exit(main())
