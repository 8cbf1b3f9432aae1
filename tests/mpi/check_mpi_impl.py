#!/usr/bin/env python3
"""-Dmpi_impl picks which installed MPIs get a wrapper library: configures the source tree
once per choice (without building: meson's introspection lists the targets) and checks the
wrapper libraries it would build. Each choice whose MPI is not installed is a SKIP."""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers'))
from tap import Tap  # noqa: E402


def configure(meson, src, impl, d):
    res = subprocess.run([meson, 'setup', d, src, '-Dtests=false', '-Dmpi_impl=' + impl],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return None, res.stdout + res.stderr
    res = subprocess.run([meson, 'introspect', '--targets', d], capture_output=True,
                         text=True, check=True)
    libs = sorted(t['name'] for t in json.loads(res.stdout) if t['name'].startswith('tfsmpi'))
    return libs, ''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--meson', required=True)
    ap.add_argument('--src', required=True)
    ap.add_argument('--have', default='', help='MPIs this build found: mpich,openmpi')
    o = ap.parse_args()
    have = set(filter(None, o.have.split(',')))
    t = Tap()
    want = {'mpich': ['tfsmpi'], 'openmpi': ['tfsmpi-ompi']}
    for impl in ('mpich', 'openmpi', 'mpich,openmpi'):
        names = impl.split(',')
        if not have.issuperset(names):
            t.skip(f'-Dmpi_impl={impl}', f'{impl} is not installed here')
            continue
        d = tempfile.mkdtemp(prefix='tfs-mpi-impl.')
        try:
            libs, err = configure(o.meson, o.src, impl, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
        exp = sorted(sum((want[n] for n in names), []))
        t.ok(libs == exp, f'-Dmpi_impl={impl} builds {", ".join(exp)} only', err or libs)
    sys.exit(t.done())


if __name__ == '__main__':
    main()
