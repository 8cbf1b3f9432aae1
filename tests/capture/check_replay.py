#!/usr/bin/env python3
"""Replay of programs traced through the capture library, end to end: demo_threads (threads,
zones, phases, marks, counters, allocations, stdio on a temporary file) and cap_io's threaded
allocation and I/O modes are recorded by `tracefs record`, their replay/proxy.c built with
the C compiler alone and recorded again: `tracefs compare` says both make the same calls,
and so does this script's own count of every thread's calls per kind and their order from
events.jsonl; the proxy of demo_threads shows the same phases. cap_calls, which calls every
I/O function of capture/calls.txt, gives a proxy that builds and makes the same I/O calls
but those calls.txt marks `noreplay`; its README.txt lists every such function and why; its
wide-character mode (setlocale, then wide stdio) gives a proxy that makes the same calls. A
10^7-event regular trace (cap_io loop) gives a proxy under 100 KB of C that builds and runs.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers'))
from tap import Tap  # noqa: E402


def run(cmd, cwd=None, timeout=900, stdin=None):
    return subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          input=stdin)


def streams(o, trace):
    res = run([o.tracefs, 'info', '--json', trace])
    info = json.loads(res.stdout)
    return [(s['rank'], s['thread']) for s in info['streams']], info.get('phases', [])


def names(o, trace, rank, thread):
    res = run([o.tracefs, 'cat', trace, f'ranks/{rank}/threads/{thread}/events.jsonl'])
    return [json.loads(ln)['name'] for ln in res.stdout.splitlines() if ln.strip()]


def replay(t, o, tmp, label, argv, proxy_args=(), stdin=None):
    """Record @argv, build and record its proxy. Returns (trace, proxy trace, proxy.c)."""
    d = os.path.join(tmp, label)
    os.makedirs(d)
    orig = os.path.join(d, 'orig.trace')
    res = run([o.tracefs, 'record', '-o', orig, '--'] + argv, cwd=d, stdin=stdin)
    if not t.ok(res.returncode == 0, f'{label}: the program runs recorded', res.stderr[-1500:]):
        return None
    res = run([o.tracefs, 'cat', orig, 'replay/proxy.c'])
    src = os.path.join(d, 'proxy.c')
    with open(src, 'w') as f:
        f.write(res.stdout)
    exe = os.path.join(d, 'proxy')
    cc = run(o.cc.split() + ['-O2', src, '-o', exe])
    if not t.ok(res.returncode == 0 and cc.returncode == 0,
                f'{label}: replay/proxy.c builds with cc alone', cc.stderr[-2000:]):
        return None
    again = os.path.join(d, 'proxy.trace')
    res = run([o.tracefs, 'record', '-o', again, '--', exe, *proxy_args], cwd=d, stdin=stdin)
    if not t.ok(res.returncode == 0, f'{label}: the proxy runs recorded', res.stderr[-1500:]):
        return None
    return orig, again, res.stdout


def check_remap(t, o, tmp):
    """One address, two mappings (cap_io remap): a thread's page the program unmapped
    unseen, then the main thread's at the same address. The proxy's main thread unmaps its
    own mapping, not the thread's, whose entry for that address is older."""
    got = replay(t, o, tmp, 'cap_io_remap', [o.capio, 'remap'])
    if not got:
        return
    txt = run([o.tracefs, 'cat', got[1], 'ranks/0/threads/0/trace.txt']).stdout
    maps = re.findall(r' mmap\(.*\) = (0x[0-9a-f]+)', txt)
    unmaps = re.findall(r' munmap\(addr=(0x[0-9a-f]+),', txt)
    t.ok(len(maps) == 1 and unmaps == maps,
         "cap_io remap: the proxy's main thread unmaps the page it mapped, not its thread's",
         txt[-1500:])


def check_same(t, o, label, orig, again):
    res = run([o.tracefs, 'compare', orig, again])
    t.ok(res.returncode == 0 and 'the traces make the same calls' in res.stdout,
         f'{label}: tracefs compare says the proxy makes the same calls', res.stdout[-2500:])
    sa, pa = streams(o, orig)
    sb, pb = streams(o, again)
    bad = None if sorted(sa) == sorted(sb) else f'streams {sa} != {sb}'
    total = 0
    for r, th in sa:
        if bad:
            break
        a, b = names(o, orig, r, th), names(o, again, r, th)
        total += len(a)
        if collections.Counter(a) != collections.Counter(b):
            bad = f'rank {r} thread {th}: {collections.Counter(a)} != {collections.Counter(b)}'
        elif a != b:
            k = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
            bad = f'rank {r} thread {th} event {k}: {a[k]} != {b[k]}'
    t.ok(bad is None and total > 0,
         f'{label}: every thread makes as many calls of each kind, in the same order '
         f'({len(sa)} threads, {total} events)', bad)
    return pa, pb


