"""The tree against its declaration: `tracefs --help` draws, per kind of directory, the entries
the layout declares (fs/vlayout.c); every entry of a built tree must be declared for the kind
of directory it is in, and every entry declared without a condition (no *) must be in every
directory of that kind. Used by check_cli.py on the synthetic traces.
"""
import re
import subprocess

HEAD = b"The virtual tree of a trace"
# the kinds of directory, as --help names them, and the entries that lead into one
KINDS = {b"/ (the root)": "root", b"ranks/<r>/": "rank", b".../threads/<t>/": "thread",
         b"ranks/<r>/phases/<name>/": "phase", b".../calls/<name>/": "calls",
         b".../window/<from>-<to>/": "window", b"replay/": "replay"}
INTO = {b"ranks/": "rank", b"threads/": "thread", b"phases/": "phase", b"calls/": "calls",
        b"window/": "window"}


def declared(tracefs):
    """{kind: {entry: conditional}} from `tracefs --help`, or None if it draws no tree."""
    out = subprocess.run([tracefs, "--help"], capture_output=True, timeout=60).stdout
    if HEAD not in out:
        return None
    lines = out.split(HEAD, 1)[1].splitlines()[1:]
    decl, kind, text = {}, None, b""
    for line in lines + [b""]:
        if line.startswith(b"    ") and kind:
            text += b" " + line.strip()
            continue
        if kind:
            decl[kind] = {e.rstrip(b"*"): e.endswith(b"*")
                          for e in re.split(rb",\s*", text.strip()) if e}
            kind = None
        for name, k in KINDS.items():
            if line.startswith(b"  " + name + b" "):
                kind, text = k, line[2 + len(name):]
    return decl


def built(files):
    """{(kind, directory): set of entries} of the tree whose files are @files (paths)."""
    dirs = {}
    for path in files:
        comps = path.split(b"/")
        kind, at, i = "root", b"", 0
        while i < len(comps):
            last = i == len(comps) - 1
            entry = comps[i] if last else comps[i] + b"/"
            dirs.setdefault((kind, at), set()).add(entry)
            if entry == b"trace.json.d/":
                break   # its parts are the entry's own
            if entry == b"replay/":
                kind, at, i = "replay", at + entry, i + 1
            elif entry in INTO and not last:
                kind, at = INTO[entry], at + entry + comps[i + 1] + b"/"
                if kind == "rank":
                    at = b"ranks/" + comps[i + 1] + b"/"
                i += 2
            else:
                at, i = at + entry, i + 1
    return dirs


def check_layout(tap, tracefs, files):
    """Every built entry declared for its kind of directory; every unconditional one there."""
    decl = declared(tracefs)
    if not tap.ok(decl is not None and set(decl) == set(KINDS.values()),
                  "tracefs --help draws the tree per kind of directory", decl):
        return
    dirs = built(files)
    extra = sorted((d.decode(), e.decode()) for (k, d), es in dirs.items() for e in es
                   if e not in decl[k])
    tap.ok(not extra, "every entry of the tree is declared for its kind of directory "
           "(%d directories)" % len(dirs), extra[:10])
    missing = sorted((d.decode(), e.decode()) for (k, d), es in dirs.items()
                     for e, cond in decl[k].items() if not cond and e not in es)
    tap.ok(not missing, "every entry declared without a condition is in every directory of "
           "its kind", missing[:10])
