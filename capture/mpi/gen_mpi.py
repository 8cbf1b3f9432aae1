#!/usr/bin/env python3
"""Generate the PMPI wrappers and their event kinds from the installed mpi.h.

Reads the preprocessed prototypes of mpi.h (every MPI_X that has a PMPI_X twin) and the
annotations of mpi_annot.txt (what the C types do not say: ranks, directions, array lengths,
released handles, the standard's name of a parameter an implementation names otherwise), and
writes:
  --kinds FILE  the event kinds (cap_mpi_kinds[], calls N_CALLS + i), always; empty without
                an mpi.h, so the consumer builds the same way with or without MPI
  --wrap FILE   the wrappers (one per function, recording through mpi_rt.c)
  --list FILE   the wrapped function names, one per line (the test of coverage reads it)
Several MPI implementations (MPICH, Open MPI) have different sets of functions: the options
after each `--next` describe one more (its --inc or --header, --wrap, --list), whose kinds
follow the previous ones' in the one table, so one consumer decodes the calls of every
implementation built for. It does not decide how values are stored beyond choosing an
encoding per argument.
"""
import argparse
import re
import subprocess
import sys

HANDLES = {
    'MPI_Comm': ('MPIRT_COMM', 'comm'),
    'MPI_Datatype': ('MPIRT_TYPE', 'type'),
    'MPI_Op': ('MPIRT_OP', 'op'),
    'MPI_Group': ('MPIRT_GROUP', 'group'),
    'MPI_Request': ('MPIRT_REQ', 'req'),
    'MPI_File': ('MPIRT_FILE', 'mpifile'),
    'MPI_Win': ('MPIRT_WIN', 'win'),
    'MPI_Info': ('MPIRT_INFO', 'info'),
    'MPI_Errhandler': ('MPIRT_ERRH', 'errh'),
    'MPI_Message': ('MPIRT_MSG', 'msg'),
    'MPI_Session': ('MPIRT_SESSION', 'session'),
}
NULLS = {'MPI_Request': 'MPI_REQUEST_NULL', 'MPI_Message': 'MPI_MESSAGE_NULL'}
INTS = {'int', 'MPI_Aint', 'MPI_Count', 'MPI_Offset', 'MPI_Fint', 'long', 'unsigned',
        'unsigned int', 'long long', 'size_t'}
BUF_NAMES = {'origin_addr', 'result_addr', 'compare_addr', 'inbuf', 'outbuf', 'inoutbuf',
             'location', 'buffer', 'pack_buf'}
MAX_ARGS = 32
# value-name classes of mpi_annot.txt ({class: (is_flags, [NAME...])}), set by main()
VNAMES = {}
# conversions of handles and statuses between the Fortran and C bindings
CONVERSION = re.compile(r'_(f2c|c2f|f082c|c2f08|f082f|f2f08)$')


class Param:
    def __init__(self, text):
        self.text = text.strip()
        t = self.text
        self.arr = t.endswith(']')
        if self.arr:
            t = t[:t.index('[')].strip()
        m = re.search(r'(\w+)\s*$', t)
        self.name = m.group(1)
        decl = t[:m.start()].strip()
        self.const = bool(re.search(r'\bconst\b', decl))
        self.ptr = decl.count('*')
        self.base = re.sub(r'\s+', ' ', re.sub(r'\bconst\b|\*', ' ', decl)).strip()
        self.func_ptr = '(' in self.text

    def rename(self, name):
        """Call the parameter @name (the definition may name it otherwise than mpi.h)."""
        head, bracket, tail = self.text.partition('[')
        head = re.sub(r'\b' + self.name + r'(\s*)$', name + r'\1', head)
        self.text = head + bracket + tail
        self.name = name


def parse_header(text):
    """{name: (ret, [Param], variadic)} for every MPI_X with a PMPI_X twin."""
    text = re.sub(r'__attribute__\s*\(\((?:[^()]|\([^()]*\))*\)\)', '', text)
    protos = {}
    for stmt in text.replace('\n', ' ').split(';'):
        stmt = stmt.strip()
        if stmt.startswith('typedef') or stmt.startswith('extern "C"'):
            continue
        m = re.match(r'^(?:extern\s+)?([\w\s\*]+?)\s*\b(P?MPI_\w+)\s*\((.*)\)\s*$', stmt)
        if not m:
            continue
        protos[m.group(2)] = (m.group(1).strip(), m.group(3).strip())
    out = {}
    for name, (ret, params) in sorted(protos.items()):
        if not name.startswith('MPI_') or 'P' + name not in protos:
            continue
        # parameter names come from the MPI_ prototype (ROMIO's PMPI_ ones have none)
        variadic = False
        plist = []
        if params and params != 'void':
            for p in split_params(params):
                if p.strip() == '...':
                    variadic = True
                    continue
                plist.append(Param(p))
        out[name] = (ret, plist, variadic)
    return out


def split_params(s):
    depth, cur, res = 0, '', []
    for ch in s:
        if ch == '(':
            depth += 1
        elif ch == ')':
            depth -= 1
        if ch == ',' and depth == 0:
            res.append(cur)
            cur = ''
        else:
            cur += ch
    res.append(cur)
    return res