def made_fds(o, trace):
    """The descriptors thread 0 of @trace got from the replayed calls that make one, in
    order: (call, number), a pipe's two ends each."""
    res = run([o.tracefs, 'cat', trace, 'ranks/0/threads/0/events.jsonl'])
    out = []
    for ln in res.stdout.splitlines():
        e = json.loads(ln)
        a = e['args']
        if e['name'] in ('open', 'openat', 'creat', 'dup', 'dup2', 'dup3', 'mkstemp', 'popen'):
            out.append((e['name'], a['result']))
        elif e['name'] in ('pipe', 'pipe2'):
            out += [(e['name'], a['rd_fd']), (e['name'], a['wr_fd'])]
    return out


def lock_calls(o, trace):
    """The lock calls of thread 0 of @trace: kind, command and range (no paths: the
    proxy's files are scratch files)."""
    res = run([o.tracefs, 'cat', trace, 'ranks/0/threads/0/events.jsonl'])
    out = []
    for ln in res.stdout.splitlines():
        e = json.loads(ln)
        if e['name'] in ('fcntl_lock', 'flock', 'lockf'):
            a = e['args']
            out.append((e['name'],) + tuple(a.get(k) for k in ('cmd', 'op', 'type', 'whence',
                                                              'start', 'len', 'result')))
    return out


def results(o, trace, kinds):
    """Whether each call of @kinds by thread 0 of @trace succeeded, in order."""
    res = run([o.tracefs, 'cat', trace, 'ranks/0/threads/0/events.jsonl'])
    out = []
    for ln in res.stdout.splitlines():
        e = json.loads(ln)
        if e['name'] in kinds:
            out.append((e['name'], e['args'].get('result', 0) >= 0))
    return out


def noreplay(calls):
    """calls.txt read on its own: each kind marked `noreplay` and its functions (the name of
    the kind for an event no function records), and the kinds of category alloc."""
    out, kind, alloc = {}, None, set()
    with open(calls) as f:
        for line in f:
            tok = line.split()
            if line.startswith('kind '):
                kind, syms = tok[1], []
                if tok[2] == 'alloc':
                    alloc.add(kind)
            elif tok and tok[0] == 'sym':
                syms.append(re.match(r'\s*sym\s+[^(]*?\b(\w+)\s*\(', line).group(1))
            elif tok and tok[0] == 'noreplay':
                out[kind] = (syms or [kind], line.split(None, 1)[1].strip())
    return out, alloc


def check_calls(t, o, tmp):
    """cap_calls: every I/O function of calls.txt, replayed but for the noreplay ones."""
    left, alloc = noreplay(o.calls)
    t.ok(all(k in left for k in ('socket', 'poll', 'select', 'fork', 'sigaction')),
         'calls.txt marks sockets, polling, processes and signals noreplay', sorted(left))
    io = os.path.join(tmp, 'calls_io')
    os.makedirs(io)
    got = replay(t, o, tmp, 'cap_calls', [o.calls_prog, io], stdin='7 8 9 10\n')
    if not got:
        return
    orig, again, _ = got
    # fd_file: descriptors met first, not calls; allocations: those stdio makes inside its
    # calls fall where this run's stdio makes them (README.txt: left to that call)
    skip = set(left) | {'fd_file'} | alloc

    def calls(trace):
        return [n for n in names(o, trace, 0, 0) if n not in skip]
    a, b = calls(orig), calls(again)
    k = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    t.ok(a == b and len(a) > 100,
         f'cap_calls: the proxy makes every I/O call of the trace but the noreplay ones, in '
         f'order ({len(a)} calls)', f'first difference at {k}: {a[k:k + 5]} != {b[k:k + 5]}')
    made = [made_fds(o, x) for x in (orig, again)]
    t.ok(made[0] == made[1] and len(made[0]) > 20,
         f'cap_calls: the proxy gets the descriptor numbers the program got, pipe ends '
         f'included ({len(made[0])} descriptors)', f'{made[0]}\n{made[1]}')
    locks = [lock_calls(o, x) for x in (orig, again)]
    t.ok(locks[0] == locks[1] and len(locks[0]) == 10,
         'cap_calls: the proxy takes the program\'s locks with the same commands, blocking '
         f'ones included ({len(locks[0])} calls)', f'{locks[0]}\n{locks[1]}')
    ends = [results(o, x, ('utimensat', 'futimens', 'mkstemp', 'getcwd')) for x in (orig, again)]
    t.ok(ends[0] == ends[1] and len(ends[0]) > 10,
         'cap_calls: the proxy\'s utimensat, futimens, mkstemp and getcwd succeed and fail as '
         f'the program\'s did ({len(ends[0])} calls)', f'{ends[0]}\n{ends[1]}')
    kinds = set(names(o, orig, 0, 0))
    readme = run([o.tracefs, 'cat', orig, 'replay/README.txt']).stdout
    missing = [f for syms, why in left.values() for f in syms
               if not re.search(r'[ ,]%s(,|$)' % re.escape(f), readme, re.M)]
    whys = [why for _, why in left.values() if why + ':' not in readme]
    t.ok(not missing and not whys,
         'cap_calls: README.txt lists every noreplay function of calls.txt with its reason',
         f'missing {missing}, reasons {whys}')
    rows = {m.group(1): m.group(2) for m in re.finditer(r'^  (\w+) +\d+ +\d+  (\w[\w ]*)',
                                                         readme, re.M)}
    bad = [k for k in kinds & set(left) if rows.get(k) != 'left out']
    t.ok(not bad and kinds & set(left),
         'cap_calls: its table says each noreplay kind the trace has is left out '
         f'({len(kinds & set(left))} kinds)', f'{bad}\n{readme[-3000:]}')


