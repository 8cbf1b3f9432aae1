#!/usr/bin/env python3
"""speedscope loads what tracefs writes: profile.speedscope.json and trace.json of a test
trace, in headless Chromium, without an import warning or error.

Needs Debian's chromium and the npm packages speedscope and playwright-core (.ci/setup
installs them into ~/.cache/tracefs-viewers; TFS_VIEWERS_DIR names another directory that
holds node_modules/). Without them every case is reported skipped, with the reason. The
screenshots speedscope made are left in --shots (the build directory by default), to look
at. Chromium's own console messages (GL driver notes) are not speedscope's and are ignored.

  check_viewers.py --tracefs T --demo D [--shots DIR] [--events N]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "helpers"))
from tap import Tap  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = "/usr/bin/chromium"


def viewers_dir():
    d = os.environ.get("TFS_VIEWERS_DIR") or os.path.expanduser("~/.cache/tracefs-viewers")
    return os.path.join(d, "node_modules")


def missing():
    """Why the viewers cannot run here, or None."""
    mods = viewers_dir()
    if not os.access(CHROMIUM, os.X_OK):
        return "no %s (apt-get install chromium)" % CHROMIUM
    if not shutil.which("node"):
        return "no node"
    for m in ("speedscope", "playwright-core"):
        if not os.path.isdir(os.path.join(mods, m)):
            return "no %s in %s (npm install %s)" % (m, mods, m)
    return None


def run(cmd, env=None, timeout=1200):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def speedscope_warnings(msgs):
    return [m for m in msgs if "GL Driver Message" not in m]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tracefs", required=True)
    ap.add_argument("--demo", required=True)
    ap.add_argument("--shots", default=os.getcwd())
    ap.add_argument("--events", type=int, default=60000)
    args = ap.parse_args()
    tap = Tap()
    cases = ["ranks/0/profile.speedscope.json", "ranks/0/trace.json",
             "ranks/0/threads/0/trace.json"]
    why = missing()
    if why:
        for c in cases:
            tap.skip("speedscope loads %s" % c, why)
        return tap.done()
    work = tempfile.mkdtemp(prefix="tfs-viewers-")
    try:
        trace = os.path.join(work, "v.trace")
        rc, _, err = run([args.demo, "-o", trace, "--events", str(args.events), "--ranks", "2",
                          "--threads", "2", "--end-order"])
        if not tap.ok(rc == 0, "synth_demo writes the trace", err):
            return tap.done()
        files = []
        for c in cases:
            f = os.path.join(work, c.replace("/", "_"))
            rc, out, err = run([args.tracefs, "cat", trace, c])
            if not tap.ok(rc == 0 and out, "tracefs cat %s" % c, err.decode(errors="replace")):
                return tap.done()
            with open(f, "wb") as fp:
                fp.write(out)
            files.append(f)
        os.makedirs(args.shots, exist_ok=True)
        env = dict(os.environ, NODE_PATH=viewers_dir())
        rc, out, err = run(["node", os.path.join(HERE, "load_speedscope.cjs"),
                            os.path.join(viewers_dir(), "speedscope", "dist", "release"),
                            CHROMIUM, args.shots] + files, env=env)
        results = {}
        for line in out.decode().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue
            results[r["file"]] = r
        for c, f in zip(cases, files):
            r = results.get(f)
            if r is None:
                tap.ok(False, "speedscope loads %s" % c, err.decode(errors="replace")[-2000:])
                continue
            warn = speedscope_warnings(r["warnings"])
            tap.ok(r["ok"] and not warn and not r["errors"] and r["title"],
                   "speedscope loads %s (%d bytes) in %d ms, titled %r, no import warning; "
                   "screenshot %s.png" % (c, os.path.getsize(f), r["ms"], r["title"],
                                          os.path.join(args.shots, os.path.basename(f))),
                   "warnings %r\nerrors %r" % (warn[:5], r["errors"][:5]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return tap.done()


if __name__ == "__main__":
    sys.exit(main())