def parse_annot(path):
    """The parameter rules, the function hooks, the predefined handles of each class and the
    named values of each value-name class ({class: (is_flags, [NAME...])})."""
    rules, hooks, predef, vnames = {}, {}, {}, {}
    classes = {sym: cls for cls, sym in HANDLES.values()}
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) < 3:
                sys.exit(f'{path}:{ln}: expected "<scope> <param> <attr>..."')
            scope, param, attrs = parts[0], parts[1], parts[2:]
            if scope == 'predef':
                if param not in classes or param in predef:
                    sys.exit(f'{path}:{ln}: predef needs a handle class, once: '
                             + ' '.join(sorted(classes)))
                predef[param] = attrs
                continue
            if scope in ('values', 'flags'):
                if param in vnames or not re.fullmatch(r'mpi_\w+', param):
                    sys.exit(f'{path}:{ln}: {scope} needs a new class mpi_<name>')
                vnames[param] = (scope == 'flags', attrs)
                continue
            if param == '-':
                hooks.setdefault(scope, []).extend(attrs)
                continue
            d = {}
            for a in attrs:
                k, _, v = a.partition('=')
                if k not in ('rank', 'rval', 'val', 'in', 'out', 'inout', 'len', 'free',
                             'skip', 'name', 'atroot', 'names'):
                    sys.exit(f'{path}:{ln}: unknown attribute {k}')
                if k == 'name' and (scope == '*' or len(attrs) > 1 or not v):
                    sys.exit(f'{path}:{ln}: name=<standard name> stands alone in a '
                             'function rule')
                d[k] = v or True
            rules[(scope, param)] = d
    for (scope, param), d in rules.items():
        if 'names' in d and d['names'] not in vnames:
            sys.exit(f'{path}: {scope} {param}: names={d["names"]} is no values or flags class')
    return rules, hooks, predef, vnames


def attrs_of(rules, func, param):
    base = func[:-2] if func.endswith('_c') else func
    for key in ((func, param), (base, param), ('*', param)):
        if key in rules:
            return rules[key]
    return {}


def hooks_of(hooks, func):
    base = func[:-2] if func.endswith('_c') else func
    return hooks.get(func, hooks.get(base, []))