def check_wide(t, o, tmp):
    """cap_calls wide: setlocale, then wide characters on a file it writes and reads back
    (ungetwc of the character just read), stdout and stdin. The proxy sets the locale where
    the program did (its wide streams convert, and allocate, as the program's did), writes
    as many bytes, puts back a character where the program did without its libc allocating
    a push-back area, and leaves alone the frees of blocks its libc made inside its calls:
    tracefs compare finds the same calls, allocations included."""
    d = os.path.join(tmp, 'wide_io')
    os.makedirs(d)
    got = replay(t, o, tmp, 'cap_calls_wide', [o.calls_prog, d, 'wide'], stdin='7 8 9 10\n')
    if got:
        check_same(t, o, 'cap_calls wide', got[0], got[1])


UNGETC_C = r"""
#include <stdio.h>
int main(int argc, char **argv)
{
	FILE *f = fopen(argv[1], "r");
	int c;

	if (!f)
		return 1;
	c = getc(f);
	ungetc(c, f); /* the byte just read: glibc steps back in its buffer */
	c = getc(f);
	ungetc('#', f); /* another: glibc allocates a push-back area */
	c = getc(f);
	c = getc(f);
	fclose(f);
	return c == EOF;
}
"""


def check_ungetc(t, o, tmp):
    """ungetc of the byte just read and of another: the proxy, whose bytes are filler, puts
    back the byte it read where the program put back its own (`back`), so that its libc
    allocates a push-back area where the program's did and only there: tracefs compare
    finds the same calls, allocations included."""
    d = os.path.join(tmp, 'ungetc')
    os.makedirs(d)
    with open(os.path.join(d, 'ungetc.c'), 'w') as f:
        f.write(UNGETC_C)
    with open(os.path.join(d, 'in.txt'), 'w') as f:
        f.write('abcdef\n')
    cc = run(o.cc.split() + ['-O1', 'ungetc.c', '-o', 'ungetc'], cwd=d)
    if not t.ok(cc.returncode == 0, 'ungetc: the program builds', cc.stderr[-1500:]):
        return
    got = replay(t, o, tmp, 'ungetc_run', [os.path.join(d, 'ungetc'),
                                            os.path.join(d, 'in.txt')])
    if got:
        check_same(t, o, 'ungetc', got[0], got[1])


