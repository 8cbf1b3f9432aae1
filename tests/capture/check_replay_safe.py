#!/usr/bin/env python3
"""A replay proxy changes no file of the user's. cap_escape, recorded by `tracefs record`,
reaches files outside its working directory in every way a path can (an absolute path under
/dev/shm, "..", a symbolic link, chdir, a directory's descriptor, rename, unlink, truncate,
mkdir, fopen). Its replay/proxy.c, built with the C compiler alone and run where the program
ran, must leave every file outside its scratch directory as it was (the same names, kinds,
bytes and link targets, there and under /dev/shm), while the calls it makes land under the
scratch directory: the /dev/shm file it wrote is made there, under dev/shm/.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers'))
from tap import Tap  # noqa: E402


def run(cmd, cwd=None, timeout=600):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def snapshot(roots, skip):
    """Every entry under @roots but @skip: path -> (kind, bytes or link target)."""
    got = {}
    for root in roots:
        for d, dirs, files in os.walk(root):
            dirs[:] = [x for x in dirs if os.path.join(d, x) != skip]
            for name in dirs + files:
                p = os.path.join(d, name)
                if os.path.islink(p):
                    got[p] = ('link', os.readlink(p))
                elif os.path.isdir(p):
                    got[p] = ('dir', None)
                else:
                    with open(p, 'rb') as f:
                        got[p] = ('file', f.read())
    return got


def user_files(shm, out, top):
    """The user's data where the program wrote: what a replay must not change."""
    for p in ('victim', 'gone', 'ren1', 'cut', 'fvictim'):
        with open(os.path.join(shm, p), 'w') as f:
            f.write(f'user data {p}\n')
    for p in ('rel', 'through', 'through2', 'viafd', 'deep'):
        with open(os.path.join(out, p), 'w') as f:
            f.write(f'user data {p}\n')
    for p in ('ren2', 'newdir'):
        q = os.path.join(shm, p)
        if os.path.isdir(q):
            os.rmdir(q)
        elif os.path.exists(q):
            os.unlink(q)
    with open(os.path.join(top, 'mid', 'keep'), 'w') as f:
        f.write('user data keep\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tracefs', required=True)
    ap.add_argument('--prog', required=True)
    ap.add_argument('--cc', required=True)
    o = ap.parse_args()
    o.tracefs, o.prog = os.path.abspath(o.tracefs), os.path.abspath(o.prog)
    t = Tap()
    shm = tempfile.mkdtemp(prefix='tfs-safe-', dir='/dev/shm')
    try:
        with tempfile.TemporaryDirectory() as tmp:
            top = os.path.join(tmp, 'top')
            work, out = os.path.join(top, 'mid', 'work'), os.path.join(top, 'mid', 'out')
            os.makedirs(work)
            os.makedirs(out)
            user_files(shm, out, top)
            trace = os.path.join(tmp, 'escape.trace')
            res = run([o.tracefs, 'record', '-o', trace, '--', o.prog, shm, out], cwd=work)
            t.ok(res.returncode == 0 and os.path.exists(os.path.join(shm, 'ren2')) and
                 open(os.path.join(out, 'deep')).read() == 'recorded\n' and
                 open(os.path.join(out, 'through2')).read() == '',
                 'cap_escape runs recorded and writes where it says', res.stderr[-1500:])
            files = run([o.tracefs, 'cat', trace, 'ranks/0/files.txt']).stdout.splitlines()
            kinds = {ln.split()[-1]: ln.split()[1] for ln in files if not ln.startswith('#')}
            t.ok(kinds.get(os.path.join(shm, 'victim')) == 'file' and
                 kinds.get(os.path.join(shm, 'fvictim')) == 'file' and
                 kinds.get('/dev/null') == 'device',
                 'files.txt: a file under /dev/shm is a file, /dev/null a device',
                 '\n'.join(files))
            src = run([o.tracefs, 'cat', trace, 'replay/proxy.c'])
            with open(os.path.join(tmp, 'proxy.c'), 'w') as f:
                f.write(src.stdout)
            exe = os.path.join(tmp, 'proxy')
            cc = run(o.cc.split() + ['-O1', os.path.join(tmp, 'proxy.c'), '-o', exe])
            if not t.ok(src.returncode == 0 and cc.returncode == 0, 'its proxy builds',
                        src.stderr[-800:] + cc.stderr[-1500:]):
                return t.done()
            user_files(shm, out, top)
            scratch = os.path.join(work, 'proxy.d')
            before = snapshot([tmp, shm], scratch)
            res = run([exe, '--no-compute'], cwd=work)
            t.ok(res.returncode == 0, 'the proxy runs where the program ran',
                 res.stdout[-800:] + res.stderr[-1500:])
            after = snapshot([tmp, shm], scratch)
            changed = sorted(p for p in set(before) | set(after)
                             if before.get(p) != after.get(p))
            t.ok(not changed, 'no file outside the scratch directory changed, appeared or '
                 'went: not under /dev/shm, not through "..", a link, chdir or a directory\'s '
                 'descriptor', '\n'.join(f'{p}: {before.get(p)} -> {after.get(p)}'
                                         for p in changed[:20]))
            made = os.path.join(scratch, shm.lstrip('/'))
            t.ok(os.path.isfile(os.path.join(made, 'victim')) and
                 os.path.isdir(os.path.join(made, 'newdir')) and
                 os.path.isfile(os.path.join(made, 'fvictim')),
                 'the calls on /dev/shm files were made under the scratch directory '
                 '(dev/shm/...: victim and fvictim written, newdir made)',
                 '\n'.join(sorted(os.path.relpath(os.path.join(d, x), scratch)
                                  for d, _, fs in os.walk(scratch) for x in fs)))
            links = {x: os.readlink(os.path.join(scratch, x))
                     for x in ('lnk3', 'lnk4') if os.path.islink(os.path.join(scratch, x))}
            t.ok(links == {'lnk3': os.path.join(scratch, out.lstrip('/')),
                           'lnk4': os.path.join(scratch, 'out')},
                 'the links the program made point under the scratch directory, where their '
                 'absolute or relative targets are for the proxy', str(links))
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    return t.done()


if __name__ == '__main__':
    sys.exit(main())