class Gen:
    """The schema and code of one wrapper."""

    def __init__(self, name, ret, params, variadic, rules, hooks):
        self.name, self.ret, self.params, self.variadic = name, ret, params, variadic
        # the standard's names first: the other rules, the recorded names use them
        for p in params:
            std = attrs_of(rules, name, p.name).get('name')
            if std:
                if std in (q.name for q in params):
                    sys.exit(f'gen_mpi: {name}: {p.name} renamed {std}, which it has already')
                p.rename(std)
        self.rules, self.hooks = rules, hooks_of(hooks, name)
        self.args = []      # (name, type, enc, flags, sym_class)
        self.pre, self.post, self.decl = [], [], []
        self.n_w = 0
        self.sigw = []  # words of the call signature so far: what pools requests
        self.strs = []
        self.pnames = {p.name: p for p in params}
        self.rp = {}  # parameter name: (role, dir, ctx, rank), what replay needs to know
        self.ctx = self.context()
        self.ctx_param = self.context_param()

    def context(self):
        for p in self.params:
            if p.base == 'MPI_Comm' and p.ptr == 0 and not p.arr:
                return f'mpirt_delta_comm({p.name})'
        for p in self.params:
            if p.base == 'MPI_Group' and p.ptr == 0 and not p.arr:
                return f'mpirt_delta_group({p.name})'
        for p in self.params:
            if p.base == 'MPI_Win' and p.ptr == 0 and not p.arr:
                return f'mpirt_delta_win({p.name})'
        for p in self.params:
            # a matched receive: the communicator its probe found the message in, read
            # before the call makes the message null
            if p.base == 'MPI_Message' and p.ptr == 1 and not p.arr:
                self.decl.append('\tint64_t msg_delta = 0;')
                self.pre.append(f'\tmsg_delta = {p.name} ? mpirt_delta_msg({p.name}) : 0;')
                return 'msg_delta'
        # no communicator: ranks as they are (a delta of 0 prints them unchanged)
        return '0'

    def context_param(self):
        """The parameter whose communicator, group or window ranks are relative to."""
        for base in ('MPI_Comm', 'MPI_Group', 'MPI_Win'):
            for p in self.params:
                if p.base == base and p.ptr == 0 and not p.arr:
                    return p.name
        for p in self.params:
            if p.base == 'MPI_Message' and p.ptr == 1 and not p.arr:
                return p.name
        return None

    def role(self, p, role, d='in', ctx=None, rank=False):
        ln = attrs_of(self.rules, self.name, p.name).get('len')
        self.rp[p.name] = (role, d, ctx, rank, ln if isinstance(ln, str) else None)

    def word(self, name, typ, enc, flags=0, cls=None):
        self.args.append((name, typ, enc, flags, cls))
        self.n_w += 1
        if enc in ('SIG', 'SYM', 'RANK', 'RVAL') and flags == 0:
            self.sigw.append((self.n_w, enc))
        return f'c.w[{self.n_w}]'

    def string(self, name):
        self.args.append((name, 'STR', 'STR', 0, None))
        v = f's{len(self.strs)}'
        self.strs.append(v)
        self.decl.append(f'\tstruct mpirt_str {v};')
        self.pre.append(f'\tmpirt_str_reset(&{v});')
        return v

    def length(self, spec, when):
        fns = {'commsize': 'mpirt_comm_size({})', 'cartdim': 'mpirt_cart_ndims({})',
               'nbr_in': 'mpirt_neighbors({}, false)', 'nbr_out': 'mpirt_neighbors({}, true)'}
        if spec in fns:
            comms = [p.name for p in self.params if p.base == 'MPI_Comm' and p.ptr == 0]
            return fns[spec].format(comms[0]) if comms else None
        if spec.isdigit():
            return spec
        p = self.pnames.get(spec)
        if p is None:
            return None
        if p.ptr == 0 and not p.arr:
            return f'(int64_t){p.name}'
        if p.ptr == 1 and not p.arr and when == 'post':
            return f'({p.name} ? (int64_t)*{p.name} : 0)'
        return None

    def direction(self, p, a):
        for d in ('inout', 'in', 'out'):
            if d in a:
                return d
        return 'in' if p.const or (p.ptr == 0 and not p.arr) else 'out'

    def param(self, p):
        a = attrs_of(self.rules, self.name, p.name)
        n = p.name
        if 'skip' in a:
            self.role(p, 'SKIP')
            return
        ok = 'ret == MPI_SUCCESS'
        if p.func_ptr or re.search(r'_(function|fn)(_c)?$', p.base):
            self.role(p, 'FN')
            w = self.word(n, 'U64', 'SYM', 0, 'fn')
            self.pre.append(f'\t{w} = mpirt_id(MPIRT_FN, &{n}, sizeof({n}));')
            return
        if p.base in HANDLES:
            return self.handle(p, a)
        if p.base == 'MPI_Status':
            return self.status(p, a)
        if p.base == 'char' and p.ptr == 1 and not p.arr or p.base == 'char' and p.ptr == 0 and p.arr:
            s = self.string(n)
            self.role(p, 'STR', self.direction(p, a))
            if self.direction(p, a) == 'in':
                self.pre.append(f'\tif ({n})\n\t\tmpirt_str_text(&{s}, {n});')
            else:
                # an output string is only defined when the call says it found one
                if 'flag' in self.pnames and self.pnames['flag'].ptr == 1:
                    ok += ' && flag && *flag'
                self.post.append(f'\tif ({ok} && {n})\n\t\tmpirt_str_text(&{s}, {n});')
            return
        if p.base == 'void' and p.ptr == 1 and not p.arr:
            if 'buf' in n or n in BUF_NAMES:
                self.role(p, 'BUF')
                w1 = self.word(n, 'U64', 'SYM', 0, 'alloc')
                w2 = self.word(n + '_off', 'HEX', 'SIG')
                self.pre.append(f'\tmpirt_buf({n}, &{w1}, &{w2});')
                return
            self.role(p, 'VOIDP')
            w = self.word(n, 'HEX', 'VAL')
            self.pre.append(f'\t{w} = (uint64_t)(uintptr_t){n};')
            return
        if p.base in INTS:
            return self.integer(p, a)
        # anything else: by value, its bits in the signature; behind a pointer, the address
        self.role(p, 'OPAQUE' if p.ptr == 0 and not p.arr else 'PTR')
        if p.ptr == 0 and not p.arr:
            w = self.word(n, 'HEX', 'SIG')
            self.pre.append(f'\t{w} = mpirt_bits(&{n}, sizeof({n}));')
        else:
            w = self.word(n, 'HEX', 'VAL')
            self.pre.append(f'\t{w} = (uint64_t)(uintptr_t){n};')

    def integer(self, p, a):
        n = p.name
        rank = 'rank' in a
        d = self.direction(p, a)
        ctx = self.ctx
        if rank and a['rank'] is not True:  # rank=<param>: a rank in that object
            q = self.pnames[a['rank']]
            fn = {'MPI_Comm': 'comm', 'MPI_Group': 'group', 'MPI_Win': 'win'}[q.base]
            ctx = f'mpirt_delta_{fn}({q.name})'
        ctx_param = self.ctx_param
        if rank and a['rank'] is not True:
            ctx_param = a['rank']
        # a value-name class (FORMAT.md §9.2): a rank's specials are MPI_ANY_SOURCE...
        names = a.get('names') if isinstance(a.get('names'), str) else None
        if rank and not names and 'mpi_rank' in VNAMES:
            names = 'mpi_rank'
        if p.ptr == 0 and not p.arr:
            self.role(p, 'INT', 'in', ctx_param, rank)
            if rank:
                w = self.word(n, 'I64', 'RANK', cls=names)
                self.pre.append(f'\t{w} = mpirt_rank({ctx}, {n});')
            elif 'rval' in a:
                w = self.word(n, 'I64', 'RVAL', cls=names)
                self.pre.append(f'\t{w} = mpirt_rval({ctx}, {self.peer(a["rval"])}, {n});')
            elif 'val' in a:
                w = self.word(n, 'I64', 'VAL')
                self.pre.append(f'\t{w} = (uint64_t)(int64_t){n};')
            else:
                w = self.word(n, 'HEX' if names and VNAMES[names][0] else 'I64', 'SIG',
                              cls=names)
                self.pre.append(f'\t{w} = (uint64_t)(int64_t){n};')
            return
        when = 'pre' if d == 'in' else 'post'
        if 'len' in a:
            ln = self.length(a['len'], when)
            if ln is not None:
                s = self.string(n)
                self.role(p, 'IARR', d, ctx_param, rank)
                if rank:
                    el = f'mpirt_str_rel(&{s}, {n}[i], mpirt_world_rank() - {ctx})'
                else:
                    el = f'mpirt_str_i64(&{s}, (int64_t){n}[i])'
                code = (f'\tif ({n}{self.at_root() if "atroot" in a else ""})\n'
                        f'\t\tfor (int64_t i = 0, n_ = {ln}; i < n_; i++)\n\t\t\t{el};')
                if when == 'pre':
                    self.pre.append(code)
                else:
                    self.post.append(f'\tif (ret == MPI_SUCCESS)\n\t{{\n{code}\n\t}}')
                return
        if p.ptr == 1 and not p.arr:
            self.role(p, 'IPTR', d, ctx_param, rank)
            enc = 'RANK' if rank else ('VAL' if 'val' in a else 'SIG')
            w = self.word(n, 'I64', enc)
            v = f'mpirt_rank({ctx}, *{n})' if rank else f'(uint64_t)(int64_t)*{n}'
            if when == 'pre':
                self.pre.append(f'\t{w} = {n} ? {v} : 0;')
            else:
                self.post.append(f'\t{w} = ret == MPI_SUCCESS && {n} ? {v} : 0;')
            return
        self.role(p, 'PTR', d)
        w = self.word(n, 'HEX', 'VAL')
        self.pre.append(f'\t{w} = (uint64_t)(uintptr_t){n};')

    def at_root(self):
        """The condition, joined with &&, that the caller is the root of this call."""
        comms = [p.name for p in self.params if p.base == 'MPI_Comm' and p.ptr == 0]
        if 'root' not in self.pnames or not comms:
            sys.exit(f'gen_mpi: {self.name}: atroot needs parameters root and a communicator')
        return f' && mpirt_at_root({comms[0]}, root)'

    def rq_pack(self):
        """The rank delta of a new request and which fields of its status are defined:
        all of a receive's (or a generalized request's), the byte count of file I/O, only
        the cancelled flag of anything else (sends, collectives, one-sided)."""
        low = self.name.lower()
        if 'recv' in low or 'grequest' in low:
            st = 'MPIRT_ST_ALL'
        elif low.startswith('mpi_file_'):
            st = 'MPIRT_ST_IO'
        else:
            st = 'MPIRT_ST_CANCELLED'
        return f'mpirt_rq_pack({self.ctx}, {st})'

    def peer(self, spec):
        """The peer rank a rank-derived value may equal: the parameter @spec, else the
        call's dest or source; -1 when there is none."""
        for name in ([spec] if spec is not True else ['dest', 'source']):
            q = self.pnames.get(name)
            if q is not None and q.ptr == 0 and not q.arr and q.base in INTS:
                return f'(int64_t){name}'
        return '-1'

    def handle(self, p, a):
        n = p.name
        cls, sym = HANDLES[p.base]
        d = self.direction(p, a)
        h = self.sig_hash()  # of the words before this one: what pools a new request
        if p.ptr == 0 and not p.arr:
            self.role(p, 'HANDLE')
            w = self.word(n, 'U64', 'SYM', 0, sym)
            if p.base == 'MPI_Request':
                self.pre.append(f'\t{w} = mpirt_req_id(&{n}, &rq_delta);')
                self.decl.append('\tint64_t rq_delta = 0;')
            else:
                self.pre.append(f'\t{w} = mpirt_id({cls}, &{n}, sizeof({n}));')
            return
        if p.arr or 'len' in a:
            ln = self.length(a.get('len', ''), 'pre' if d != 'out' else 'post')
            if ln is None:
                self.role(p, 'PTR', d)
                w = self.word(n, 'HEX', 'VAL')
                self.pre.append(f'\t{w} = (uint64_t)(uintptr_t){n};')
                return
            self.role(p, 'HARR', d)
            s = self.string(n)
            if p.base == 'MPI_Request':
                self.decl.append('\tuint64_t *rq_ids = NULL;\n\tint64_t *rq_deltas = NULL;'
                                 '\n\tint64_t rq_n = 0;')
                if d == 'out':
                    self.post.append(f'\tif (ret == MPI_SUCCESS)\n\t\tfor (int64_t i = 0; i < {ln}; i++)'
                                     f'\n\t\t\tmpirt_str_sym(&{s}, "req", mpirt_req_new(&{n}[i], '
                                     f'{h}, {self.rq_pack()}));')
                    return
                # taken out before the call, put back after unless completed (in reverse
                # order: requests sharing one handle value keep their order)
                self.pre.append(
                    f'\trq_n = {ln} > 0 ? {ln} : 0;\n'
                    f'\tmpirt_scratch(rq_n, &rq_ids, &rq_deltas);\n'
                    f'\tmpirt_req_take_all({n}, rq_n, rq_ids, rq_deltas);\n'
                    f'\tfor (int64_t i = 0; i < rq_n; i++)\n'
                    f'\t\tmpirt_str_sym(&{s}, "req", rq_ids[i]);')
                self.post.append(f'\tmpirt_req_settle_all({n}, rq_n, rq_ids, rq_deltas);')
                return
            # a predefined handle by its name (MPI_DOUBLE), as the views print a scalar one
            code = (f'\tif ({n})\n\t\tfor (int64_t i = 0, n_ = {ln}; i < n_; i++)\n'
                    f'\t\t\tmpirt_str_handle(&{s}, {cls}, "{sym}", '
                    f'mpirt_id({cls}, &{n}[i], sizeof({n}[i])));')
            (self.pre if d != 'out' else self.post).append(code)
            return
        self.role(p, 'HPTR', d)
        w = self.word(n, 'U64', 'SYM', 0, sym)
        if d == 'in':
            if p.base == 'MPI_Request':
                self.decl.append('\tint64_t rq_delta = 0;')
                self.pre.append(f'\t{w} = {n} ? mpirt_req_id({n}, &rq_delta) : 0;')
            else:
                self.pre.append(f'\t{w} = {n} ? mpirt_id({cls}, {n}, sizeof(*{n})) : 0;')
            return
        if d == 'inout':
            if p.base == 'MPI_Request':
                self.decl.append('\tint64_t rq_delta = 0;')
                self.pre.append(f'\t{w} = {n} ? mpirt_req_take({n}, &rq_delta) : 0;')
                self.post.append(f'\tif ({n})\n\t\tmpirt_req_settle({n}, {w}, rq_delta);')
                return
            self.pre.append(f'\t{w} = {n} ? mpirt_id({cls}, {n}, sizeof(*{n})) : 0;')
            if p.base in NULLS:
                self.post.append(f'\tif ({n} && *{n} == {NULLS[p.base]})\n'
                                 f'\t\tmpirt_release({cls}, {w});')
            elif 'free' in a:
                self.post.append(f'\tif (ret == MPI_SUCCESS)\n\t\tmpirt_release({cls}, {w});')
            return
        # out: a handle the call creates
        if p.base == 'MPI_Request':
            self.post.append(f'\t{w} = ret == MPI_SUCCESS && {n} ? mpirt_req_new({n}, '
                             f'{h}, {self.rq_pack()}) : 0;')
        elif p.base == 'MPI_Message':
            self.post.append(f'\t{w} = ret == MPI_SUCCESS && {n} ? mpirt_msg_new({n}, '
                             f'{self.ctx}) : 0;')
        elif p.base == 'MPI_Comm' and ('comm_child' in self.hooks or 'comm_agree' in self.hooks):
            if 'comm_child' in self.hooks:
                parents = [q.name for q in self.params if q.base == 'MPI_Comm' and q.ptr == 0]
                v = f'mpirt_comm_child({parents[0]}, *{n})'
            else:
                v = f'mpirt_comm_agree(*{n})'
            self.post.append(f'\t{w} = ret == MPI_SUCCESS && {n} ? {v} : 0;')
        else:
            self.post.append(f'\t{w} = ret == MPI_SUCCESS && {n} ? '
                             f'mpirt_new_id({cls}, {n}, sizeof(*{n})) : 0;')

    def status(self, p, a):
        n = p.name
        d = self.direction(p, a)
        has_req = any(q.base == 'MPI_Request' for q in self.params)
        # a status of a request: what the request's creator defines (mpirt_rq_pack())
        rq = has_req and not any(q.base == 'MPI_Comm' for q in self.params)
        ctx = 'rq_delta' if rq else self.ctx
        flag = 'flag' in self.pnames and self.pnames['flag'].ptr == 1
        req_arr = any(q.base == 'MPI_Request' and (q.arr or 'len' in attrs_of(self.rules, self.name, q.name))
                      for q in self.params)
        if req_arr and not (p.arr or 'len' in a):
            ix = 'indx' if 'indx' in self.pnames else 'index'
            ctx = (f'({ix} && *{ix} >= 0 && *{ix} < rq_n ? rq_deltas[*{ix}] : '
                   'mpirt_rq_pack(0, MPIRT_ST_ALL))') if ix in self.pnames \
                else 'mpirt_rq_pack(0, MPIRT_ST_ALL)'
            rq = True
        if p.arr or 'len' in a:
            ln = self.length(a.get('len', ''), 'post')
            s = self.string(n)
            self.role(p, 'STATUSES', d)
            if ln is None or not has_req:
                return
            idx = 'array_of_indices[i]' if 'array_of_indices' in self.pnames else 'i'
            # MPI_ERROR is defined only where the call returns MPI_ERR_IN_STATUS
            cond = '(ret == MPI_SUCCESS || ret == MPI_ERR_IN_STATUS)' + (
                ' && *flag' if flag else '')
            self.post.append(
                f'\tif ({cond} && {n} != MPI_STATUSES_IGNORE)\n'
                f'\t\tfor (int64_t i = 0; i < {ln}; i++) {{\n'
                f'\t\t\tint64_t k = {idx};\n'
                f'\t\t\tint64_t dl = k >= 0 && k < rq_n ? rq_deltas[k] : 0;\n'
                f'\t\t\tmpirt_str_status(&{s}, &{n}[i], mpirt_rq_delta(dl), '
                f'mpirt_rq_status(dl), ret == MPI_ERR_IN_STATUS);'
                f'\n\t\t}}')
            return
        self.role(p, 'STATUS', d)
        w = self.word(n + '.source', 'I64', 'RANK')
        self.word(n + '.tag', 'I64', 'RVAL')
        self.word(n + '.count', 'I64', 'SIG')
        self.word(n + '.cancelled', 'I64', 'SIG')
        cond = f'{n} && {n} != MPI_STATUS_IGNORE'
        if d != 'in':
            # an output status is defined only when the call succeeded (and found something)
            cond += ' && ret == MPI_SUCCESS' + (' && *flag' if flag else '')
        low = self.name.lower()
        st = (f'mpirt_rq_status({ctx})' if rq else 'MPIRT_ST_IO'
              if low.startswith('mpi_file_') else 'MPIRT_ST_PROBE' if 'probe' in low
              else 'MPIRT_ST_ALL')
        if rq:
            ctx = f'mpirt_rq_delta({ctx})'
        code = (f'\tif ({cond})\n\t\tmpirt_status({n}, {ctx}, {st}, &{w});\n'
                f'\telse\n\t\tmpirt_no_status(&{w});')
        (self.pre if d == 'in' else self.post).append(code)

    def sig_hash(self):
        # ranks as the trace stores them, relative: ranks doing the same thing share pools.
        # Tags and other RVALs are left out: a constant tag equal to the caller's rank is
        # stored as derived, and the merge can give it back its literal's signature (codec
        # merge.c, twins) only if its requests' ids do not depend on which it was
        ws = ', '.join(f'mpirt_rel(c.w[{i}])' if e == 'RANK' else f'c.w[{i}]'
                       for i, e in self.sigw if e != 'RVAL')
        n = sum(1 for _, e in self.sigw if e != 'RVAL')
        return f'mpirt_sig_hash({self.call_no()}, (const uint64_t[]){{{ws or "0"}}}, {n})'

    def call_no(self):
        return f'N_CALLS + {self.index}'

    def build(self, index):
        self.index = index
        for p in self.params:
            self.param(p)
        if self.ret == 'int':
            w = self.word('ret', 'I64', 'SIG', 'TFS_ARG_RESULT')
            # an error code's class: the code carries per-process detail (MPI_T_ functions
            # return MPI_T_ERR_ codes, which have no class)
            v = 'ret' if self.name.startswith('MPI_T_') else 'mpirt_error_class(ret)'
            self.post.append(f'\t{w} = (uint64_t)(int64_t){v};')
        elif self.ret in INTS:
            w = self.word('ret', 'I64', 'VAL', 'TFS_ARG_RESULT')
            self.post.append(f'\t{w} = (uint64_t)(int64_t)ret;')
        elif self.ret in HANDLES:
            cls, sym = HANDLES[self.ret]
            w = self.word('ret', 'U64', 'SYM', 'TFS_ARG_RESULT', sym)
            self.post.append(f'\t{w} = mpirt_id({cls}, &ret, sizeof(ret));')
        if len(self.args) > MAX_ARGS:
            sys.exit(f'{self.name}: {len(self.args)} arguments, the schema allows {MAX_ARGS}')

    def proto(self, prefix):
        ps = ', '.join(p.text for p in self.params) or 'void'
        if self.variadic:
            ps += ', ...'
        return f'{self.ret} {prefix}{self.name[4:]}({ps})'

    def real(self):
        """The MPI library's PMPI_ function, past the one this library defines."""
        tail = self.name[4:]
        return f'((__typeof__(&PMPI_{tail}))mpirt_next(&next_{tail}, "PMPI_{tail}"))'

    def pmpi(self):
        """PMPI_ for the bindings that call it instead of MPI_ (mpi_f08.c): such a call goes
        to the wrapper, any other to the library. Variadic functions are not redefined."""
        tail = self.name[4:]
        o = [f'static void *_Atomic next_{tail};', '']
        if self.variadic:
            return '\n'.join(o)
        fwd = ', '.join(p.name for p in self.params)
        ret = 'return ' if self.ret != 'void' else ''
        if CONVERSION.search(self.name):
            # a binding's plumbing (Open MPI's convert every handle they pass): never routed
            return '\n'.join(o + [self.proto('PMPI_'), '{',
                                   f'\t{ret}{self.real()}({fwd});', '}'])
        return '\n'.join(o + [self.proto('PMPI_'), '{',
                               '\tif (mpirt_bypassed(__builtin_return_address(0))) {',
                               f'\t\t{ret}MPI_{tail}({fwd});',
                               '\t\treturn;' if not ret else '', '\t}',
                               f'\t{ret}{self.real()}({fwd});', '}']).replace('\n\n\t}', '\n\t}')

    def code(self):
        fwd = ', '.join(p.name for p in self.params)
        call = f'{self.real()}({fwd})' if not self.variadic else f'PMPI_{self.name[4:]}({fwd})'
        rv = self.ret != 'void'
        o = [self.proto('MPI_'), '{', '\tstruct mpirt_call c;']
        if rv:
            o.append(f'\t{self.ret} ret;')
        o += sorted(set(self.decl), key=self.decl.index)
        o.append('')
        if 'finalize' in self.hooks:
            # recorded at entry: the trace is complete (and merged) before MPI ends
            w = self.n_w
            return '\n'.join(o + [
                f'\tif (!mpirt_enter({self.call_no()}))', f'\t\treturn {call};', '\tmpirt_start(&c);',
                '\tc.w[0] = 0;'] + [f'\tc.w[{i}] = 0;' for i in range(1, w + 1)] + [
                f'\tmpirt_put(&c, {self.call_no()}, {w}, NULL, 0);',
                '\tmpirt_on_finalize();', f'\treturn {call};', '}'])
        if 'abort' in self.hooks:
            # recorded at entry with its arguments, and the rank's trace saved: the call
            # does not return, and the launcher kills every rank and recorder
            if self.strs or self.ret != 'int' or len(self.post) != 1:
                sys.exit(f'gen_mpi: {self.name}: the abort hook takes a function of inputs only')
            return '\n'.join(o + [f'\tif (!mpirt_enter({self.call_no()}))', f'\t\treturn {call};'] +
                             self.pre + ['\tmpirt_start(&c);', '\tc.w[0] = 0;',
                                         f'\tc.w[{self.n_w}] = 0;',
                                         f'\tmpirt_put(&c, {self.call_no()}, {self.n_w}, NULL, 0);',
                                         '\tmpirt_on_abort();', f'\treturn {call};', '}'])
        o.append(f'\tif (!mpirt_enter({self.call_no()}))')
        o.append(f'\t\treturn {call};' if rv else f'\t{{\n\t\t{call};\n\t\treturn;\n\t}}')
        o += self.pre
        o.append('\tmpirt_start(&c);')
        o.append(f'\tret = {call};' if rv else f'\t{call};')
        o.append('\tmpirt_stop(&c);')
        o += self.post
        if self.strs:
            o.append('\t{\n\t\tstruct mpirt_str *const strs[] = {'
                     + ', '.join('&' + s for s in self.strs) + '};\n')
            o.append(f'\t\tmpirt_put(&c, {self.call_no()}, {self.n_w}, strs, {len(self.strs)});\n\t}}')
        else:
            o.append(f'\tmpirt_put(&c, {self.call_no()}, {self.n_w}, NULL, 0);')
        if 'finalize' in self.hooks:
            o.append('\tmpirt_on_finalize();')
        if 'info_set' in self.hooks:
            o.append('\tif (ret == MPI_SUCCESS)\n\t\tmpirt_on_info_set(key, value);')
        if 'info_delete' in self.hooks:
            o.append('\tif (ret == MPI_SUCCESS)\n\t\tmpirt_on_info_set(key, "");')
        if self.name in ('MPI_Init', 'MPI_Init_thread'):
            o.insert(o.index('\tmpirt_stop(&c);') + 1, '\tmpirt_on_init();')
        if rv:
            o.append('\treturn ret;')
        o.append('}')
        return '\n'.join(o)

    def kind(self):
        args = []
        for (n, t, e, f, cls) in self.args:
            clss = f'"{cls}"' if cls else 'NULL'
            args.append(f'{{"{n}", TFS_TYPE_{t}, TFS_ENC_{e}, {f}, {clss}}}')
        return args