def check_input(t, o, tmp):
    """A file the program only reads is made for the proxy as big as its reads: the kinds
    that read are those whose file argument has the input flag (preadv here, which a list
    of names did not hold)."""
    d = os.path.join(tmp, 'input')
    os.makedirs(d)
    data = os.path.join(d, 'data.bin')
    with open(data, 'wb') as f:
        f.write(b'x' * 5000)
    prog = ('import os\nfd = os.open(%r, os.O_RDONLY)\n'
            'print(os.preadv(fd, [bytearray(1000), bytearray(2000)], 100))\n' % data)
    trace = os.path.join(d, 'py.trace')
    res = run([o.tracefs, 'record', '-o', trace, '--', sys.executable, '-c', prog], cwd=d)
    src = run([o.tracefs, 'cat', trace, 'replay/proxy.c']).stdout if res.returncode == 0 \
        else ''
    t.ok(res.stdout.strip() == '3000' and 'rt_input_file("%s", 3100);' % data in src,
         'a file read by preadv alone is made for the proxy as far as its reads went (3000 '
         'bytes at offset 100)',
         res.stderr[-1500:] + '\n'.join(x for x in src.splitlines() if 'rt_input_file' in x))
    with open(os.path.join(d, 'proxy.c'), 'w') as f:
        f.write(src)
    cc = run(o.cc.split() + ['-O1', 'proxy.c', '-o', 'proxy'], cwd=d)
    ptrace = os.path.join(d, 'proxy.trace')
    res = run([o.tracefs, 'record', '-o', ptrace, '--', './proxy', '--no-compute'], cwd=d) \
        if not cc.returncode else cc
    got = run([o.tracefs, 'cat', ptrace, 'ranks/0/threads/0/trace.txt']).stdout \
        if res.returncode == 0 else ''
    reads = [ln for ln in got.splitlines() if ' preadv(' in ln]
    t.ok(res.returncode == 0 and len(reads) == 1 and reads[0].rstrip().endswith('= 3000'),
         'its proxy runs, and its preadv into two buffers reads the 3000 bytes again',
         res.stderr[-1500:] + '\n'.join(reads))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tracefs', required=True)
    ap.add_argument('--demo', required=True)
    ap.add_argument('--capio', required=True)
    ap.add_argument('--cc', required=True)
    ap.add_argument('--calls-prog', required=True)
    ap.add_argument('--calls', required=True)
    o = ap.parse_args()
    o.tracefs, o.demo, o.capio, o.calls_prog = (
        os.path.abspath(p) for p in (o.tracefs, o.demo, o.capio, o.calls_prog))
    t = Tap()
    with tempfile.TemporaryDirectory() as tmp:
        got = replay(t, o, tmp, 'demo_threads', [o.demo])
        if got:
            pa, pb = check_same(t, o, 'demo_threads', got[0], got[1])
            key = lambda p: (p['rank'], p['thread'], p['dir'], p['events'])  # noqa: E731
            t.ok(pa and sorted(map(key, pa)) == sorted(map(key, pb)),
                 'demo_threads: the proxy shows the same phases, thread by thread, with as '
                 'many events', f'{pa}\n{pb}')
            t.ok('heat' not in got[2], 'demo_threads: the proxy writes filler, not the data',
                 got[2][:200])
        io = os.path.join(tmp, 'io')
        os.makedirs(io)
        for label, args in (('threads', ['threads', io, '8']),
                            ('churn', ['churn', io, '4', '40']),
                            ('calls', ['calls', io]),
                            ('bufs', ['bufs', io])):
            got = replay(t, o, tmp, f'cap_io_{label}', [o.capio] + args)
            if got:
                check_same(t, o, f'cap_io {label}', got[0], got[1])
        check_remap(t, o, tmp)
        check_wide(t, o, tmp)
        check_calls(t, o, tmp)
        check_input(t, o, tmp)
        check_ungetc(t, o, tmp)
        d = os.path.join(tmp, 'loop')
        os.makedirs(d)
        orig = os.path.join(d, 'loop.trace')
        res = run([o.tracefs, 'record', '-o', orig, '--', o.capio, 'loop', '5000000'], cwd=d,
                  timeout=1800)
        if t.ok(res.returncode == 0, 'a regular loop of 10^7 calls is recorded', res.stderr):
            src = run([o.tracefs, 'cat', orig, 'replay/proxy.c'], timeout=1800).stdout
            t.ok(0 < len(src) < 100_000 and 'i < 5000000u; i++)' in src,
                 f'10^7 regular calls: proxy.c is under 100 KB ({len(src)} bytes), the loop '
                 'one for statement', src[-1500:])
            with open(os.path.join(d, 'proxy.c'), 'w') as f:
                f.write(src)
            cc = run(o.cc.split() + ['-O2', 'proxy.c', '-o', 'proxy'], cwd=d)
            res = run(['./proxy', '--no-compute'], cwd=d, timeout=1800) if not cc.returncode \
                else cc
            t.ok(res.returncode == 0, '10^7 regular calls: the proxy builds and replays them',
                 res.stderr[-1500:])
    return t.done()


if __name__ == '__main__':
    sys.exit(main())
