#!/usr/bin/env python3
"""MPI tracing end to end: each test program runs under
`mpiexec -n P tracefs record -o T -- prog`, and every rank's decoded MPI calls (ranks/R of the
one merged trace, events.jsonl) must equal the sequence this script expects from the
program's source, with the expected arguments: ranks as absolute values (the merged trace
stores them relative to the caller and prints them re-based), symbolic ids consistent
(the same object the same id, different objects different ids; communicators the same id on
every member; requests the same id every iteration), statuses, derived datatype
constructors. Fortran programs (`use mpi`, `include 'mpif.h'`) the same way, or reported
skipped with the reason the build gave (--fortran-skip). Also: the program's output is
unchanged, every function of mpi.h is wrapped, and the 2D stencil's trace size does not grow
with ranks or iterations (sizes printed).
With --openmpi the same expectations check the programs built with Open MPI and traced under
its mpiexec with libtfsmpi-ompi.so (--only picks the cases, --ranks the rank count: Open MPI
runs more ranks than cores only when told to).
Exits 77 when the build has no MPI wrappers.
"""
import argparse
import collections
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'helpers'))
from tap import Tap  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'cli'))
import trace_event  # noqa: E402

# events.jsonl prints a symbolic id as "class#N", a predefined handle by its name (§9.2)
WORLD = 'MPI_COMM_WORLD'
NO_STATUS = -32768
MPI_UNDEFINED = -32766  # MPICH's and Open MPI's
# MPI_IN_PLACE: no allocation, buffer number all ones (mpi_rt_i.h, mpirt_buf), which the
# consumer names (FORMAT.md §9.3)
IN_PLACE = 'MPI_IN_PLACE'
ANY = object()


class V:
    """A symbolic id: bound at first sight, the same value afterwards; distinct V names of
    one scope must bind distinct values."""

    def __init__(self, name, scope='rank'):
        self.name, self.scope = name, scope


class Reqs:
    """A request array rendered as "req#a,req#b": each element a V, or 0 (a null request)."""

    def __init__(self, *elems):
        self.elems = elems


class Fn:
    """Any check: fn(actual, env) -> bool."""

    def __init__(self, fn, what):
        self.fn, self.what = fn, what


def bind(v, actual, env):
    scope = env.setdefault(v.scope, {})
    if v.name in scope:
        return scope[v.name] == actual
    if actual in scope.values():
        return False
    scope[v.name] = actual
    return True


def match_val(exp, act, env):
    if exp is ANY:
        return True
    if isinstance(exp, V):
        return bind(exp, act, env)
    if isinstance(exp, Reqs):
        parts = act.split(',') if act else []
        if len(parts) != len(exp.elems):
            return False
        for e, p in zip(exp.elems, parts):
            if not re.fullmatch(r'req#(\d+)', p):
                return False
            if e == 0:
                if p != 'req#0':
                    return False
            elif not bind(e, p, env):  # as the request argument prints it
                return False
        return True
    if isinstance(exp, Fn):
        return exp.fn(act, env)
    return exp == act


def match_seq(exp, act, env):
    """None when equal, else a description of the first difference."""
    for i, (e, a) in enumerate(zip(exp, act)):
        name, args = e
        if a['name'] != name:
            return f'call {i}: expected {name}, got {a["name"]}'
        for k, v in args.items():
            if k not in a['args']:
                return f'call {i} {name}: no argument {k}'
            if not match_val(v, a['args'][k], env):
                return f'call {i} {name}: {k}={a["args"][k]!r}, expected {describe(v, env)}'
    if len(exp) != len(act):
        return f'{len(act)} calls, expected {len(exp)}: ' + ', '.join(
            a['name'] for a in act[len(exp):len(exp) + 5] or act[-3:])
    return None


def describe(v, env):
    if isinstance(v, V):
        return f'{v.name} (= {env.get(v.scope, {}).get(v.name, "unbound")})'
    if isinstance(v, Fn):
        return v.what
    if isinstance(v, Reqs):
        return 'requests ' + ','.join(e.name if isinstance(e, V) else '0' for e in v.elems)
    return repr(v)


class Runner:
    def __init__(self, o, tmp):
        self.o, self.tmp = o, tmp

    def mpiexec(self, n, argv, traced, trace=None, extra=(), timeout=300):
        cmd = [self.o.mpiexec, '-n', str(n)]
        if traced:
            cmd += [self.o.tracefs, 'record', '--trace=mpi', *extra, '-o', trace, '--']
        res = subprocess.run(cmd + argv, capture_output=True, text=True, timeout=timeout,
                             cwd=self.tmp)
        return res

    def events(self, trace, rank):
        res = subprocess.run([self.o.tracefs, 'cat', trace, f'ranks/{rank}/threads/0/events.jsonl'],
                             capture_output=True, text=True, check=True)
        evs = [json.loads(line) for line in res.stdout.splitlines() if line.strip()]
        return [e for e in evs if e['name'].startswith('MPI_')]

    def ls(self, trace, path):
        res = subprocess.run([self.o.tracefs, 'ls', trace, path], capture_output=True, text=True)
        return [ln.split()[-1] for ln in res.stdout.splitlines() if ln.strip()]


# ---- expected call sequences, from the programs' sources ----

def start(rank, size):
    return [('MPI_Init', {}), ('MPI_Comm_rank', {'comm': WORLD, 'rank': rank}),
            ('MPI_Comm_size', {'comm': WORLD, 'size': size})]


def exp_ring(rank, size, iters):
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    seq = start(rank, size)
    for _ in range(iters):
        seq += [('MPI_Sendrecv', {'sendcount': 1, 'dest': nxt, 'sendtag': 7, 'recvcount': 1,
                                  'source': prv, 'recvtag': 7, 'comm': WORLD,
                                  'status.source': NO_STATUS, 'status.tag': NO_STATUS,
                                  'status.count': NO_STATUS, 'status.cancelled': NO_STATUS}),
                ('MPI_Irecv', {'count': 1, 'source': prv, 'tag': 8, 'comm': WORLD,
                               'request': V('a')}),
                ('MPI_Isend', {'count': 1, 'dest': nxt, 'tag': 8, 'comm': WORLD,
                               'request': V('b')}),
                ('MPI_Waitall', {'count': 2, 'array_of_requests': Reqs(V('a'), V('b')),
                                 'array_of_statuses': ''})]
    seq += [('MPI_Allreduce', {'count': 1, 'comm': WORLD}), ('MPI_Finalize', {})]
    return seq


def grid2d(rank, size):
    side = math.isqrt(size)
    x, y = rank % side, rank // side
    nb = []
    if x > 0:
        nb.append(rank - 1)
    if x < side - 1:
        nb.append(rank + 1)
    if y > 0:
        nb.append(rank - side)
    if y < side - 1:
        nb.append(rank + side)
    return nb


def exp_stencil2d(rank, size, iters):
    nb = grid2d(rank, size)
    seq = start(rank, size)
    for _ in range(iters):
        for k, p in enumerate(nb):
            seq.append(('MPI_Irecv', {'count': 64, 'source': p, 'tag': 0, 'comm': WORLD,
                                      'request': V(f'r{k}')}))
        for k, p in enumerate(nb):
            seq.append(('MPI_Isend', {'count': 64, 'dest': p, 'tag': 0, 'comm': WORLD,
                                      'request': V(f's{k}')}))
        reqs = [V(f'r{k}') for k in range(len(nb))] + [V(f's{k}') for k in range(len(nb))]
        seq.append(('MPI_Waitall', {'count': 2 * len(nb), 'array_of_requests': Reqs(*reqs),
                                    'array_of_statuses': ''}))
    seq += [('MPI_Allreduce', {'count': 1, 'comm': WORLD}), ('MPI_Finalize', {})]
    return seq