def preprocess(cc, incdirs):
    cmd = cc.split() + ['-E', '-P', '-x', 'c', '-'] + ['-I' + d for d in incdirs]
    res = subprocess.run(cmd, input='#include <mpi.h>\n', capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f'gen_mpi: cannot preprocess mpi.h: {res.stderr.strip()}')
    return res.stdout


HEAD = '/* Generated by capture/mpi/gen_mpi.py from mpi.h and mpi_annot.txt: do not edit. */\n'


def impl_args(argv):
    """The options of each MPI implementation: those before the first --next, then those
    between each --next and the following one."""
    groups, cur = [], []
    for a in argv:
        if a == '--next':
            groups.append(cur)
            cur = []
        else:
            cur.append(a)
    return groups + [cur]


def macro_values(o, names):
    """{NAME: value} of the integer constants @names as the implementation's mpi.h defines
    them (those it does not define, or not as an integer, left out); none from a header
    given already preprocessed (tests)."""
    if o.header or not names:
        return {}
    src = '#include <mpi.h>\n' + ''.join(f'tfs_v_{i} = {n};\n' for i, n in enumerate(names))
    cmd = o.cc.split() + ['-E', '-P', '-x', 'c', '-'] + ['-I' + d for d in o.inc]
    res = subprocess.run(cmd, input=src, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f'gen_mpi: cannot preprocess mpi.h: {res.stderr.strip()}')
    out = {}
    for m in re.finditer(r'^tfs_v_(\d+) = (.*);$', res.stdout, re.M):
        e = re.sub(r'\(\s*(int|unsigned|long)\s*\)', '', m.group(2))
        e = re.sub(r'(?<=[0-9a-fA-F])[uUlL]+\b', '', e)
        if re.fullmatch(r'[\s0-9xXa-fA-F()+\-|<]*', e) and re.search(r'\d', e):
            try:
                out[names[int(m.group(1))]] = int(eval(e, {'__builtins__': {}}))
            except (SyntaxError, ValueError, TypeError):
                pass
    return out


def json_kind(g, i):
    """How the JSON views print argument @i of wrapper @g (FORMAT.md §9): (name, type)."""
    n, t, e, flags, cls = g.args[i]
    if n.endswith('_off') and i and g.args[i - 1][0] in (n[:-4], n[:-4] + '_id'):
        return None  # a buffer's offset: printed with its first half, named for its stem
    if i + 1 < len(g.args) and g.args[i + 1][0] in (n + '_off', n[:-3] + '_off'):
        return (g.args[i + 1][0][:-4], 'string')
    if 'TFS_ARG_RESULT' in str(flags):
        return ('result', 'number') if e != 'SYM' else (n, 'string')
    return (n, 'string' if t == 'STR' or e == 'SYM' else 'number')


def check_types(gens):
    """Each argument name prints as one JSON type across every wrapper of every
    implementation, so that DuckDB and jq see one column a name."""
    seen, bad = {}, []
    for g in gens:
        for i in range(len(g.args)):
            k = json_kind(g, i)
            if not k:
                continue
            first = seen.setdefault(k[0], (k[1], g.name))
            if first[0] != k[1]:
                bad.append(f'{k[0]}: a {first[0]} in {first[1]}, a {k[1]} in {g.name}')
    if bad:
        sys.exit('gen_mpi: one name, one type (rename in mpi_annot.txt):\n  '
                 + '\n  '.join(sorted(set(bad))))