def dims_create(n, nd):
    """MPI_Dims_create for nd = 3: the most balanced factors, non-increasing."""
    best = None
    for a in range(1, n + 1):
        for b in range(1, n + 1):
            if n % (a * b) == 0:
                d = sorted([a, b, n // (a * b)], reverse=True)
                if best is None or max(d) - min(d) < max(best) - min(best):
                    best = d
    return best


def exp_stencil3d(rank, size, iters):
    dims = dims_create(size, 3)
    c = [rank // (dims[1] * dims[2]), (rank // dims[2]) % dims[1], rank % dims[2]]

    def at(cc):
        return (cc[0] * dims[1] + cc[1]) * dims[2] + cc[2]
    nb = []
    for d in range(3):
        lo, hi = list(c), list(c)
        lo[d] = (c[d] - 1) % dims[d]
        hi[d] = (c[d] + 1) % dims[d]
        nb += [at(lo), at(hi)]
    dstr = ','.join(map(str, dims))
    seq = [('MPI_Init', {}), ('MPI_Comm_size', {'comm': WORLD, 'size': size}),
           ('MPI_Dims_create', {'nnodes': size, 'ndims': 3, 'dims': dstr}),
           ('MPI_Cart_create', {'comm_old': WORLD, 'ndims': 3, 'dims': dstr, 'periods': '1,1,1',
                                'reorder': 0, 'comm_cart': V('cart', 'job')}),
           ('MPI_Comm_rank', {'comm': V('cart', 'job'), 'rank': rank})]
    for d in range(3):
        seq.append(('MPI_Cart_shift', {'comm': V('cart', 'job'), 'direction': d, 'disp': 1,
                                       'rank_source': nb[2 * d], 'rank_dest': nb[2 * d + 1]}))
    # receive statuses: source, tag (relative where it equals the caller's rank or the
    # source), 32 ints, not cancelled; a send's status defines only the cancelled flag
    rel = ','.join(f'{rel_rank(nb[k], rank)}:{rel_tag(k ^ 1, nb[k], rank)}:128:0'
                   for k in range(6)) + ',-:-:-:0' * 6
    for _ in range(iters):
        for k in range(6):
            seq.append(('MPI_Irecv', {'count': 32, 'source': nb[k], 'tag': k ^ 1,
                                      'comm': V('cart', 'job'), 'request': V(f'r{k}')}))
        for k in range(6):
            seq.append(('MPI_Isend', {'count': 32, 'dest': nb[k], 'tag': k,
                                      'comm': V('cart', 'job'), 'request': V(f's{k}')}))
        reqs = [V(f'r{k}') for k in range(6)] + [V(f's{k}') for k in range(6)]
        seq.append(('MPI_Waitall', {
            'count': 12, 'array_of_requests': Reqs(*reqs),
            'array_of_statuses': rel}))
    seq += [('MPI_Reduce', {'count': 1, 'root': 0, 'comm': V('cart', 'job')}),
            ('MPI_Comm_free', {'comm': V('cart', 'job')}), ('MPI_Finalize', {})]
    return seq


def rel_rank(r, me):
    if r < 0:
        return str(r)
    return 'r' if r == me else f'r{r - me:+d}'


def rel_tag(tag, peer, me):
    """A tag in a status string: relative when positive and equal to the caller's rank or
    the peer's, else literal."""
    return rel_rank(tag, me) if tag > 0 and tag in (peer, me) else str(tag)


def exp_coll(rank, size):
    ones = ','.join(['1'] * size)
    idx = ','.join(str(i) for i in range(size))
    return start(rank, size) + [
        ('MPI_Bcast', {'count': 4, 'datatype': 'MPI_INT', 'root': 0, 'comm': WORLD}),
        ('MPI_Reduce', {'count': 1, 'datatype': 'MPI_INT', 'op': 'MPI_SUM', 'root': size - 1,
                        'comm': WORLD}),
        ('MPI_Allreduce', {'count': 1, 'datatype': 'MPI_INT', 'op': 'MPI_MAX', 'comm': WORLD}),
        ('MPI_Gather', {'sendcount': 1, 'recvcount': 1, 'root': 0, 'comm': WORLD}),
        ('MPI_Scatter', {'sendcount': 1, 'recvcount': 1, 'root': 1 % size, 'comm': WORLD}),
        ('MPI_Allgather', {'sendcount': 1, 'recvcount': 1, 'comm': WORLD}),
        ('MPI_Alltoall', {'sendcount': 1, 'recvcount': 1, 'comm': WORLD}),
        ('MPI_Alltoallv', {'sendcounts': ones, 'sdispls': idx, 'recvcounts': ones,
                           'rdispls': idx, 'sendtype': 'MPI_INT', 'recvtype': 'MPI_INT',
                           'comm': WORLD}),
        ('MPI_Scan', {'count': 1, 'op': 'MPI_SUM', 'comm': WORLD}),
        ('MPI_Reduce_scatter_block', {'recvcount': 1, 'op': 'MPI_SUM', 'comm': WORLD}),
        ('MPI_Barrier', {'comm': WORLD}), ('MPI_Finalize', {})]


def exp_dtype(rank, size):
    seq = [('MPI_Init', {}), ('MPI_Comm_rank', {'comm': WORLD, 'rank': rank}),
           ('MPI_Type_vector', {'count': 4, 'blocklength': 1, 'stride': 4,
                                'oldtype': 'MPI_INT', 'newtype': V('vec', 'type')}),
           ('MPI_Type_commit', {'datatype': V('vec', 'type')}),
           ('MPI_Type_contiguous', {'count': 3, 'oldtype': 'MPI_DOUBLE', 'newtype': V('con', 'type')}),
           ('MPI_Type_commit', {'datatype': V('con', 'type')}),
           ('MPI_Type_create_struct', {
               'count': 2, 'array_of_blocklengths': '1,2', 'array_of_displacements': '0,8',
               # a handle array: predefined handles by the names the source passes
               'array_of_types': 'MPI_INT,MPI_DOUBLE', 'newtype': V('st', 'type')}),
           ('MPI_Type_commit', {'datatype': V('st', 'type')}),
           ('MPI_Type_create_struct', {
               'count': 2, 'array_of_blocklengths': '1,2', 'array_of_displacements': '0,8',
               # a derived type as the datatype arguments print it, a predefined by name
               'array_of_types': Fn(lambda v, env: v == env['type']['con'] + ',MPI_INT',
                                    'the contiguous type, then MPI_INT'),
               'newtype': V('mixed', 'type')}),
           ('MPI_Type_free', {'datatype': V('mixed', 'type')})]
    if rank == 0:
        seq.append(('MPI_Send', {'count': 1, 'datatype': V('vec', 'type'), 'dest': 1, 'tag': 5}))
    elif rank == 1:
        seq.append(('MPI_Recv', {'count': 4, 'datatype': 'MPI_INT', 'source': 0, 'tag': 5,
                                 'status.source': 0, 'status.tag': 5, 'status.count': 16,
                                 'status.cancelled': 0}))
    seq += [('MPI_Bcast', {'count': 1, 'datatype': V('con', 'type'), 'root': 0}),
            ('MPI_Type_free', {'datatype': V('st', 'type')}),
            ('MPI_Type_free', {'datatype': V('con', 'type')}),
            ('MPI_Type_free', {'datatype': V('vec', 'type')}),
            # the lowest freed id is the first vector's: it is reused
            ('MPI_Type_vector', {'count': 2, 'blocklength': 2, 'stride': 3,
                                 'oldtype': 'MPI_INT', 'newtype': V('vec', 'type')}),
            ('MPI_Type_free', {'datatype': V('vec', 'type')}),
            ('MPI_Finalize', {})]
    return seq


def exp_comms(rank, size):
    hr, hs = rank // 2, size // 2
    half = V('half', 'job')

    def in_half(r):  # a rank of `half`, printed as the world rank at the same offset
        return rank + (r - hr)
    dst, src = in_half((hr + 1) % hs), in_half((hr - 1) % hs)
    return start(rank, size) + [
        ('MPI_Comm_split', {'comm': WORLD, 'color': rank % 2, 'split_key': rank, 'newcomm': half}),
        ('MPI_Comm_rank', {'comm': half, 'rank': rank}),
        ('MPI_Comm_size', {'comm': half, 'size': hs}),
        ('MPI_Sendrecv', {'dest': dst, 'sendtag': 3, 'source': src, 'recvtag': 3, 'comm': half,
                          'status.source': src, 'status.tag': 3, 'status.count': 4,
                          'status.cancelled': 0}),
        ('MPI_Comm_dup', {'comm': WORLD, 'newcomm': V('dup', 'job')}),
        ('MPI_Barrier', {'comm': V('dup', 'job')}),
        ('MPI_Comm_idup', {'comm': WORLD, 'newcomm': V('idup', 'job'), 'request': V('rq')}),
        ('MPI_Wait', {'request': V('rq'), 'status.source': NO_STATUS}),
        ('MPI_Barrier', {'comm': V('idup', 'job')}),
        ('MPI_Intercomm_create', {'local_comm': half, 'local_leader': in_half(0),
                                  'peer_comm': WORLD, 'remote_leader': 1 - rank % 2, 'tag': 99,
                                  'newintercomm': V('inter', 'job')}),
        ('MPI_Comm_remote_size', {'comm': V('inter', 'job'), 'size': hs}),
        # ranks of an intercommunicator are the remote group's, at the caller's offset
        ('MPI_Sendrecv', {'dest': rank, 'sendtag': 4, 'source': rank, 'recvtag': 4,
                          'comm': V('inter', 'job'), 'status.source': rank,
                          'status.tag': 4, 'status.count': 4, 'status.cancelled': 0}),
        ('MPI_Comm_free', {'comm': V('inter', 'job')}),
        ('MPI_Comm_free', {'comm': V('idup', 'job')}),
        ('MPI_Comm_free', {'comm': V('dup', 'job')}),
        ('MPI_Comm_free', {'comm': half}),
        ('MPI_Finalize', {})]


def check_anysome(t, evs, rank, size, openmpi):
    """Completion order is the network's: check the sets, and each status against its
    request. Ranks but 0 end their phase with an empty value, or under Open MPI, which
    refuses it, by deleting the key."""
    names = [e['name'] for e in evs]
    end = (('MPI_Info_delete', {'key': 'tracefs_phase'}) if openmpi else
           ('MPI_Info_set', {'key': 'tracefs_phase', 'value': ''}))
    if rank != 0:
        exp = start(rank, size) + [
            ('MPI_Info_create', {}), ('MPI_Send', {'dest': 0, 'tag': rank}),
            ('MPI_Barrier', {}), ('MPI_Info_set', {'key': 'tracefs_phase', 'value': 'testsome'}),
            ('MPI_Send', {'dest': 0, 'tag': 100 + rank}), end,
            ('MPI_Info_free', {}), ('MPI_Finalize', {})]
        env = {'rank': {}, 'job': {}}
        d = match_seq(exp, evs, env)
        return t.ok(d is None, f'anysome: rank {rank} calls and arguments', d)
    ok, why = True, ''
    n = size - 1
    irecv = [e for e in evs if e['name'] == 'MPI_Irecv']
    first, second = irecv[:n], irecv[n:]
    ok &= [e['args']['source'] for e in first] == list(range(1, size))
    ok &= [e['args']['tag'] for e in second] == [100 + i for i in range(1, size)]
    ids = [e['args']['request'] for e in first]
    ok &= len(set(ids)) == n and 'req#0' not in ids
    waits = [e for e in evs if e['name'] == 'MPI_Waitany']
    seen = []
    live = list(ids)
    for w in waits:
        a = w['args']
        exp_list = ','.join(live)
        if a['array_of_requests'] != exp_list:
            ok, why = False, f'Waitany requests {a["array_of_requests"]} != {exp_list}'
        k = a['indx']
        seen.append(k)
        if not (0 <= k < n and a['status.source'] == k + 1 and a['status.tag'] == k + 1 and
                a['status.count'] == 4 and a['status.cancelled'] == 0):
            ok, why = False, f'Waitany index {k} status {a["status.source"]}/{a["status.tag"]}'
        else:
            live[k] = 'req#0'
    ok &= len(waits) == n and sorted(seen) == list(range(n))
    got, tests = [], [e for e in evs if e['name'] == 'MPI_Testsome']
    for e in tests:
        a = e['args']
        idx = [int(x) for x in a['array_of_indices'].split(',')] if a['array_of_indices'] else []
        if len(idx) != a['outcount']:
            ok, why = False, f'Testsome outcount {a["outcount"]} indices {idx}'
        st = a['array_of_statuses'].split(',') if a['array_of_statuses'] else []
        exp_st = []
        for k in idx:
            exp_st.append(f'r+{k + 1}:{101 + k}:4:0')
        if st != exp_st:
            ok, why = False, f'Testsome statuses {st} != {exp_st}'
        got += idx
    ok &= sorted(got) == list(range(n))
    ok &= names[-3:] == ['MPI_Info_delete', 'MPI_Info_free', 'MPI_Finalize']
    return t.ok(ok, f'anysome: rank 0 Waitany and Testsome ({len(tests)} calls) match their '
                'requests and statuses', why or names)


def exp_fileio(rank, size):
    """mpi_fileio.c: a file access's status defines the bytes moved, nothing else (the
    program fills each status with all-ones bytes first: the garbage of a stack status)."""
    f = V('f', 'file')
    io_st = {'status.source': NO_STATUS, 'status.tag': NO_STATUS, 'status.cancelled': NO_STATUS}
    return start(rank, size) + [
        ('MPI_File_open', {'comm': WORLD, 'filename': 'fileio.dat', 'fh': f}),
        ('MPI_File_write_at', dict(io_st, **{'fh': f, 'offset': 16 * rank, 'count': 4,
                                             'status.count': 16})),
        ('MPI_File_set_view', {'fh': f, 'disp': 0, 'datarep': 'native'}),
        ('MPI_Barrier', {'comm': WORLD}),
        ('MPI_File_read_at', dict(io_st, **{'fh': f, 'offset': 4 * ((rank + 1) % size),
                                            'count': 4, 'status.count': 16})),
        ('MPI_Get_count', {'count': 4}),
        ('MPI_File_iread_at', {'fh': f, 'offset': 2, 'count': 2, 'request': V('rq')}),
        # completed through a request: the same (Open MPI leaves the cancelled bit as it was)
        ('MPI_Wait', dict(io_st, **{'request': V('rq'), 'status.count': 8})),
        ('MPI_File_close', {'fh': f}), ('MPI_Finalize', {})]


def exp_topo(rank, size):
    """mpi_topo.c: the arrays of the Cartesian and graph topology calls are their values."""
    d = sorted(dims_create2(size), reverse=True)
    c = f'{rank // d[1]},{rank % d[1]}'
    ds = f'{d[0]},{d[1]}'
    cart, row, ring = V('cart', 'job'), V('row', 'job'), V('ring', 'job')
    indx = ','.join(str(2 * (i + 1)) for i in range(size))
    return start(rank, size) + [
        ('MPI_Dims_create', {'nnodes': size, 'ndims': 2, 'dims': ds}),
        ('MPI_Cart_create', {'comm_old': WORLD, 'ndims': 2, 'dims': ds, 'periods': '1,0',
                             'reorder': 0, 'comm_cart': cart}),
        ('MPI_Cart_coords', {'comm': cart, 'rank': rank, 'maxdims': 2, 'coords': c}),
        ('MPI_Cart_rank', {'comm': cart, 'coords': c, 'rank': rank}),
        ('MPI_Cart_get', {'comm': cart, 'maxdims': 2, 'dims': ds, 'periods': '1,0',
                          'coords': c}),
        ('MPI_Cart_sub', {'comm': cart, 'remain_dims': '0,1', 'newcomm': row}),
        ('MPI_Graph_create', {'comm_old': WORLD, 'nnodes': size, 'graph_index': indx, 'reorder': 0,
                              'comm_graph': ring}),
        ('MPI_Graph_get', {'comm': ring, 'maxindex': size, 'maxedges': 2 * size,
                           'graph_index': indx}),
        ('MPI_Comm_free', {'comm': ring}), ('MPI_Comm_free', {'comm': row}),
        ('MPI_Comm_free', {'comm': cart}), ('MPI_Finalize', {})]


def dims_create2(n):
    """MPI_Dims_create for 2 dimensions: the most balanced pair."""
    a = max(k for k in range(1, math.isqrt(n) + 1) if n % k == 0)
    return [n // a, a]


def exp_vcoll(rank, size):
    """mpi_vcoll.c: counts and displacements are recorded at the root only; the other ranks
    pass arrays MPI never reads (one element, or no array at all), left unread."""
    ones = ','.join(['1'] * size) if rank == 0 else ''
    rev = ','.join(str(size - 1 - i) for i in range(size)) if rank == 0 else ''
    return start(rank, size) + [
        ('MPI_Gatherv', {'sendcount': 1, 'recvcounts': ones, 'displs': rev, 'root': 0,
                         'comm': WORLD}),
        ('MPI_Scatterv', {'sendcounts': ones, 'displs': rev, 'recvcount': 1, 'root': 0,
                          'comm': WORLD}),
        ('MPI_Igatherv', {'sendcount': 1, 'recvcounts': ones, 'displs': rev, 'root': 0,
                          'comm': WORLD, 'request': V('rq')}),
        ('MPI_Wait', {'request': V('rq')}), ('MPI_Finalize', {})]


def exp_groups(rank, size):
    """mpi_groups.c: rank arrays in a group are relative to the caller's rank there, and
    literal at the ranks that are not in it."""
    member = {size - 1: 0, 0: 1}.get(rank)
    if member is None:
        pair = '0,1'
    else:
        pair = ','.join('r' if k == member else f'r{k - member:+d}' for k in (0, 1))
    world = f'{rel_rank(size - 1, rank)},{rel_rank(0, rank)}'
    return start(rank, size) + [
        ('MPI_Comm_group', {'comm': WORLD, 'group': V('world', 'group')}),
        ('MPI_Group_incl', {'group': V('world', 'group'), 'n': 2, 'ranks': world,
                            'newgroup': V('pair', 'group')}),
        # a member's rank in the group prints as its world rank; MPI_UNDEFINED as it is
        ('MPI_Group_rank', {'group': V('pair', 'group'),
                            'rank': rank if member is not None else MPI_UNDEFINED}),
        ('MPI_Group_translate_ranks', {'group1': V('pair', 'group'), 'n': 2, 'ranks1': pair,
                                       'group2': V('world', 'group'), 'ranks2': world}),
        ('MPI_Group_free', {'group': V('pair', 'group')}),
        ('MPI_Group_free', {'group': V('world', 'group')}), ('MPI_Finalize', {})]


def exp_probe(rank, size):
    """mpi_probe.c: a probe's status defines source, tag and bytes (its cancelled bit is
    garbage); a matched receive's source is where its probe found the message, printed
    alike; a probe that finds nothing returns the null message, the same id every time."""
    hr, hs, half = rank // 2, size // 2, V('half', 'job')
    prv = rank + ((hr - 1) % hs - hr)  # the previous rank of the half, at its offset
    nxt = rank + ((hr + 1) % hs - hr)

    def found(tag, cancelled):
        return {'status.source': prv, 'status.tag': tag, 'status.count': 4,
                'status.cancelled': cancelled}
    seq = start(rank, size) + [
        ('MPI_Comm_split', {'comm': WORLD, 'newcomm': half}),
        ('MPI_Comm_rank', {'comm': half, 'rank': rank}),
        ('MPI_Comm_size', {'comm': half, 'size': hs})]
    seq += [('MPI_Send', {'dest': nxt, 'tag': t, 'comm': half}) for t in (1, 2, 3)]
    return seq + [
        ('MPI_Mprobe', dict(found(1, NO_STATUS), source=prv, tag=1, comm=half,
                            message=V('m1', 'msg1'))),
        ('MPI_Mrecv', dict(found(1, 0), message=V('m1', 'msg1'))),
        ('MPI_Improbe', {'tag': 99, 'flag': 0, 'message': V('null', 'msg')}),
        ('MPI_Improbe', {'tag': 99, 'flag': 0, 'message': V('null', 'msg')}),
        ('MPI_Improbe', dict(found(2, NO_STATUS), tag=2, flag=1,
                             message=V('m2', 'msg'))),
        ('MPI_Imrecv', {'message': V('m2', 'msg'), 'request': V('rq')}),
        ('MPI_Wait', dict(found(2, 0), request=V('rq'))),
        ('MPI_Probe', dict(found(3, NO_STATUS), source=prv, tag=3, comm=half)),
        ('MPI_Recv', {'source': prv, 'tag': 3, 'comm': half}),
        ('MPI_Comm_free', {'comm': half}), ('MPI_Finalize', {})]


def polls_folded(evs, env):
    """The calls with the MPI_Improbe loop's unsuccessful polls left out, once each is
    checked to return the null message (the id of the first unsuccessful probe)."""
    out, null = [], None
    for e in evs:
        a = e['args']
        if e['name'] == 'MPI_Improbe' and a.get('flag') == 0:
            if null is None:
                null = a['message']
            elif a['message'] != null:
                return None
            if a.get('tag') == 2:
                continue
        out.append(e)
    return out


def exp_neighbor(rank, size):
    """mpi_neighbor.c: a neighbourhood collective's arrays have one element per neighbour:
    2 in a 1D ring, 1 each way in the distributed graph."""
    ring, graph = V('ring', 'job'), V('graph', 'job')
    ones, idx = '1,1', '0,1'
    v = {'sendcounts': ones, 'sdispls': idx, 'recvcounts': ones, 'rdispls': idx,
         'comm': ring}
    return start(rank, size) + [
        ('MPI_Cart_create', {'comm_old': WORLD, 'ndims': 1, 'dims': str(size), 'periods': '1',
                             'comm_cart': ring}),
        ('MPI_Neighbor_allgatherv', {'sendcount': 1, 'recvcounts': ones, 'displs': idx,
                                     'comm': ring}),
        ('MPI_Neighbor_alltoallv', v),
        ('MPI_Ineighbor_alltoallv', dict(v, request=V('rq'))),
        ('MPI_Wait', {'request': V('rq')}),
        ('MPI_Dist_graph_create_adjacent', {
            'comm_old': WORLD, 'indegree': 1, 'sources': rel_rank((rank - 1) % size, rank),
            'outdegree': 1, 'destinations': rel_rank((rank + 1) % size, rank),
            'comm_dist_graph': graph}),
        ('MPI_Neighbor_alltoallv', {'sendcounts': '1', 'sdispls': '0', 'recvcounts': '1',
                                    'rdispls': '0', 'comm': graph}),
        ('MPI_Comm_free', {'comm': graph}),
        # sources are ranks (relative), destinations (as long as the degrees' sum) an address
        # the first graph's id, free again, is the lowest free at every rank
        ('MPI_Dist_graph_create', {'comm_old': WORLD, 'n': 1, 'sources': 'r', 'degrees': '1',
                                   'comm_dist_graph': graph}),
        ('MPI_Comm_free', {'comm': graph}), ('MPI_Comm_free', {'comm': ring}),
        ('MPI_Finalize', {})]


# ---- the test cases ----

PROGRAMS = [
    # name, ranks, argv tail, expectation (rank, size) -> sequence
    ('ring', 4, ['3'], lambda r, s: exp_ring(r, s, 3)),
    ('stencil2d', 9, ['4'], lambda r, s: exp_stencil2d(r, s, 4)),
    ('stencil3d', 8, ['3'], lambda r, s: exp_stencil3d(r, s, 3)),
    ('coll', 5, [], exp_coll),
    ('dtype', 2, [], exp_dtype),
    ('comms', 6, [], exp_comms),
    ('anysome', 5, [], None),
    ('fileio', 4, ['fileio.dat'], exp_fileio),
    ('topo', 4, [], exp_topo),
    ('vcoll', 4, [], exp_vcoll),
    ('groups', 4, [], exp_groups),
    ('probe', 4, [], exp_probe),
    ('neighbor', 4, [], exp_neighbor),
    ('pmpi', 3, [], lambda r, s: [
        ('MPI_Init', {}), ('MPI_Barrier', {'comm': WORLD}),
        ('MPI_Allreduce', {'sendbuf': IN_PLACE, 'count': 1, 'comm': WORLD}),
        ('MPI_Finalize', {})]),
]


def check_summary_line(t, run, name, n, trace, stderr):
    """The record summary line names the job's totals and rank 0's counts apart: the job's
    events are the merged trace's, rank 0's recovered events its streams'."""
    res = subprocess.run([run.o.tracefs, 'cat', trace, 'info.json'], capture_output=True,
                         text=True, timeout=120)
    info = json.loads(res.stdout or '{}')
    rank0 = sum(s['events'] for s in info.get('streams', []) if s['rank'] == 0)
    m = re.search(r"(?m)^tracefs: \S+: the job's (\d+) ranks: (\d+) events, \d+ bytes, .*; "
                  r"rank 0: \d+ threads; program [^;]+; recovered (?:all )?(\d+) events", stderr)
    t.ok(m is not None and int(m.group(1)) == n and int(m.group(2)) == info.get('events') and
         int(m.group(3)) == rank0 and info.get('meta', {}).get('mpi_size') == n,
         f"{name}: the summary line gives the job's {n} ranks and {info.get('events')} events, "
         f"rank 0's {rank0}; info.json's mpi_size is the integer {n}", stderr)
    # each rank is its own recording, measuring the TSC's rate for itself: one `clock` and
    # rank 0's `tsc_hz` (if any) for the job, not a key per rank
    meta = info.get('meta', {})
    per_rank = sorted(k for k in meta if k.split('.rank')[0] in ('clock', 'tsc_hz') and
                      '.rank' in k)
    t.ok(meta.get('clock') in ('tsc', 'monotonic') and not per_rank and
         ('tsc_hz' in meta) == (meta.get('clock') == 'tsc'),
         f"{name}: one clock for the job ({meta.get('clock')!r}), no clock or tsc_hz per rank",
         per_rank)


def check_program(t, run, name, n, args, expect):
    n = run.o.ranks or n
    prog = os.path.join(run.o.bindir, f'mpi_{name}')
    trace = os.path.join(run.tmp, f'{name}.trace')
    plain = run.mpiexec(n, [prog] + args, traced=False)
    traced = run.mpiexec(n, [prog] + args, traced=True, trace=trace)
    if not t.ok(traced.returncode == 0 and os.path.exists(trace),
                f'{name}: traced with mpiexec -n {n} tracefs record', traced.stderr):
        return
    t.ok(plain.stdout == traced.stdout and plain.stdout,
         f'{name}: program output unchanged', f'{plain.stdout!r} != {traced.stdout!r}')
    t.ok(run.ls(trace, 'ranks') == [str(r) for r in range(n)], f'{name}: ranks/0..{n - 1}',
         run.ls(trace, 'ranks'))
    check_summary_line(t, run, name, n, trace, traced.stderr)
    job = {}
    for r in range(n):
        evs = run.events(trace, r)
        if expect is None:
            check_anysome(t, evs, r, n, run.o.openmpi)
            continue
        env = {'rank': {}, 'job': job}
        if name == 'probe':
            evs = polls_folded(evs, env)
            if not t.ok(evs is not None, f'probe: rank {r}: every unsuccessful '
                        'MPI_Improbe returns the same null message id'):
                continue
        d = match_seq(expect(r, n), evs, env)
        t.ok(d is None, f'{name}: rank {r} calls and arguments', d)
    if name == 'anysome':
        for r in (0, 1):
            ph = run.ls(trace, f'ranks/{r}/phases')
            t.ok('testsome' in ph, f'anysome: rank {r} has the phase MPI_Info_set switched', ph)
        names = {}
        for r in (0, 1):
            res = subprocess.run([run.o.tracefs, 'cat', trace,
                                  f'ranks/{r}/phases/testsome/threads/0/trace.txt'],
                                 capture_output=True, text=True)
            names[r] = re.findall(r'\b(MPI_\w+)\(', res.stdout)
        t.ok('MPI_Testsome' in names[0] and 'MPI_Waitany' not in names[0] and
             'MPI_Info_free' not in names[0],
             'anysome: rank 0\'s phase holds the Testsome loop, not the Waitany one, and ends '
             'at MPI_Info_delete', names[0][:8] + names[0][-3:])
        t.ok('MPI_Send' in names[1] and 'MPI_Barrier' not in names[1] and
             'MPI_Info_free' not in names[1],
             'anysome: rank 1\'s phase holds its second send and ends at ' +
             ('MPI_Info_delete' if run.o.openmpi else 'the empty value'), names[1])
    if name == 'dtype':
        check_mpi_types(t, run, trace, n)
    if name == 'ring':
        t.ok(all('mpi_types.txt' not in run.ls(trace, f'ranks/{r}') for r in range(n)),
             'ring: no ranks/<r>/mpi_types.txt where no rank constructs a datatype')
    if name == 'comms':
        t.ok(len(set(job.values())) == 4 and WORLD not in job.values(),
             'comms: split, dup, idup and intercommunicator ids agreed by all members, distinct',
             job)


def exp_mpi_types():
    """mpi_dtype.c's constructor calls in its order, `newtype` first: a vector, a contiguous
    type, a struct of predefined types, a struct of the contiguous type and MPI_INT (named
    {B}: filled in with that type's id), then a second vector that takes the first one's
    freed id."""
    return [('A', 'MPI_Type_vector(count=4, blocklength=1, stride=4, oldtype=MPI_INT)'),
            ('B', 'MPI_Type_contiguous(count=3, oldtype=MPI_DOUBLE)'),
            ('C', 'MPI_Type_create_struct(count=2, array_of_blocklengths="1,2", '
                  'array_of_displacements="0,8", array_of_types="MPI_INT,MPI_DOUBLE")'),
            ('D', 'MPI_Type_create_struct(count=2, array_of_blocklengths="1,2", '
                  'array_of_displacements="0,8", array_of_types="{B},MPI_INT")'),
            ('A', 'MPI_Type_vector(count=2, blocklength=2, stride=3, oldtype=MPI_INT)')]


def mounted_read(run, trace, rels):
    """The bytes of @rels of @trace as a FUSE mount serves them, or None without /dev/fuse."""
    if not os.path.exists('/dev/fuse'):
        return None
    mp = tempfile.mkdtemp(prefix='mnt-', dir=run.tmp)
    res = subprocess.run([run.o.tracefs, 'mount', trace, mp], capture_output=True, timeout=120)
    if res.returncode != 0:
        return {rel: res.stderr for rel in rels}
    try:
        out = {}
        for rel in rels:
            with open(os.path.join(mp, rel), 'rb') as f:
                out[rel] = f.read()
        return out
    finally:
        subprocess.run([run.o.tracefs, 'umount', mp], capture_output=True, timeout=120)


def check_mpi_types(t, run, trace, n):
    """ranks/<r>/mpi_types.txt: one line per datatype constructor call of mpi_dtype.c, the
    ids distinct but where the program frees one and makes another; the mount serves the
    same bytes as `tracefs cat`."""
    exp = exp_mpi_types()
    rels = [f'ranks/{r}/mpi_types.txt' for r in range(n)]
    cat = {}
    for r, rel in enumerate(rels):
        res = subprocess.run([run.o.tracefs, 'cat', trace, rel], capture_output=True,
                             timeout=120)
        cat[rel] = res.stdout
        lines = res.stdout.decode(errors='replace').splitlines()
        ids, calls = {}, []
        for line in lines:
            m = re.fullmatch(r'(type#\d+) = (.*)', line)
            calls.append(m.group(2) if m else line)
            if m:
                ids.setdefault(exp[len(calls) - 1][0] if len(calls) <= len(exp) else '?',
                               set()).add(m.group(1))
        named = {k: min(v) for k, v in ids.items()}
        want = [c.replace('{B}', named.get('B', '?')) for _, c in exp]
        t.ok(res.returncode == 0 and calls == want and
             all(len(v) == 1 for v in ids.values()) and
             len(set().union(*ids.values())) == 4,
             f'dtype: rank {r}: mpi_types.txt lists the 5 constructor calls of mpi_dtype.c, '
             'the second vector with the first one\'s id', res.stdout.decode(errors='replace'))
    mounted = mounted_read(run, trace, rels)
    if mounted is None:
        t.skip('dtype: mpi_types.txt through a mount', 'no /dev/fuse')
    else:
        t.ok(mounted == cat, 'dtype: the mounted mpi_types.txt of every rank is `tracefs cat`\'s',
             {k: (mounted.get(k), cat.get(k)) for k in rels if mounted.get(k) != cat.get(k)})


def exp_tagring(rank, size, iters):
    """Tags are the sender's rank: absolute in the decoded calls whatever the trace stores."""
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    seq = start(rank, size)
    st = f'{rel_rank(prv, rank)}:{rel_tag(prv, prv, rank)}:4:0,-:-:-:0'
    for _ in range(iters):
        seq += [('MPI_Sendrecv', {'dest': nxt, 'sendtag': rank, 'source': prv, 'recvtag': prv,
                                  'status.source': prv, 'status.tag': prv, 'status.count': 4,
                                  'status.cancelled': 0}),
                ('MPI_Irecv', {'source': prv, 'tag': prv, 'request': V('a')}),
                ('MPI_Isend', {'dest': nxt, 'tag': rank, 'request': V('b')}),
                ('MPI_Waitall', {'count': 2, 'array_of_requests': Reqs(V('a'), V('b')),
                                 'array_of_statuses': st})]
    return seq + [('MPI_Allreduce', {'count': 1, 'comm': WORLD}), ('MPI_Finalize', {})]


def n_grammars(run, trace):
    """Grammar sections of a trace: one per distinct grammar among its streams."""
    res = subprocess.run([run.o.tracefs, 'info', trace], capture_output=True, text=True,
                         check=True)
    return len(re.findall(r'^\s*\d+\s+grammar\s', res.stdout, re.M))


def check_tagring(t, run):
    """Tags derived from ranks: right absolute values at every rank, and the grammars do not
    grow with the rank count (ranks 0, 1 (receives tag 0, a literal) and P-1 have their own,
    every other rank shares one); the constant-tag ring keeps its grammars too."""
    prog = os.path.join(run.o.bindir, 'mpi_tagring')
    counts = {}
    for n in (4, 9):
        trace = os.path.join(run.tmp, f'tagring{n}.trace')
        res = run.mpiexec(n, [prog, '5'], traced=True, trace=trace)
        if not t.ok(res.returncode == 0, f'tagring: traced at {n} ranks', res.stderr):
            return
        for r in range(n):
            d = match_seq(exp_tagring(r, n, 5), run.events(trace, r), {'job': {}})
            t.ok(d is None, f'tagring: {n} ranks, rank {r} calls and absolute tags', d)
        counts[n] = n_grammars(run, trace)
    t.ok(counts[4] == counts[9] == 4, f'tagring: 4 grammars at 4 and at 9 ranks', counts)
    # at 9 ranks the constant tags 7 and 8 equal ranks 7 and 8: the capture takes them as
    # derived at ranks 6 to 8, and the merge gives them their literal twins back
    for n in (4, 9):
        trace = os.path.join(run.tmp, f'ring{n}.trace')
        res = run.mpiexec(n, [os.path.join(run.o.bindir, 'mpi_ring'), '5'], traced=True,
                          trace=trace)
        if not t.ok(res.returncode == 0, f'ring with constant tags: traced at {n} ranks',
                    res.stderr):
            continue
        for r in range(n):
            d = match_seq(exp_ring(r, n, 5), run.events(trace, r), {'job': {}})
            t.ok(d is None, f'ring with constant tags: {n} ranks, rank {r} calls', d)
        got = n_grammars(run, trace)
        t.ok(got == 3, f'ring with constant tags 7 and 8 at {n} ranks: 3 grammars (the two '
             f'ends and the middle)', got)
        check_ring_flows(t, run, trace, n, 5)


def check_ring_flows(t, run, trace, n, iters):
    """trace.json is valid trace-event JSON and draws one flow per message of the ring: per
    iteration, from each rank to the next, MPI_Sendrecv to MPI_Sendrecv and MPI_Isend to the
    MPI_Waitall that completed the MPI_Irecv."""
    res = subprocess.run([run.o.tracefs, 'cat', trace, 'trace.json'], capture_output=True)
    if not t.ok(res.returncode == 0, f'ring at {n} ranks: tracefs cat trace.json', res.stderr):
        return
    objs = json.loads(res.stdout)
    spans = collections.defaultdict(list)
    for o in objs:
        if o.get('ph') == 'X':
            spans[(o['pid'], o['tid'])].append(o)

    def call_at(e):
        return [x['name'] for x in spans[(e['pid'], e['tid'])]
                if x['ts'] <= e['ts'] <= x['ts'] + x['dur']]

    got = collections.Counter()
    for s, f in trace_event.flows_of(res.stdout).values():
        if s and f and s.get('cat') == 'mpi':
            got[(s['pid'], f['pid'], tuple(call_at(s)), tuple(call_at(f)))] += 1
    want = collections.Counter()
    for r in range(n):
        want[(r, (r + 1) % n, ('MPI_Sendrecv',), ('MPI_Sendrecv',))] = iters
        want[(r, (r + 1) % n, ('MPI_Isend',), ('MPI_Waitall',))] = iters
    problems = trace_event.validate(res.stdout)
    t.ok(not problems and got == want,
         f'ring at {n} ranks: trace.json valid, one flow per message ({2 * n * iters})',
         f'problems {problems[:3]}\nmissing {sorted((want - got).items())[:3]}\n'
         f'extra {sorted((got - want).items())[:3]}')


def check_manytags(t, run):
    """More receives in flight than a request pool has slots (64), told apart by their tags
    only (tags stay out of the pool hash): each iteration's receives get the ids the first
    one's got, so the trace's call signatures do not grow with the iterations. The same for
    40 MPI_Isend in flight, which MPICH completes at once under one handle value (more ids
    behind one handle than the 32 the queue once held)."""
    prog = os.path.join(run.o.bindir, 'mpi_manytags')
    for nt, mode, rank, call in ((100, 'send', 1, 'MPI_Irecv'), (40, 'isend', 0, 'MPI_Isend')):
        sigs = {}
        for iters in (3, 6):
            trace = os.path.join(run.tmp, f'manytags{mode}{iters}.trace')
            res = run.mpiexec(2, [prog, str(nt), str(iters), mode], traced=True, trace=trace)
            if not t.ok(res.returncode == 0, f'manytags {mode}: traced, {iters} iterations',
                        res.stderr):
                return
            evs = [e for e in run.events(trace, rank) if e['name'] == call]
            ids = [e['args']['request'] for e in evs]
            tags = [e['args']['tag'] for e in evs]
            want = list(range(1, nt + 1)) if rank else list(range(nt, 0, -1))
            t.ok(len(ids) == nt * iters and tags == want * iters,
                 f'manytags {mode}: {iters} x {nt} {call} with tags 1..{nt}',
                 (len(ids), tags[:5]))
            t.ok(all(ids[i * nt:(i + 1) * nt] == ids[:nt] for i in range(iters)),
                 f'manytags {mode}: {iters} iterations, each with the request ids of the first',
                 [ids[i * nt + nt - 1] for i in range(iters)])
            res = subprocess.run([run.o.tracefs, 'info', trace], capture_output=True,
                                 text=True, check=True)
            sigs[iters] = int(re.search(r'^call signatures:\s+(\d+)', res.stdout,
                                        re.M).group(1))
        t.ok(sigs[3] == sigs[6],
             f'manytags {mode}: as many call signatures at 6 iterations as at 3', sigs)


def check_status(t, run):
    """Status contents: bytes received, cancelled, MPI_ERROR after MPI_ERR_IN_STATUS."""
    trace = os.path.join(run.tmp, 'status.trace')
    res = run.mpiexec(2, [os.path.join(run.o.bindir, 'mpi_status')], traced=True, trace=trace)
    m = re.search(r'status count=3 cancelled=1 waitall=(-?\d+) truncated=(\d+) b=3 '
                  r'MPI_ERR_IN_STATUS=(\d+) MPI_ERR_TRUNCATE=(\d+)', res.stdout)
    if not t.ok(res.returncode == 0 and m and m.group(1) == m.group(3) and
                m.group(2) == m.group(4), 'status: traced; the MPI returns MPI_ERR_IN_STATUS '
                'and a truncation in the status', res.stdout + res.stderr):
        return
    in_status, trunc = int(m.group(3)), int(m.group(4))
    cls = V('errh', 'errh')
    exp0 = start(0, 2) + [
        ('MPI_Comm_set_errhandler', {'comm': WORLD, 'errhandler': cls}),
        ('MPI_Send', {'count': 3, 'dest': 1, 'tag': 5}),
        ('MPI_Send', {'count': 2, 'dest': 1, 'tag': 6}),
        ('MPI_Send', {'count': 1, 'dest': 1, 'tag': 7}),
        ('MPI_Barrier', {}), ('MPI_Finalize', {})]
    evs1 = run.events(trace, 1)
    # a second MPI_Wait (not on the cancelled request) completes a request left pending
    pending = [e['name'] for e in evs1].count('MPI_Wait') == 2
    undef = {'status.source': NO_STATUS, 'status.tag': NO_STATUS, 'status.count': NO_STATUS}
    exp1 = start(1, 2) + [
        ('MPI_Comm_set_errhandler', {'comm': WORLD, 'errhandler': cls}),
        # 3 of 8 posted ints
        ('MPI_Recv', {'count': 8, 'source': 0, 'tag': 5, 'status.source': 0,
                      'status.tag': 5, 'status.count': 12, 'status.cancelled': 0, 'result': 0}),
        # a status read without its communicator: its source as it is
        ('MPI_Get_count', {'status.source': 0, 'status.tag': 5, 'status.count': 12,
                           'status.cancelled': 0, 'count': 3}),
        # c is freed before t is made, and requests are pooled by all but their tag:
        # t may take c's id again (its own scope: no need to differ)
        ('MPI_Irecv', {'count': 1, 'source': 0, 'tag': 99, 'request': V('c', 'c')}),
        ('MPI_Cancel', {'request': V('c', 'c')}),
        # a cancelled request's status defines nothing but the flag
        ('MPI_Wait', dict(undef, **{'request': V('c', 'c'), 'status.cancelled': 1})),
        ('MPI_Test_cancelled', dict(undef, **{'status.cancelled': 1, 'flag': 1})),
        ('MPI_Irecv', {'count': 1, 'tag': 6, 'request': V('t')}),
        ('MPI_Irecv', {'count': 1, 'tag': 7, 'request': V('f')}),
        ('MPI_Waitall', {'count': 2, 'array_of_requests': Reqs(V('t'), V('f')),
                         'array_of_statuses': f'error:{trunc},' + (
                             'pending' if pending else 'r-1:7:4:0:0'),
                         'result': in_status}),
        ('MPI_Error_class', {'errorcode': ANY, 'errorclass': trunc})]
    if pending:
        exp1.append(('MPI_Wait', {'request': V('f'), 'status.source': 0, 'status.tag': 7,
                                  'status.count': 4, 'status.cancelled': 0}))
    exp1 += [('MPI_Barrier', {}), ('MPI_Finalize', {})]
    for r, exp in ((0, exp0), (1, exp1)):
        d = match_seq(exp, run.events(trace, r), {'errh': {}, 'job': {}})
        t.ok(d is None, f'status: rank {r} calls, counts, cancelled and errors', d)
    txt = subprocess.run([run.o.tracefs, 'cat', trace, 'ranks/1/threads/0/trace.txt'],
                         capture_output=True, text=True).stdout
    t.ok('status.count=12, status.cancelled=0)' in txt and
         f'array_of_statuses="error:{trunc},' in txt, 'status: the text view shows them', txt)


def exp_fortran(rank, size, f08=False, openmpi=False):
    """mpi_fortran.f90 (`use mpi`): the Fortran bindings reach the C wrappers with Fortran
    handles (MPI_INTEGER its own datatype id), a real status array, MPI_STATUSES_IGNORE,
    MPI_IN_PLACE and blank-trimmed strings. mpi_fortran_f08.f90 (`use mpi_f08`) the same,
    but its array section is sent as one element of a temporary datatype whose construction
    (inside the binding) is not recorded. Open MPI's bindings pass the C function statuses
    of their own for MPI_STATUSES_IGNORE (the trace shows what the MPI wrote there), and its
    mpi_f08 gets the array section as the compiler's contiguous copy (4 integers, as
    `use mpi`)."""
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    # one id for the split's result: members agree on it, the two halves never meet
    integer, vec, half = 'MPI_INTEGER', V('vec', 'type'), V('half', 'job')
    send = ('MPI_Send', {'count': 3, 'datatype': integer, 'dest': nxt, 'tag': 11, 'comm': WORLD})
    recv = ('MPI_Recv', {'count': 4, 'datatype': integer, 'source': prv, 'tag': 11, 'comm': WORLD,
                         'status.source': prv, 'status.tag': 11, 'status.count': 12,
                         'status.cancelled': 0})
    seq = start(rank, size) + ([send, recv] if rank == 0 else [recv, send]) + [
        # a status read without its communicator: its source as it is
        ('MPI_Get_count', {'status.source': prv, 'status.tag': 11, 'status.count': 12,
                           'status.cancelled': 0, 'datatype': integer, 'count': 3}),
        ('MPI_Irecv', {'count': 1, 'datatype': integer, 'source': prv, 'tag': 12, 'comm': WORLD,
                       'request': V('a')}),
        ('MPI_Isend', {'count': 1, 'datatype': integer, 'dest': nxt, 'tag': 12, 'comm': WORLD,
                       'request': V('b')}),
        ('MPI_Waitall', {'count': 2, 'array_of_requests': Reqs(V('a'), V('b')),
                         'array_of_statuses': f'{rel_rank(prv, rank)}:{rel_tag(12, prv, rank)}'
                                              ':4:0,-:-:-:0' if openmpi else ''})]
    if rank == 0:
        seq.append(('MPI_Send', dict(
            {'count': 1, 'datatype': V('section', 'type')} if f08 and not openmpi else
            {'count': 4, 'datatype': integer}, dest=1, tag=14, comm=WORLD)))
    elif rank == 1:
        seq.append(('MPI_Recv', {'count': 4, 'datatype': integer, 'source': 0, 'tag': 14,
                                 'status.source': 0, 'status.tag': 14, 'status.count': 16,
                                 'status.cancelled': 0}))
    seq += [
        ('MPI_Type_vector', {'count': 4, 'blocklength': 1, 'stride': 4, 'oldtype': integer,
                             'newtype': vec}),
        ('MPI_Type_commit', {'datatype': vec})]
    if rank == 0:
        seq.append(('MPI_Send', {'count': 1, 'datatype': vec, 'dest': 1, 'tag': 13, 'comm': WORLD}))
    elif rank == 1:
        seq.append(('MPI_Recv', {'count': 4, 'datatype': integer, 'source': 0, 'tag': 13,
                                 'status.source': 0, 'status.tag': 13, 'status.count': 16,
                                 'status.cancelled': 0}))
    info = V('info', 'info')
    return seq + [
        ('MPI_Type_free', {'datatype': vec}),
        ('MPI_Comm_split', {'comm': WORLD, 'color': rank % 2, 'split_key': rank, 'newcomm': half}),
        # the rank in the half, printed as the world rank at the same offset
        ('MPI_Comm_rank', {'comm': half, 'rank': rank}),
        ('MPI_Comm_size', {'comm': half, 'size': (size - rank % 2 + 1) // 2}),
        ('MPI_Barrier', {'comm': half}),
        ('MPI_Comm_free', {'comm': half}),
        ('MPI_Info_create', {'info': info}),
        ('MPI_Info_set', {'info': info, 'key': 'tracefs_phase', 'value': 'solve'}),
        ('MPI_Bcast', {'count': 3, 'datatype': integer, 'root': 0, 'comm': WORLD}),
        ('MPI_Allreduce', {'sendbuf': IN_PLACE, 'count': 1,
                           'datatype': integer, 'op': V('sum', 'op'), 'comm': WORLD}),
        ('MPI_Barrier', {'comm': WORLD}),
        ('MPI_Info_delete', {'info': info, 'key': 'tracefs_phase'}),
        ('MPI_Info_free', {'info': info}),
        ('MPI_Finalize', {})]


def out_fortran(size):
    """mpi_fortran.f90's line, from its arithmetic: each rank adds the 3 integers received
    (prv, 10 prv, 100 prv), the nonblocking ring's prv + 1, its rank in the half times the
    half's size and the broadcast (size, 7, 42); rank 1 adds rank 0's odd numbers 1..7 and
    the second row of the column-major 4x4 matrix of 1..16 (2, 6, 10, 14) weighted 1, 10,
    100, 1000."""
    check = 1 + 3 + 5 + 7 + 2 + 10 * 6 + 100 * 10 + 1000 * 14
    for r in range(size):
        prv = (r - 1) % size
        check += 111 * prv + prv + 1 + (r // 2) * ((size - r % 2 + 1) // 2) + size + 49
    return f'fortran size={size} check={check}\n'


def remember(name):
    """The value of an output argument, kept for a later argument that must equal it."""
    return Fn(lambda a, env: env.setdefault('addr', {}).setdefault(name, a) == a,
              f'the same {name} as before')


def exp_fortran_mpifh(rank, size, openmpi=False):
    """mpi_fortran_mpifh.f90 (`include 'mpif.h'`): struct datatypes of absolute addresses
    (as MPI_Get_address returned them) used from MPI_BOTTOM, which prints as offset 0x0,
    MPI_STATUS_IGNORE, MPI_IN_PLACE at the root only. Open MPI's binding passes the C function
    a status of its own for MPI_STATUS_IGNORE: the trace shows what the MPI wrote there."""
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    st = ((prv, 21, 8, 0) if openmpi else (NO_STATUS,) * 4)
    integer, ts, tr = 'MPI_INTEGER', V('ts', 'type'), V('tr', 'type')

    def struct(a, b, new):
        return ('MPI_Type_create_struct', {
            'count': 2, 'array_of_blocklengths': '1,1',
            'array_of_displacements': Fn(lambda v, env: v == '%d,%d' % (
                env['addr'][a], env['addr'][b]), f'the addresses of {a} and {b}'),
            'array_of_types': 'MPI_INTEGER,MPI_INTEGER',
            'newtype': new})
    seq = start(rank, size)
    for a, b, new in (('si', 'sd', ts), ('ri', 'rd', tr)):
        seq += [('MPI_Get_address', {'address': remember(a)}),
                ('MPI_Get_address', {'address': remember(b)}),
                struct(a, b, new), ('MPI_Type_commit', {'datatype': new})]
    return seq + [
        ('MPI_Sendrecv', {'sendbuf': 'buf#0', 'sendcount': 1, 'sendtype': ts,
                          'dest': nxt, 'sendtag': 21, 'recvbuf': 'buf#0',
                          'recvcount': 1, 'recvtype': tr, 'source': prv, 'recvtag': 21,
                          'comm': WORLD, 'status.source': st[0], 'status.tag': st[1],
                          'status.count': st[2], 'status.cancelled': st[3]}),
        ('MPI_Type_free', {'datatype': ts}), ('MPI_Type_free', {'datatype': tr}),
        ('MPI_Reduce', dict({'count': 1, 'datatype': integer, 'op': V('sum', 'op'), 'root': 0,
                             'comm': WORLD}, **({'sendbuf': IN_PLACE} if rank == 0 else {}))),
        ('MPI_Finalize', {})]


def out_fortran_mpifh(size):
    """Each rank receives prv + 1 and 100 prv; rank 0 prints their sum over the ranks."""
    return f'mpif.h size={size} total={sum(101 * p + 1 for p in range(size))}\n'


def check_fortran(t, run):
    """Fortran programs, unmodified, traced like C ones at 4 and 9 ranks: every rank's calls
    and arguments, statuses, the phase switched from Fortran, output unchanged."""
    # mpi_fortran_f08.f90 is mpi_fortran.f90 in the mpi_f08 module's syntax: the same calls
    progs = (('mpi_fortran', lambda r, s: exp_fortran(r, s, False, run.o.openmpi), out_fortran),
             ('mpi_fortran_mpifh', lambda r, s: exp_fortran_mpifh(r, s, run.o.openmpi),
              out_fortran_mpifh),
             ('mpi_fortran_f08', lambda r, s: exp_fortran(r, s, True, run.o.openmpi),
              out_fortran))
    for name, expect, out in progs:
        why = run.o.fortran_skip or (run.o.f08_skip if name.endswith('f08') else None)
        if why:
            t.skip(f'{name}: traced at 4 and 9 ranks', why)
            continue
        prog = os.path.join(run.o.bindir, name)
        for n in ((run.o.ranks,) if run.o.ranks else (4, 9)):
            trace = os.path.join(run.tmp, f'{name}{n}.trace')
            plain = run.mpiexec(n, [prog], traced=False)
            traced = run.mpiexec(n, [prog], traced=True, trace=trace)
            if not t.ok(traced.returncode == 0 and os.path.exists(trace),
                        f'{name}: traced at {n} ranks', traced.stderr):
                continue
            t.ok(plain.stdout == traced.stdout == out(n),
                 f'{name}: {n} ranks, output as computed, unchanged by tracing',
                 f'{plain.stdout!r} / traced {traced.stdout!r} / expected {out(n)!r}')
            t.ok(run.ls(trace, 'ranks') == [str(r) for r in range(n)],
                 f'{name}: {n} ranks, ranks/0..{n - 1}', run.ls(trace, 'ranks'))
            job = {}
            for r in range(n):
                d = match_seq(expect(r, n), run.events(trace, r), {'job': job})
                t.ok(d is None, f'{name}: {n} ranks, rank {r} calls and arguments', d)
            if name in ('mpi_fortran', 'mpi_fortran_f08'):
                t.ok(list(job) == ['half'] and re.fullmatch(r'comm#([2-9]|\d\d+)', job['half']),
                     f'{name}: {n} ranks, the split communicator has one new id on every rank',
                     job)
                check_fortran_phase(t, run, name, trace, n)


def check_fortran_phase(t, run, name, trace, n):
    """MPI_Info_set(info, 'tracefs_phase', phase) with phase a blank-padded character(16):
    every rank has the phase "solve", holding the calls made while it was open."""
    for r in range(n):
        ph = run.ls(trace, f'ranks/{r}/phases')
        res = subprocess.run([run.o.tracefs, 'cat', trace,
                              f'ranks/{r}/phases/solve/threads/0/trace.txt'],
                             capture_output=True, text=True)
        names = [m for m in re.findall(r'\b(MPI_\w+)\(', res.stdout)
                 if m not in ('MPI_Info_set', 'MPI_Info_delete')]
        t.ok(ph == ['solve'] and names == ['MPI_Bcast', 'MPI_Allreduce', 'MPI_Barrier'],
             f'{name}: {n} ranks, rank {r} phase "solve" holds Bcast, Allreduce, Barrier',
             f'{ph} {names}')

def check_refusals(t, run):
    """The 2D stencil needs a square rank count: others are refused at once."""
    prog = os.path.join(run.o.bindir, 'mpi_stencil2d')
    for n in (2, 3):
        try:
            res = run.mpiexec(n, [prog, '3'], traced=False, timeout=60)
        except subprocess.TimeoutExpired:
            t.ok(False, f'stencil2d: {n} ranks refused at start', 'timed out')
            continue
        lines = [ln for ln in res.stderr.splitlines() if 'mpi_stencil2d' in ln]
        t.ok(res.returncode != 0 and
             lines[:1] == [f'mpi_stencil2d: {n} ranks is not a square number'],
             f'stencil2d: {n} ranks refused at start with one line, exit {res.returncode}',
             res.stderr)


def check_abort(t, run):
    """MPI_Abort at rank 1 of 3: the launcher kills every rank with SIGKILL, recorders
    included, so the aborting rank saves its own trace first, as <output>.1, with the call
    at its end, and says so in one line; the job's status is the abort's code."""
    trace = os.path.join(run.tmp, 'abort.trace')
    prog = os.path.join(run.o.bindir, 'mpi_abort')
    try:
        res = run.mpiexec(3, [prog], traced=True, trace=trace, timeout=120)
    except subprocess.TimeoutExpired:
        t.ok(False, 'abort: traced job ends', 'timed out')
        return
    t.ok(res.returncode == 3 and res.stdout == 'rank 1 aborts\n',
         'abort: the job exits with the code of MPI_Abort (3), its output unchanged',
         f'{res.returncode} {res.stdout!r}')
    kept = trace + '.1'
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith('tracefs: rank ')]
    if not res.stderr.strip():
        # the launcher kills the job and may drop what the rank wrote last: on a loaded
        # machine MPICH's hydra lost even its own 'Abort(3) on node 1' line
        t.skip('abort: the aborting rank says where its trace is, in one line',
               'the launcher forwarded none of the job\'s stderr')
    else:
        t.ok(lines == [f'tracefs: rank 1 called MPI_Abort: kept its trace as {kept}'],
             'abort: the aborting rank says where its trace is, in one line', res.stderr)
    if not t.ok(os.path.exists(kept), 'abort: the aborting rank leaves <output>.1',
                sorted(os.listdir(run.tmp))):
        return
    d = match_seq(start(1, 3) + [('MPI_Barrier', {'comm': WORLD}),
                                 ('MPI_Abort', {'comm': WORLD, 'errorcode': 3})],
                  run.events(kept, 0), {'job': {}})
    t.ok(d is None, 'abort: its trace ends with the MPI_Abort call', d)


def saved_now(d, base):
    """What a shell's `base.*` in @d names at this moment: the ranks' files (temporary files
    are hidden, .base.N.tmp.XXXXXX, and never match)."""
    return sorted((f for f in os.listdir(d) if f.startswith(base + '.')),
                  key=lambda f: int(f.rsplit('.', 1)[1]) if f.rsplit('.', 1)[1].isdigit() else -1)


def merge_now(t, run, d, base, n, what):
    """`tracefs merge` of `base.*` straight after the launcher returned: every rank's file is
    there (reserved before its program started) and the merge waits for those still being
    saved, so the result holds all @n ranks. @return the merged trace, or None"""
    files = saved_now(d, base)
    kept = [f'{base}.{r}' for r in range(n)]
    if not t.ok(files == kept, f'{what}: every rank\'s file is there when the launcher returns',
                f'{files}, expected {kept}'):
        return None
    merged = os.path.join(d, f'{base}.merged')
    m = subprocess.run([run.o.tracefs, 'merge', '-o', merged] + files, capture_output=True,
                       text=True, cwd=d)
    if not t.ok(m.returncode == 0 and f' {n} ranks,' in m.stdout,
                f'{what}: tracefs merge straight after holds all {n} ranks',
                m.stdout + m.stderr):
        return None
    return merged


def check_exit(t, run):
    """A rank that exits without MPI_Finalize (rank 1 calls exit(3) mid-run): the launcher
    kills the job, recorders included (MPICH's mpiexec kills every rank's process group, Open
    MPI's the other ranks), yet every rank's trace is saved as <output>.<rank> by its saver,
    which outlives the kill, with every call the rank completed up to then at its end. Each
    file is reserved before the rank's program starts, so a `tracefs merge` run as soon as
    the launcher returns finds every rank and waits for the savers still at work."""
    n = run.o.ranks or 3
    trace = os.path.join(run.tmp, 'exit.trace')
    try:
        res = run.mpiexec(n, [os.path.join(run.o.bindir, 'mpi_exit')], traced=True,
                          trace=trace, timeout=120)
    except subprocess.TimeoutExpired:
        t.ok(False, 'exit: traced job ends', 'timed out')
        return
    merged = merge_now(t, run, run.tmp, 'exit.trace', n, 'exit')
    # MPICH's mpiexec adds its own report of the killed ranks on stdout, traced or not
    t.ok(res.returncode != 0 and res.stdout.startswith('rank 1 exits\n'),
         'exit: the job fails, its output unchanged', f'{res.returncode} {res.stdout!r}')
    if not merged:
        return
    kept = [f'{trace}.{r}' for r in range(n)]
    for r in range(n):
        evs = run.events(kept[r], 0)
        exp = start(r, n) + [('MPI_Barrier', {'comm': WORLD}),
                             ('MPI_Allreduce', {'count': 1, 'comm': WORLD}),
                             ('MPI_Bcast', {'count': 1, 'comm': 'MPI_COMM_SELF'})]
        # the receive the others were killed in never returned: it may or may not be there
        extra = [e['name'] for e in evs[len(exp):]]
        d = match_seq(exp, evs[:len(exp)], {'job': {}})
        t.ok(d is None and set(extra) <= ({'MPI_Recv'} if r != 1 else set()),
             f'exit: rank {r}\'s trace ends with its last calls', d or extra)
    last = [run.events(merged, r)[-1:] for r in range(n)]
    t.ok(all(ev and ev[0]['name'] in ('MPI_Bcast', 'MPI_Recv') for ev in last),
         'exit: the merged trace holds every rank up to its last call',
         [ev[0]['name'] if ev else None for ev in last])
    check_exit_stagger(t, run, n)


def check_exit_stagger(t, run, n, per_rank=20000):
    """Ranks that all exit without MPI_Finalize, at different times, with traces of different
    sizes (mpi_exit stagger: rank r makes per_rank * (r + 1) broadcasts of counts 1..64 on
    MPI_COMM_SELF, waits r * 100 ms and calls exit(3)); the launcher kills those still running
    when the first has gone. Merged as soon as the launcher returns: every rank holds its
    calls in order, and a rank that said it exited holds every one of its broadcasts."""
    d = os.path.join(run.tmp, 'stagger')
    os.makedirs(d)
    try:
        res = subprocess.run([run.o.mpiexec, '-n', str(n), run.o.tracefs, 'record',
                              '--trace=mpi', '-o', 'stagger.trace', '--',
                              os.path.join(run.o.bindir, 'mpi_exit'), 'stagger', str(per_rank)],
                             capture_output=True, text=True, timeout=300, cwd=d)
    except subprocess.TimeoutExpired:
        t.ok(False, 'exit stagger: traced job ends', 'timed out')
        return
    merged = merge_now(t, run, d, 'stagger.trace', n, 'exit stagger')
    said = {int(m.group(1)): int(m.group(2)) for m in
            re.finditer(r'^rank (\d+) exits after (\d+) broadcasts$', res.stdout, re.M)}
    t.ok(res.returncode != 0 and said, 'exit stagger: the job fails after a rank exits',
         f'{res.returncode} {res.stdout[-300:]!r}')
    if not merged:
        return
    for r in range(n):
        evs = run.events(merged, r)
        exp = start(r, n) + [('MPI_Barrier', {'comm': WORLD}),
                             ('MPI_Allreduce', {'count': 1, 'comm': WORLD}),
                             ('MPI_Bcast', {'count': 1, 'comm': 'MPI_COMM_SELF'})]
        k = len(evs) - len(exp)
        exp += [('MPI_Bcast', {'count': i % 64 + 1, 'comm': 'MPI_COMM_SELF'})
                for i in range(max(k, 0))]
        diff = match_seq(exp, evs, {'job': {}})
        want = said.get(r)
        t.ok(diff is None and 0 <= k <= per_rank * (r + 1) and (want is None or k == want),
             f'exit stagger: rank {r} holds its calls in order'
             + (', all of them (it exited itself)' if want is not None else ''),
             diff or f'{k} broadcasts, said {want}')


def check_errors(t, run):
    """A failing call's result is its error class, the same at every rank and in every run
    (MPICH's error codes carry a per-process message index)."""
    trace = os.path.join(run.tmp, 'errors.trace')
    res = run.mpiexec(2, [os.path.join(run.o.bindir, 'mpi_errors')], traced=True,
                      trace=trace)
    m = re.search(r'MPI_ERR_RANK=(\d+) MPI_ERR_COUNT=(\d+) got (\d+) (\d+)', res.stdout)
    if not t.ok(res.returncode == 0 and m and m.group(1) == m.group(3) and
                m.group(2) == m.group(4), 'errors: traced; the calls fail with those classes',
                res.stdout + res.stderr):
        return
    err_rank, err_count = int(m.group(1)), int(m.group(2))
    for r in (0, 1):
        d = match_seq(start(r, 2) + [
            ('MPI_Comm_set_errhandler', {'comm': WORLD}),
            ('MPI_Send', {'dest': 7, 'result': err_rank}),
            ('MPI_Send', {'count': -1, 'dest': 1 - r, 'result': err_count}),
            ('MPI_Error_class', {'errorclass': err_rank, 'result': 0}),
            ('MPI_Error_class', {'errorclass': err_count, 'result': 0}),
            ('MPI_Finalize', {})], run.events(trace, r), {'job': {}})
        t.ok(d is None, f'errors: rank {r}: failing calls return their error classes', d)


def check_commloop(t, run):
    """Communicators made and freed in a loop (mpi_commloop.c) take the same agreed ids every
    iteration, so the trace does not grow with the iterations."""
    prog = os.path.join(run.o.bindir, 'mpi_commloop')
    sizes = {}
    for it in (10, 1000):
        trace = os.path.join(run.tmp, f'commloop{it}.trace')
        res = run.mpiexec(2, [prog, str(it)], traced=True, trace=trace,
                          extra=('--timing=none',))
        if not t.ok(res.returncode == 0, f'commloop: traced, {it} iterations', res.stderr):
            return
        sizes[it] = os.path.getsize(trace)
        if it != 10:
            continue
        job = {}
        for r in (0, 1):
            dup, half = V('dup', 'job'), V(f'half{r}', 'job2')
            seq = [('MPI_Init', {}), ('MPI_Comm_rank', {'comm': WORLD, 'rank': r})]
            for _ in range(it):
                seq += [('MPI_Comm_dup', {'comm': WORLD, 'newcomm': dup}),
                        ('MPI_Barrier', {'comm': dup}),
                        ('MPI_Comm_split', {'comm': dup, 'color': r, 'newcomm': half}),
                        ('MPI_Comm_free', {'comm': half}), ('MPI_Comm_free', {'comm': dup})]
            d = match_seq(seq + [('MPI_Finalize', {})], run.events(trace, r), {'job': job})
            t.ok(d is None, f'commloop: rank {r}: every iteration\'s communicators have the '
                 'ids of the first\'s, the copy the same on both ranks', d)
    t.ok(sizes[1000] <= sizes[10] * 1.05, f'commloop: the trace does not grow from 10 to '
         f'1000 iterations: {sizes[10]} -> {sizes[1000]} bytes')


def check_inprocess(t, run):
    """Without `tracefs record`: both libraries preloaded into the ranks only (not into
    mpiexec), TFS_TRACE=mpi; the ranks still merge at MPI_Finalize into TFS_OUTPUT."""
    o = run.o
    trace = os.path.join(run.tmp, 'inproc.trace')
    prog = os.path.join(o.bindir, 'mpi_ring')
    cmd = [o.mpiexec, '-n', '4', 'env', f'LD_PRELOAD={o.caplib}:{o.lib}', 'TFS_TRACE=mpi',
           f'TFS_OUTPUT={trace}', prog, '3']
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=run.tmp)
    if not t.ok(res.returncode == 0 and os.path.exists(trace),
                'in-process: ring traced into one trace', res.stderr):
        return
    t.ok(run.ls(trace, 'ranks') == ['0', '1', '2', '3'], 'in-process: ranks/0..3')
    for r in range(4):
        d = match_seq(exp_ring(r, 4, 3), run.events(trace, r), {'job': {}})
        t.ok(d is None, f'in-process: rank {r} calls and arguments', d)
    t.ok(sorted(os.listdir(run.tmp)).count('inproc.trace') == 1 and
         not any(f.startswith('inproc.trace.') for f in os.listdir(run.tmp)),
         'in-process: no per-rank files left')


def check_launchers(t, o, tmp):
    """`tracefs record` under each launcher looks for the wrappers of that launcher's MPI:
    with libtfscapture.so alone in a directory, the error names the one missing."""
    lone = os.path.join(tmp, 'lone')
    os.makedirs(lone, exist_ok=True)
    cap = os.path.join(lone, 'libtfscapture.so')
    if not os.path.exists(cap):
        os.symlink(o.caplib, cap)
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(('PMI_', 'OMPI_COMM_WORLD_', 'TFS_'))}
    for rank, size, lib in (('PMI_RANK', 'PMI_SIZE', 'libtfsmpi.so'),
                            ('OMPI_COMM_WORLD_RANK', 'OMPI_COMM_WORLD_SIZE',
                             'libtfsmpi-ompi.so')):
        env = dict(base, TFS_CAPTURE_LIB=cap, **{rank: '0', size: '2'})
        res = subprocess.run([o.tracefs, 'record', '-o', os.path.join(tmp, 'none.trace'), '--',
                              'true'], env=env, capture_output=True, text=True, cwd=tmp)
        lines = res.stderr.splitlines()
        t.ok(res.returncode != 0 and len(lines) == 1 and
             f'cannot find {lib} next to {cap}' in lines[0],
             f'record under {rank}: looks for {lib}, one line when it is missing', res.stderr)


def check_coverage(t, o):
    """Every MPI_ function mpi.h declares (read here with a regex, not the generator) is
    exported by libtfsmpi.so, except those the library lacks (listed `absent`)."""
    pp = subprocess.run(o.cc.split() + ['-E', '-P', '-x', 'c', '-', f'-I{o.mpi_inc}'],
                        input='#include <mpi.h>\n', capture_output=True, text=True, check=True)
    declared = set(re.findall(r'\b(?:int|double|MPI_\w+)\s+(MPI_\w+)\s*\([^;]*\)[^;]*;',
                              pp.stdout))
    declared = {d for d in declared if 'P' + d in pp.stdout}
    absent = set()
    for line in open(o.annot):
        f = line.split('#')[0].split()
        if len(f) == 3 and f[1] == '-' and f[2] == 'absent':
            absent.add(f[0])
    nm = subprocess.run(['nm', '-D', '--defined-only', o.lib], capture_output=True, text=True,
                        check=True).stdout
    exported = set(re.findall(r' T (MPI_\w+)', nm))
    missing = sorted(declared - exported - absent)
    t.ok(len(declared) > 400 and not missing,
         f'every MPI function of mpi.h is wrapped ({len(exported)} of {len(declared)}, '
         f'{len(absent)} absent from the library)', missing[:20])
    libmpi = subprocess.run(['nm', '-D', '--defined-only', o.libmpi], capture_output=True,
                            text=True).stdout
    t.ok(all(f'P{a}' not in libmpi for a in absent),
         'the functions not wrapped are really missing from the MPI library', absent)


SMALL_H = '''typedef int MPI_Comm; typedef int MPI_Request;
int MPI_Foo(int *outval, const int *inval, void *opaque, int dest, MPI_Comm comm);
int PMPI_Foo(int *, const int *, void *, int, MPI_Comm);
int MPI_Bar(int count, MPI_Request array_of_requests[]);
int PMPI_Bar(int count, MPI_Request array_of_requests[]);
int MPI_Nopmpi(int x);
'''


def check_generator(t, o, tmp):
    """The generator on a small header: what C types alone give (an unannotated int * is
    read after the call, only on success; const int * before; void * by address), what
    annotations add, and one-line errors naming the file and line of a bad annotation."""
    h = os.path.join(tmp, 'small.h')
    with open(h, 'w') as f:
        f.write(SMALL_H)
    kinds, wrap, lst = (os.path.join(tmp, n) for n in ('k.c', 'w.c', 'l.txt'))
    res = subprocess.run([sys.executable, o.gen, '--header', h, '--annot', o.annot,
                          '--kinds', kinds, '--wrap', wrap, '--list', lst],
                         capture_output=True, text=True)
    if not t.ok(res.returncode == 0, 'generator runs on a small header', res.stderr):
        return
    names = open(lst).read().split()
    t.ok(names == ['MPI_Bar', 'MPI_Foo'], 'generator wraps the functions with a PMPI twin',
         names)
    w, k = open(wrap).read(), open(kinds).read()
    foo = w[w.index('int MPI_Foo('):w.index('int MPI_Bar(') if w.index('int MPI_Bar(') >
            w.index('int MPI_Foo(') else len(w)]
    call = foo.index('ret = ((__typeof__(&PMPI_Foo))mpirt_next(&next_Foo, "PMPI_Foo"))(')
    out_at = foo.find('ret == MPI_SUCCESS && outval ? (uint64_t)(int64_t)*outval')
    in_at = foo.find('inval ? (uint64_t)(int64_t)*inval')
    t.ok(out_at > call and 0 < in_at < call,
         'an unannotated int * is read after a successful call, a const int * before', foo)
    pfoo = w[w.index('int PMPI_Foo('):w.index('int MPI_Foo(')]
    t.ok('if (mpirt_bypassed(__builtin_return_address(0))) {\n\t\treturn MPI_Foo(outval, inval, '
         'opaque, dest, comm);' in pfoo and 'mpirt_next(&next_Foo, "PMPI_Foo"))(outval' in pfoo
         and 'PMPI_Nopmpi' not in w,
         'PMPI_ is redefined: to the wrapper for the bindings that bypass MPI_ (mpi_f08), '
         'else to the library', pfoo)
    t.ok('(uint64_t)(uintptr_t)opaque' in foo and
         '{"opaque", TFS_TYPE_HEX, TFS_ENC_VAL' in k, 'an opaque void * is its address', k)
    t.ok('{"dest", TFS_TYPE_I64, TFS_ENC_RANK' in k and 'mpirt_rank(mpirt_delta_comm(comm), dest)'
         in foo, 'an annotated rank is relative to the communicator', k)
    t.ok('mpirt_req_take_all(array_of_requests, rq_n' in w and '(int64_t)count' in w,
         'a request array takes its length from the annotated count', w[-1500:])
    bad = os.path.join(tmp, 'bad.txt')
    with open(bad, 'w') as f:
        f.write('# comment\n*\tdest\trank\nMPI_Foo\tdest\tbogus\n')
    res = subprocess.run([sys.executable, o.gen, '--header', h, '--annot', bad,
                          '--kinds', kinds], capture_output=True, text=True)
    t.ok(res.returncode != 0 and res.stderr.strip() == f'{bad}:3: unknown attribute bogus',
         'a bad annotation is a one-line error naming file and line', res.stderr)
    check_generator_impls(t, o, tmp, h)


# a second implementation's header: one function more, a parameter named otherwise
OTHER_H = '''typedef int MPI_Comm; typedef int MPI_Request;
int MPI_Foo(int *outval, const int *inval, void *opaque, int target, MPI_Comm comm);
int PMPI_Foo(int *, const int *, void *, int, MPI_Comm);
int MPI_Bar(int count, MPI_Request array_of_requests[]);
int PMPI_Bar(int count, MPI_Request array_of_requests[]);
int MPI_Baz(MPI_Comm comm);
int PMPI_Baz(MPI_Comm comm);
'''


def check_generator_impls(t, o, tmp, h):
    """Two implementations (--next): one kinds table, the second's calls numbered after the
    first's; a parameter the second names otherwise gets the annotated standard name (and
    that name's rules); a name= rule is checked."""
    h2, annot = os.path.join(tmp, 'other.h'), os.path.join(tmp, 'names.txt')
    with open(h2, 'w') as f:
        f.write(OTHER_H)
    with open(annot, 'w') as f:
        f.write(open(o.annot).read() + '\nMPI_Foo\ttarget\tname=dest\n')
    kinds, w1, w2, l2 = (os.path.join(tmp, n) for n in ('k2.c', 'w1.c', 'w2.c', 'l2.txt'))
    res = subprocess.run([sys.executable, o.gen, '--header', h, '--annot', annot,
                          '--kinds', kinds, '--wrap', w1, '--next', '--header', h2,
                          '--wrap', w2, '--list', l2], capture_output=True, text=True)
    if not t.ok(res.returncode == 0, 'generator runs on two implementations', res.stderr):
        return
    k, a, b = open(kinds).read(), open(w1).read(), open(w2).read()
    names = re.findall(r'\{"(MPI_\w+)", "mpi"', k)
    t.ok(names == ['MPI_Bar', 'MPI_Foo', 'MPI_Bar', 'MPI_Baz', 'MPI_Foo'] and
         'cap_mpi_n_kinds = 5;' in k and 'N_CALLS + 1,' in a and 'N_CALLS + 4,' in b and
         'N_CALLS + 2,' in b and 'N_CALLS + 2,' not in a and
         open(l2).read().split() == ['MPI_Bar', 'MPI_Baz', 'MPI_Foo'],
         'two implementations share one kinds table, the second numbered after the first',
         names)
    foo = b[b.index('int MPI_Foo('):]
    t.ok(foo.startswith('int MPI_Foo(int *outval, const int *inval, void *opaque, int dest, '
                        'MPI_Comm comm)') and
         'mpirt_rank(mpirt_delta_comm(comm), dest)' in foo and
         k.count('{"dest", TFS_TYPE_I64, TFS_ENC_RANK') == 2,
         'a parameter named otherwise is given its annotated name and that name\'s rules',
         foo[:300])
    bad = os.path.join(tmp, 'badname.txt')
    for line, why in (('*\ttarget\tname=dest', 'name=<standard name> stands alone in a '
                       'function rule'),
                      ('MPI_Foo\ttarget\tname=comm', 'MPI_Foo: target renamed comm, which it '
                       'has already')):
        with open(bad, 'w') as f:
            f.write(line + '\n')
        res = subprocess.run([sys.executable, o.gen, '--header', h2, '--annot', bad,
                              '--kinds', kinds], capture_output=True, text=True)
        t.ok(res.returncode != 0 and len(res.stderr.splitlines()) == 1 and
             why in res.stderr, f'a bad name= rule is a one-line error: {why}', res.stderr)


def check_sizes(t, run):
    prog = os.path.join(run.o.bindir, 'mpi_stencil2d')
    sizes = {}
    for n, it in ((9, 100), (16, 100), (25, 100), (9, 1000)):
        trace = os.path.join(run.tmp, f'size_{n}_{it}.trace')
        res = run.mpiexec(n, [prog, str(it)], traced=True, trace=trace,
                          extra=('--timing=none',))
        if not t.ok(res.returncode == 0, f'stencil2d size run {n} ranks {it} iterations',
                    res.stderr):
            return
        sizes[(n, it)] = os.path.getsize(trace)
        t.diag(f'stencil2d untimed: {n:2d} ranks {it:4d} iterations: {sizes[(n, it)]} bytes')
    base = sizes[(9, 100)]
    # the Pilgrim property: what may still grow with ranks is the stream table (a few
    # repeating bytes once compressed, FORMAT.md §8) and decimal widths; with iterations,
    # only the repetition counts' varints. Pilgrim writes 3,506 B at 9 ranks: at most half.
    for n in (16, 25):
        v = sizes[(n, 100)]
        t.ok(v <= base * 1.03, f'stencil2d trace size does not grow from 9 to {n} ranks: '
             f'{base} -> {v} bytes (+{100 * (v - base) / base:.1f}%)')
    v = sizes[(9, 1000)]
    t.ok(v <= base * 1.02, f'stencil2d trace size does not grow from 100 to 1000 iterations: '
         f'{base} -> {v} bytes (+{100 * (v - base) / base:.1f}%)')
    worst = max(sizes.values())
    t.ok(worst <= 3506 // 2, f'stencil2d untimed traces are at most half of Pilgrim\'s 3,506 '
         f'bytes: largest {worst} bytes')


def check_layers(t, run):
    """With the default options (every category, not only mpi), what the MPI library does on
    its own threads (MPICH's progress thread polls a pipe) is its layer, not the program's:
    not recorded, so the untimed size stays flat from 9 ranks on; with `nested` it is
    recorded, marked with the MPI call it belongs to."""
    prog = os.path.join(run.o.bindir, 'mpi_stencil2d')
    sizes = {}
    for n in (9, 16, 25):
        trace = os.path.join(run.tmp, f'layers_{n}.trace')
        res = run.mpiexec(n, [prog, '100'], traced=True, trace=trace,
                          extra=('--trace=all', '--timing=none'))
        if not t.ok(res.returncode == 0, f'layers: stencil2d with every category at {n} ranks',
                    res.stderr):
            return
        sizes[n] = os.path.getsize(trace)
        t.ok(all(run.ls(trace, f'ranks/{r}/threads') == ['0'] for r in range(n)),
             f'layers: {n} ranks, each with its main thread only', n)
    base = sizes[9]
    t.ok(all(v <= base * 1.03 for v in sizes.values()), 'layers: the untimed size with every '
         f'category does not grow from 9 ranks on: {sizes}')
    trace = os.path.join(run.tmp, 'layers_nested.trace')
    res = run.mpiexec(4, [prog, '10'], traced=True, trace=trace,
                      extra=('--trace=all,nested', '--timing=none'))
    if not t.ok(res.returncode == 0, 'layers: stencil2d with nested calls', res.stderr):
        return
    marked = []
    for th in run.ls(trace, 'ranks/1/threads'):
        out = subprocess.run([run.o.tracefs, 'cat', trace,
                              f'ranks/1/threads/{th}/events.jsonl'],
                             capture_output=True, text=True, check=True).stdout
        evs = [json.loads(line) for line in out.splitlines() if line.strip()]
        if th != '0':
            marked += evs
    if not marked:
        t.skip('layers: the MPI library\'s own threads marked', 'this MPI starts none here')
        return
    t.ok(all(e['args'].get('depth', 0) >= 1 and e['args'].get('in', '').startswith('MPI_')
             for e in marked if e['name'] not in ('malloc', 'calloc', 'realloc', 'free')),
         f'layers: nested: the {len(marked)} events of the MPI library\'s own thread are '
         'marked with a depth and the MPI call that started it',
         [e for e in marked if 'in' not in e['args']][:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tracefs')
    ap.add_argument('--bindir')
    ap.add_argument('--mpiexec', default='mpiexec')
    ap.add_argument('--lib')
    ap.add_argument('--libmpi')
    ap.add_argument('--cc', default='cc')
    ap.add_argument('--mpi-inc')
    ap.add_argument('--annot')
    ap.add_argument('--gen')
    ap.add_argument('--caplib')
    ap.add_argument('--no-mpi', action='store_true')
    ap.add_argument('--fortran-skip', help='report the Fortran cases skipped, for this reason')
    ap.add_argument('--f08-skip', help='report the mpi_f08 case skipped, for this reason')
    ap.add_argument('--only', help='run only these cases, comma-separated (a program, coverage, '
                    'status, tagring, manytags, abort, exit, errors, commloop, fortran, refusals, '
                    'inproc, sizes, layers)')
    ap.add_argument('--ranks', type=int, help='run the programs at this many ranks')
    ap.add_argument('--openmpi', action='store_true',
                    help='the MPI is Open MPI: let mpiexec run as root, more ranks than cores, '
                    'over shared memory only (no network in a container)')
    ap.add_argument('--skip-why', default='built without MPI',
                    help='with --no-mpi: the reason printed')
    o = ap.parse_args()
    if o.no_mpi:
        print(f'1..0 # SKIP {o.skip_why}')
        return 77
    if o.openmpi:
        os.environ.update({'OMPI_ALLOW_RUN_AS_ROOT': '1', 'OMPI_ALLOW_RUN_AS_ROOT_CONFIRM': '1',
                           'OMPI_MCA_rmaps_base_oversubscribe': '1',
                           'OMPI_MCA_btl': 'self,vader'})
    only = set(o.only.split(',')) if o.only else None

    def want(case):
        return only is None or case in only
    for k in ('tracefs', 'bindir', 'lib', 'annot', 'gen', 'caplib'):
        setattr(o, k, os.path.abspath(getattr(o, k)))
    t = Tap()
    with tempfile.TemporaryDirectory(prefix='tfs-mpi-') as tmp:
        run = Runner(o, tmp)
        if want('coverage'):
            check_coverage(t, o)
            check_generator(t, o, tmp)
            check_launchers(t, o, tmp)
        for name, n, args, expect in PROGRAMS:
            if want(name):
                check_program(t, run, name, n, args, expect)
        for name, fn in (('status', check_status), ('tagring', check_tagring),
                         ('manytags', check_manytags), ('abort', check_abort),
                         ('exit', check_exit),
                         ('errors', check_errors), ('commloop', check_commloop),
                         ('fortran', check_fortran), ('refusals', check_refusals)):
            if want(name):
                fn(t, run)
        if want('inproc'):
            check_inprocess(t, run)
        if want('sizes'):
            check_sizes(t, run)
        if want('layers'):
            check_layers(t, run)
    return t.done()


if __name__ == '__main__':
    sys.exit(main())