def write_names(f, impls, predef):
    """The names the consumer writes into traces (FORMAT.md §12, §9.2): each predefined
    handle's at its id, and per implementation (its calls' range) the values of each
    value-name class, keyed as the views look them up (zigzag for a signed class)."""
    f.write('\n')
    if len(predef) > 16 or any(len(n) > 128 for n in predef.values()):
        sys.exit('gen_mpi: more predefined handles than CAP_MPI_MAX_PREDEF(_IDS) (calls_i.h)')
    for i, (cls, names) in enumerate(predef.items()):
        f.write(f'static const char *const pd{i}[] = {{\n    '
                + ',\n    '.join(f'"{n}"' for n in names) + '};\n')
    f.write('\nconst struct cap_mpi_predef cap_mpi_predefs[] = {\n')
    for i, (sym, names) in enumerate(predef.items()):
        f.write(f'    {{"{sym}", pd{i}, {len(names)}}},\n')
    f.write('    {NULL, NULL, 0}};\n\nconst uint32_t cap_mpi_n_predefs = %d;\n' % len(predef))
    first = 0
    rows = []
    for k, im in enumerate(impls):
        vals = macro_values(im, [n for _, ns in VNAMES.values() for n in ns])
        ents = []
        for cls, (flags, names) in VNAMES.items():
            seen = set()
            for n in names:
                if n not in vals:
                    continue
                v = vals[n]
                key = v & (2**64 - 1) if flags else ((v << 1) ^ (v >> 63)) & (2**64 - 1)
                if flags and (v <= 0 or v & (v - 1)):
                    continue  # a flags class names single bits
                if key not in seen:
                    seen.add(key)
                    ents.append(f'{{"{cls}", {key}ull, "{n}"}}')
        f.write(f'\nstatic const struct cap_mpi_vname vn{k}[] = {{\n    '
                + ',\n    '.join(ents + ['{NULL, 0, NULL}']) + '};\n')
        rows.append(f'{{{first}, {len(im.gens)}, vn{k}, {len(ents)}}}')
        first += len(im.gens)
    f.write('\nconst struct cap_mpi_impl cap_mpi_impls[] = {\n    '
            + ',\n    '.join(rows + ['{0, 0, NULL, 0}']) + '};\n'
            f'\nconst uint32_t cap_mpi_n_impls = {len(impls)};\n')


def gen_impl(o, rules, hooks, base):
    """The wrappers of the implementation whose mpi.h options @o gives, numbered from @base."""
    text = open(o.header).read() if o.header else preprocess(o.cc, o.inc)
    funcs = [(n, f) for n, f in sorted(parse_header(text).items())
             if 'absent' not in hooks_of(hooks, n)]
    gens = []
    for i, (name, (ret, params, variadic)) in enumerate(funcs):
        g = Gen(name, ret, params, variadic, rules, hooks)
        g.build(base + i)
        gens.append(g)
    if not gens:
        sys.exit('gen_mpi: no MPI function with a PMPI twin in mpi.h')
    return gens


def write_predef(f, predef):
    """mpirt_bind_predefined(): every predefined handle the MPI defines, bound to its id; and
    mpirt_predef_name(): the name of each id, which arrays of handles are written with."""
    classes = {sym: cls for cls, sym in HANDLES.values()}
    types = {sym: t for t, (cls, sym) in HANDLES.items()}
    f.write('void mpirt_bind_predefined(void)\n{\n')
    for sym, names in predef.items():
        for i, name in enumerate(names):
            f.write(f'#ifdef {name}\n\t{{\n\t\t{types[sym]} h = {name};\n\n'
                    f'\t\tmpirt_bind_id({classes[sym]}, {i}, &h, sizeof(h));\n\t}}\n#endif\n')
        f.write(f'\tmpirt_reserve_ids({classes[sym]}, {len(names)});\n')
    f.write('}\n\n')
    for sym, names in predef.items():
        f.write(f'static const char *const predef_{sym}[] = {{\n\t'
                + ',\n\t'.join(f'"{n}"' for n in names) + '};\n')
    f.write('\nconst char *mpirt_predef_name(enum mpirt_class cls, uint64_t id)\n{\n'
            '\tswitch (cls) {\n')
    for sym, names in predef.items():
        f.write(f'\tcase {classes[sym]}:\n'
                f'\t\treturn id < {len(names)} ? predef_{sym}[id] : NULL;\n')
    f.write('\tdefault:\n\t\treturn NULL;\n\t}\n}\n\n')


def write_replay(path, impls, predef):
    """The C prototypes of every wrapped function and what each parameter records, for the
    replay generator (fs/vreplay_mpi.c): the first implementation's functions, then those
    only later ones have."""
    seen, gens = set(), []
    for im in impls:
        for g in im.gens:
            if g.name not in seen:
                seen.add(g.name)
                gens.append(g)
    gens.sort(key=lambda g: g.name)
    with open(path, 'w') as f:
        f.write(HEAD + '#include <stddef.h>\n\n#include "vreplay_mpi_i.h"\n\n')
        for i, g in enumerate(gens):
            if not g.params:
                continue
            f.write(f'static const struct rp_mpi_param p{i}[] = {{\n')
            for p in g.params:
                role, d, ctx, rank, ln = g.rp.get(p.name, ('PTR', 'in', None, False, None))
                ctx = f'"{ctx}"' if ctx else 'NULL'
                ln = f'"{ln}"' if ln else 'NULL'
                f.write(f'    {{"{p.name}", "{p.base}", {p.ptr + (1 if p.arr else 0)}, '
                        f'{int(p.const)}, RP_{role}, RP_{d.upper()}, {ctx}, {int(rank)}, '
                        f'{ln}}},\n')
            f.write('};\n')
        f.write('\nconst struct rp_mpi_fn rp_mpi_fns[] = {\n')
        for i, g in enumerate(gens):
            ps = f'p{i}' if g.params else 'NULL'
            f.write(f'    {{"{g.name}", "{g.ret}", {len(g.params)}, {ps}}},\n')
        f.write('};\n\nconst uint32_t rp_mpi_n_fns = %d;\n\n' % len(gens))
        f.write('const struct rp_mpi_predef rp_mpi_predefs[] = {\n')
        n = 0
        for sym, names in predef.items():
            for i, name in enumerate(names):
                f.write(f'    {{"{sym}", {i}, "{name}"}},\n')
                n += 1
        f.write('};\n\nconst uint32_t rp_mpi_n_predefs = %d;\n' % n)


def write_wrap(path, gens, predef):
    with open(path, 'w') as f:
        f.write(HEAD + '#include <stdint.h>\n#include <stdlib.h>\n\n#include <mpi.h>\n\n'
                '#include "calls_i.h"\n#include "mpi_rt_i.h"\n\n'
                '#pragma GCC diagnostic ignored "-Wunused-variable"\n'
                '#pragma GCC diagnostic ignored "-Wunused-but-set-variable"\n'
                '/* every function is wrapped, those mpi.h marks deprecated too (Open MPI) */\n'
                '#pragma GCC diagnostic ignored "-Wdeprecated-declarations"\n\n')
        write_predef(f, predef)
        for g in gens:
            f.write(g.pmpi() + '\n\n' + g.code() + '\n\n')


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--cc', default='cc')
    ap.add_argument('--inc', action='append', default=[])
    ap.add_argument('--header', help='an already preprocessed mpi.h (tests)')
    ap.add_argument('--annot', required=True)
    ap.add_argument('--kinds', required=True)
    ap.add_argument('--wrap')
    ap.add_argument('--list')
    ap.add_argument('--no-mpi', action='store_true')
    ap.add_argument('--replay', help='the replay table (fs/vreplay_mpi_i.h), empty without MPI')
    nx = argparse.ArgumentParser(prog='gen_mpi.py ... --next')
    nx.add_argument('--inc', action='append', default=[])
    nx.add_argument('--header')
    nx.add_argument('--wrap')
    nx.add_argument('--list')
    groups = impl_args(sys.argv[1:])
    o = ap.parse_args(groups[0])
    impls = [o] + [nx.parse_args(g) for g in groups[1:]]
    gens, predef = [], {}
    if not o.no_mpi:
        rules, hooks, predef, vnames = parse_annot(o.annot)
        VNAMES.update(vnames)
        for im in impls:
            im.cc = o.cc
            im.gens = gen_impl(im, rules, hooks, len(gens))
            gens += im.gens
        check_types(gens)
    with open(o.kinds, 'w') as f:
        f.write(HEAD + '#include <stddef.h>\n\n#include "calls_i.h"\n\n')
        for i, g in enumerate(gens):
            if g.args:
                f.write(f'static const struct tfs_arg_desc a{i}[] = {{\n    '
                        + ',\n    '.join(g.kind()) + '};\n')
        if gens:
            f.write('\nstatic const struct tfs_kind_desc kinds[] = {\n')
            for i, g in enumerate(gens):
                a = f'a{i}' if g.args else 'NULL'
                f.write(f'    {{"{g.name}", "mpi", {len(g.args)}, {a}}},\n')
            f.write('};\n\nconst struct tfs_kind_desc *const cap_mpi_kinds = kinds;\n')
            write_names(f, impls, predef)
        else:
            f.write('const struct tfs_kind_desc *const cap_mpi_kinds = NULL;\n'
                    'const struct cap_mpi_predef cap_mpi_predefs[1] = {{NULL, NULL, 0}};\n'
                    'const uint32_t cap_mpi_n_predefs = 0;\n'
                    'const struct cap_mpi_impl cap_mpi_impls[1] = {{0, 0, NULL, 0}};\n'
                    'const uint32_t cap_mpi_n_impls = 0;\n')
        f.write(f'const uint32_t cap_mpi_n_kinds = {len(gens)};\n')
    if o.replay:
        if o.no_mpi:
            with open(o.replay, 'w') as f:
                f.write(HEAD + '#include <stddef.h>\n\n#include "vreplay_mpi_i.h"\n\n'
                        'const struct rp_mpi_fn rp_mpi_fns[1] = {{NULL, NULL, 0, NULL}};\n'
                        'const uint32_t rp_mpi_n_fns = 0;\n'
                        'const struct rp_mpi_predef rp_mpi_predefs[1] = {{NULL, 0, NULL}};\n'
                        'const uint32_t rp_mpi_n_predefs = 0;\n')
        else:
            write_replay(o.replay, impls, predef)
    for im in impls if not o.no_mpi else []:
        if im.wrap:
            write_wrap(im.wrap, im.gens, predef)
        if im.list:
            with open(im.list, 'w') as f:
                for g in im.gens:
                    f.write(g.name + '\n')


if __name__ == '__main__':
    main()
