#!/usr/bin/env python3
"""Generate the libc interposers of libtfscapture.so from their one table, calls.txt.

Each function libtfscapture.so interposes is declared once in calls.txt (its prototype, the
event kind it records as, the event's arguments and how each is computed); this writes what
used to be kept in step by hand:
  --header FILE   calls_gen.h: enum cap_call (one event kind per `kind`, N_CALLS), which
                  kinds carry a backtrace, struct cap_real (the next definition of every
                  interposed function) and the helpers the wrappers call
  --kinds FILE    calls_gen.c: cap_call_kinds[], the schema of every kind
  --wrap FILE     interpose_gen.c: cap_resolve() and the wrapper of every function of a kind
                  not marked `custom` (those are written by hand in interpose*.c)
  --map FILE      the version script: --map-in's text with `@INTERPOSED@` replaced by every
                  interposed name
  --list FILE     every interposed name, one per line (tests compare it with the library's
                  exports)
It decides nothing about how a value is stored beyond the encoding calls.txt gives it.
"""
import argparse
import re
import sys

CATEGORIES = {'alloc': 'TFS_TRACE_ALLOC', 'io': 'TFS_TRACE_IO', 'threads': 'TFS_TRACE_THREADS'}
TYPES = {'u64': 'TFS_TYPE_U64', 'i64': 'TFS_TYPE_I64', 'hex': 'TFS_TYPE_HEX',
         'str': 'TFS_TYPE_STR'}
FLAGS = {'result': 'TFS_ARG_RESULT', 'bytes': 'TFS_ARG_BYTES', 'attach': 'TFS_ARG_ATTACH',
         'input': 'TFS_ARG_INPUT', 'output': 'TFS_ARG_OUTPUT',
         'in': None}  # in: a marker on a byte count, made `input` on the kind's file
KIND_FLAGS = {'stack', 'custom', 'nested', 'errno0'}
# what glibc's <stdio.h> redirects to __isoc99_* under -std=c11
SCANF_REDIRECTED = ['fscanf', 'scanf', 'vfscanf', 'vscanf']
MAX_ARGS = 32


class Fail(Exception):
    pass


def split_top(text, sep=','):
    """@text split at @sep outside parentheses and brackets."""
    out, depth, cur = [], 0, ''
    for ch in text:
        if ch in '([':
            depth += 1
        elif ch in ')]':
            depth -= 1
        if ch == sep and depth == 0:
            out.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


class Param:
    def __init__(self, text):
        self.text = text
        self.variadic = text == '...'
        if self.variadic:
            self.name = None
            return
        m = re.search(r'\(\s*\*\s*(\w+)\s*\)', text)  # a function pointer
        if not m:
            m = re.search(r'(\w+)\s*(\[[^\]]*\])?\s*$', text)
        if not m:
            raise Fail('no parameter name in "%s"' % text)
        self.name = m.group(1)


class Sym:
    def __init__(self, line, lineno):
        parts = [p.strip() for p in line.split('|')]
        m = re.fullmatch(r'(.+?)\b(\w+)\s*\((.*)\)', parts[0])
        if not m:
            raise Fail('line %d: not a prototype: %s' % (lineno, parts[0]))
        self.ret = m.group(1).strip()
        self.name = m.group(2)
        self.params_text = m.group(3).strip()
        self.params = [] if self.params_text in ('', 'void') else \
            [Param(p) for p in split_top(self.params_text)]
        self.variadic = any(p.variadic for p in self.params)
        self.va = None  # (type, name, cond)
        self.via = None
        self.lets = []  # (type, name, expr)
        for opt in parts[1:]:
            mv = re.fullmatch(r'va\s+(.+?)\s*\b(\w+)(?:\s+if\s+(.+))?', opt)
            ml = re.fullmatch(r'let\s+(.+?)\s*\b(\w+)\s*=\s*(.+)', opt)
            if opt.startswith('va ') and mv:
                self.va = (mv.group(1), mv.group(2), mv.group(3))
            elif opt.startswith('let ') and ml:
                self.lets.append((ml.group(1), ml.group(2), ml.group(3)))
            elif opt.startswith('via '):
                self.via = opt[4:].strip()
            else:
                raise Fail('line %d: unknown option "%s"' % (lineno, opt))
        if self.va and not self.variadic:
            raise Fail('line %d: %s: `va` needs a `...`' % (lineno, self.name))

    def names(self):
        return [p.name for p in self.params if not p.variadic]

    def real_call(self):
        if self.via:
            m = re.fullmatch(r'(\w+)\s*\((.*)\)', self.via)
            return m.group(1), 'cap_real.%s(%s)' % (m.group(1), m.group(2))
        args = self.names() + ([self.va[1]] if self.va else [])
        return self.name, 'cap_real.%s(%s)' % (self.name, ', '.join(args))


class Arg:
    """One argument of an event: schema entry plus how the wrapper computes it."""

    def __init__(self, name, typ, enc='val', flags=(), expr=None, when='after', sym_class=None):
        self.name, self.typ, self.enc, self.flags = name, typ, enc, list(flags)
        self.expr, self.when, self.sym_class = expr, when, sym_class


def parse_arg(tok, lineno):
    """The Args of one token of an `args` line (a shorthand gives several)."""
    m = re.fullmatch(r'(FD|STREAM|DIR|BUF|BUFOK)\((.*)\)(:val)?', tok)
    if m:
        what, inner = m.group(1), split_top(m.group(2))
        if m.group(3) and what not in ('FD', 'STREAM', 'DIR'):
            raise Fail('line %d: only a descriptor goes by value: %s' % (lineno, tok))
        if what in ('BUF', 'BUFOK'):
            when = 'before' if what == 'BUF' else 'buf_after'
            return [Arg('buf_id', 'u64', expr=inner[0], when=when),
                    Arg('buf_off', 'u64', expr=inner[0], when=when)]
        prefix = inner[1] + '_' if len(inner) > 1 else ''
        fd_expr = {'FD': inner[0], 'STREAM': 'cap_stream_fd(%s)' % inner[0],
                   'DIR': 'cap_dir_fd(%s)' % inner[0]}[what]
        path_expr = 'cap_stream_file(%s)' % inner[0] if what == 'STREAM' else \
            'cap_fd_file((int)v_%sfd)' % prefix
        return [Arg(prefix + 'fd', 'i64', 'val' if m.group(3) else 'sig', expr=fd_expr,
                    when='before'),
                Arg(prefix + 'path', 'u64', 'sym', ['attach'], expr=path_expr, when='before',
                    sym_class='file')]
    m = re.fullmatch(r'RET((?::\w+)*)(?:=(.+))?', tok)
    if m:
        flags = ['result'] + [f for f in m.group(1).split(':') if f]
        out = [Arg('ret', 'i64', 'val', [f for f in flags if f != 'fd'],
                   m.group(2) or '(int64_t)ret')]
        if 'fd' in flags:  # a new descriptor: the file behind it, attached
            out.append(Arg('ret_path', 'u64', 'sym', ['attach'], 'cap_fd_file((int)ret)',
                           sym_class='file'))
        return out + [Arg('errno', 'u64', 'val', [], 'FAILED ? (uint64_t)err : 0')]
    name, _, expr = tok.partition('=')
    fields = name.split(':')
    if len(fields) < 2 or fields[1] not in TYPES:
        raise Fail('line %d: bad argument "%s" (NAME:TYPE[:ENC][:FLAG...][=EXPR])' %
                   (lineno, tok))
    a = Arg(fields[0], fields[1], 'str' if fields[1] == 'str' else 'val', expr=expr or None)
    for f in fields[2:]:
        if f == 'pre':
            a.when = 'before'
        elif f in ('val', 'sig'):
            a.enc = f
        elif f.startswith('sym.'):
            a.enc, a.sym_class = 'sym', f[4:]
        elif f.startswith('val.'):  # a value class (FORMAT.md §7.3.1)
            a.enc, a.sym_class = 'val', f[4:]
        elif f in FLAGS:
            a.flags.append(f)
        else:
            raise Fail('line %d: unknown field "%s" in "%s"' % (lineno, f, tok))
    if a.typ == 'str' and a.enc != 'str':
        raise Fail('line %d: a str argument is str-encoded: %s' % (lineno, tok))
    return [a]


class Kind:
    def __init__(self, name, category, flags, lineno):
        if category not in CATEGORIES:
            raise Fail('line %d: unknown category %s' % (lineno, category))
        bad = set(flags) - KIND_FLAGS
        if bad:
            raise Fail('line %d: unknown kind flags %s' % (lineno, ' '.join(sorted(bad))))
        self.name, self.category, self.flags = name, category, set(flags)
        self.syms, self.args, self.post, self.always = [], [], [], []
        self.call = None  # `call`: the real call's C, REAL standing for it as made
        self.fail = None
        self.replay = None
        self.noreplay = None
        self.parent = None  # (kind, C condition): `from`
        self.lineno = lineno

    @property
    def enum(self):
        return 'CALL_' + self.name.upper()


def parse(path):
    kinds = []
    with open(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip('\n')
            if not line.strip() or line.lstrip().startswith('#'):
                continue
            word, _, rest = line.strip().partition(' ')
            rest = rest.strip()
            if word == 'kind':
                tok = rest.split()
                if len(tok) < 2:
                    raise Fail('line %d: kind NAME CATEGORY [flags]' % lineno)
                kinds.append(Kind(tok[0], tok[1], tok[2:], lineno))
                continue
            if not kinds:
                raise Fail('line %d: %s before any kind' % (lineno, word))
            k = kinds[-1]
            if word == 'sym':
                k.syms.append(Sym(rest, lineno))
            elif word == 'args':
                for tok in rest.split():
                    k.args += parse_arg(tok, lineno)
            elif word == 'fail':
                k.fail = rest
            elif word == 'post':
                k.post.append(rest)
            elif word == 'always':
                k.always.append(rest)
            elif word == 'call':
                k.call = rest
            elif word == 'replay':
                k.replay = rest
            elif word == 'noreplay':
                k.noreplay = rest
            elif word == 'from':
                m = re.fullmatch(r'(\w+)\s+if\s+(.+)', rest)
                if not m:
                    raise Fail('line %d: from KIND if COND' % lineno)
                k.parent = (m.group(1), m.group(2))
            else:
                raise Fail('line %d: unknown line "%s"' % (lineno, word))
    check(kinds)
    directions(kinds)
    return kinds


def directions(kinds):
    """Put the direction of the bytes a kind moves on the file it moves them from or to
    (FORMAT.md §4: input, output): in_path is read from and out_path written to, a kind's
    other attached file the way its byte counts say (`in` on one: read)."""
    for k in kinds:
        counts = [a for a in k.args if 'bytes' in a.flags]
        way = None
        if counts:
            way = 'input' if any('in' in a.flags for a in counts) else 'output'
        if k.category == 'alloc':
            way = None
        for a in k.args:
            if 'attach' in a.flags and a.sym_class == 'file':
                if a.name.startswith('in_'):
                    a.flags.append('input')
                elif a.name.startswith('out_'):
                    a.flags.append('output')
                elif a.name == 'path' and way:
                    a.flags.append(way)
            if 'in' in a.flags:
                a.flags.remove('in')


def json_type(a):
    """How the JSON views print an argument (FORMAT.md §9): a string, or a number."""
    return 'string' if a.typ == 'str' or a.enc.startswith('sym') else 'number'


def check(kinds):
    names, syms = set(), set()
    # one name, one JSON type, across kinds: DuckDB and jq then see one column a name
    typed = {}
    for k in kinds:
        for a in k.args:
            first = typed.setdefault(a.name, (json_type(a), k.name))
            if first[0] != json_type(a):
                raise Fail('argument %s is a %s in %s but a %s in %s: one name, one type'
                           % (a.name, first[0], first[1], json_type(a), k.name))
    by_name = {k.name: k for k in kinds}
    for k in kinds:
        if not k.parent:
            continue
        p = by_name.get(k.parent[0])
        if not p or p.parent or not p.syms:
            raise Fail('kind %s: from %s, which is no kind with functions of its own'
                       % (k.name, k.parent[0]))
        if k.syms or k.post or k.always or k.call or k.flags - {'stack'} or \
                'custom' in p.flags:
            raise Fail('kind %s: a kind `from` another has no sym, post, always or flags '
                       'of its own, and its kind is not custom' % k.name)
        if k.category != p.category or ('stack' in k.flags) != ('stack' in p.flags):
            raise Fail('kind %s: not the category and stack of %s' % (k.name, p.name))
        if not k.replay and not k.noreplay:
            raise Fail('kind %s: no replay line, and no noreplay line saying why' % k.name)
    for k in kinds:
        if k.name in names:
            raise Fail('kind %s declared twice' % k.name)
        names.add(k.name)
        if len(k.args) + ('stack' in k.flags) > MAX_ARGS:
            raise Fail('kind %s: more than %d arguments' % (k.name, MAX_ARGS))
        argnames = [a.name for a in k.args]
        if len(set(argnames)) != len(argnames):
            raise Fail('kind %s: an argument name twice' % k.name)
        if k.replay and k.noreplay:
            raise Fail('kind %s: both replay and noreplay' % k.name)
        if k.syms and not k.replay and not k.noreplay:
            raise Fail('kind %s: no replay line, and no noreplay line saying why' % k.name)
        for ref in re.findall(r'\$(\w+)', k.replay or ''):
            if ref not in argnames:
                raise Fail('kind %s: replay names $%s, which is not an argument' % (k.name, ref))
        for s in k.syms:
            if s.name in syms:
                raise Fail('%s is in two kinds' % s.name)
            syms.add(s.name)
        if 'custom' not in k.flags:
            for s in k.syms:
                if s.variadic and not s.va and not s.via:
                    raise Fail('%s: a `...` needs `va` or `via`' % s.name)
                target = s.real_call()[0]
                if target != s.name and target not in {x.name for kk in kinds for x in kk.syms}:
                    raise Fail('%s: `via %s`: no such interposed function' % (s.name, target))
                if any(re.search(r'\bap0\b', a.expr or '') for a in k.args) and \
                        not re.search(r'\bap\b', s.real_call()[1]):
                    raise Fail('%s: its kind uses `ap0`, but it passes no va_list `ap`' % s.name)


def c_str(s):
    return '"%s"' % s


# ---- calls_gen.h ----

def gen_header(kinds):
    o = ['/* Generated by gen_calls.py from calls.txt: do not edit. */',
         '#ifndef TFS_CALLS_GEN_H', '#define TFS_CALLS_GEN_H', '',
         '/* The interposed calls, in calls.txt order: an event kind each. */',
         'enum cap_call {']
    o += ['\t%s,' % k.enum for k in kinds]
    o += ['\tN_CALLS', '};', '',
          '/* The calls whose events carry an allocation backtrace (a `stack` argument, last)'
          ' when on. */',
          'static inline bool cap_call_has_stack(uint32_t call)', '{', '\tswitch (call) {']
    o += ['\tcase %s:' % k.enum for k in kinds if 'stack' in k.flags]
    o += ['\t\treturn true;', '\tdefault:', '\t\treturn false;', '\t}', '}', '', '#endif', '']
    return '\n'.join(o)


def gen_real(kinds):
    """interpose_gen.h: struct cap_real, for the interposers only."""
    o = ['/* Generated by gen_calls.py from calls.txt: do not edit. */',
         '#ifndef TFS_INTERPOSE_GEN_H', '#define TFS_INTERPOSE_GEN_H', '',
         '/* Declared by no header (or only by fortified ones): declared here. */']
    for k in kinds:
        for s in k.syms:
            if s.name.startswith('_'):
                o.append('%s %s(%s);' % (s.ret, s.name, s.params_text or 'void'))
    o += ['', '/* The next definition of each interposed function (libc\'s), NULL until'
          ' resolved. */', 'struct cap_real {']
    for k in kinds:
        for s in k.syms:
            o.append('\t%s (*%s)(%s);' % (s.ret, s.name, s.params_text or 'void'))
    o += ['};', '', '#endif', '']
    return '\n'.join(o)


# ---- calls_gen.c ----

def gen_kinds(kinds):
    o = ['/* Generated by gen_calls.py from calls.txt: do not edit. */',
         '#include <stddef.h>', '', '#include "calls_i.h"', '']
    for k in kinds:
        if not k.args:  # a call that takes and returns nothing (sync): its duration alone
            continue
        o.append('static const struct tfs_arg_desc %s_args[] = {' % k.name)
        for a in k.args:
            enc = {'val': 'TFS_ENC_VAL', 'sig': 'TFS_ENC_SIG', 'sym': 'TFS_ENC_SYM',
                   'str': 'TFS_ENC_STR'}[a.enc]
            flags = ' | '.join(FLAGS[f] for f in a.flags if FLAGS[f]) or '0'
            o.append('\t{%s, %s, %s, %s, %s},' % (c_str(a.name), TYPES[a.typ], enc, flags,
                                                 c_str(a.sym_class) if a.sym_class else 'NULL'))
        o.append('};')
    o += ['', 'const struct tfs_kind_desc cap_call_kinds[N_CALLS] = {']
    for k in kinds:
        o.append('\t[%s] = {%s, %s, %d, %s},' % (k.enum, c_str(k.name), c_str(k.category),
                                                len(k.args),
                                                k.name + '_args' if k.args else 'NULL'))
    o += ['};', '']
    return '\n'.join(o)


# ---- interpose_gen.c ----

def fail_value(ret):
    if ret == 'void':
        return None
    if '*' in ret:
        return 'NULL'
    if ret == 'size_t':
        return '0'
    return '-1'


def default_fail(k, s):
    if k.fail:
        return k.fail
    if '*' in s.ret:
        return 'ret == NULL'
    return 'ret < 0'


def word(a):
    if a.typ == 'i64':
        return '(uint64_t)(int64_t)(%s)' % a.expr
    return '(uint64_t)(%s)' % a.expr


def gen_body(k, v, s, call, ind):
    """The recorded path of wrapper @s of kind @k, recording as kind @v (@k itself, or a kind
    `from` it): the lookups before the call, the call, @k's post and always statements, and
    the event: a block's lines, without its braces. @ind: their indentation."""
    o = []
    for a in v.args:
        if a.typ == 'str':
            o.append('\tconst char *s_%s;' % a.name)
        else:
            o.append('\tuint64_t v_%s = 0;' % a.name)
    n_str = sum(1 for a in v.args if a.typ == 'str')
    if n_str:
        o.append('\tchar strs[%d * CAP_STR_BYTES];' % n_str)
        o.append('\tsize_t strs_len = 0;')
    o += ['\tuint64_t w[%d];' % (1 + sum(1 for a in v.args if a.typ != 'str')), '']
    # before the call: descriptor numbers always (the descriptor table's effects use them),
    # the files and buffers behind them only when recorded (a first use declares a file)
    lookups = []
    for a in v.args:
        if a.when != 'before':
            continue
        if a.name.endswith('buf_id'):
            lookups.append('cap_alloc_lookup(%s, &v_buf_id, &v_buf_off);' % a.expr)
        elif a.name.endswith('buf_off'):
            continue
        elif a.enc == 'sym':
            lookups.append('v_%s = %s;' % (a.name, word(a)))
        else:
            o.append('\tv_%s = %s;' % (a.name, word(Arg(a.name, a.typ, expr=a.expr or a.name))))
    if len(lookups) == 1:
        o += ['\tif (rec)', '\t\t' + lookups[0]]
    elif lookups:
        o += ['\tif (rec) {'] + ['\t\t' + x for x in lookups] + ['\t}']
    if 'errno0' in k.flags:
        o.append('\tconst int errno_was = errno;')
        o.append('\terrno = 0;')
    # `ap0`: the `...`'s arguments as the call was given them, which it consumes
    ap0 = any(re.search(r'\bap0\b', a.expr or '') for a in v.args)
    if ap0:
        o[:0] = ['\tva_list ap0;']
        o.append('\tva_copy(ap0, ap);')
    o += ['\tif (cap_call_depth == 0)', '\t\tcap_call_outer = %s;' % v.enum,
          '\tt0 = cap_now_ns();', '\tcap_call_depth++;',
          ('\t%s;' if s.ret == 'void' else '\tret = %s;') % call,
          '\tcap_call_depth--;', '\terr = errno;']
    for st in k.always:
        o.append('\t%s' % st)
    for st in k.post:
        o.append('\t%s' % st)
    o.append('\tif (rec) {')
    fail = v.fail or default_fail(k, s)
    if any('FAILED' in (a.expr or '') or a.typ == 'str' for a in v.args):
        o.append('\t\tconst bool failed_ = %s;' % fail)
    for a in v.args:
        if a.when == 'buf_after':
            if a.name == 'buf_id':
                o.append('\t\tif (ret >= 0)')
                o.append('\t\t\tcap_alloc_lookup(%s, &v_buf_id, &v_buf_off);' % a.expr)
            continue
        if a.when == 'before':
            continue
        expr = (a.expr or a.name).replace('FAILED', 'failed_')
        if a.typ == 'str':
            # a call that failed with EFAULT may have been given a string at no address
            o.append('\t\ts_%s = failed_ && err == EFAULT ? cap_str_at(%s) : (%s);'
                     % (a.name, expr, expr))
            o.append('\t\tstrs_len = cap_put_str(strs, strs_len, s_%s);' % a.name)
        else:
            a2 = Arg(a.name, a.typ, expr=expr)
            o.append('\t\tv_%s = %s;' % (a.name, word(a2)))
    o.append('\t\tw[0] = since(t0);')
    i = 1
    for a in v.args:
        if a.typ != 'str':
            o.append('\t\tw[%d] = v_%s;' % (i, a.name))
            i += 1
    o.append('\t\tcap_put_call(%s, t0, w, %d, %s, %s);' % (
        v.enum, i, 'strs' if n_str else 'NULL', 'strs_len' if n_str else '0'))
    o.append('\t}')
    if ap0:
        o.append('\tva_end(ap0);')
    if 'errno0' in k.flags:
        o.append('\terrno = err ? err : errno_was;')
    else:
        o.append('\terrno = err;')
    return [ind + x if x else x for x in o]


def gen_wrapper(k, s, subs):
    """The wrapper of function @s of kind @k; @subs: the kinds `from` @k, each recording
    the call instead when its condition holds."""
    real_name, call = s.real_call()
    if k.call:
        call = '(%s)' % re.sub(r'\bREAL\b', call, k.call)
    fv = fail_value(s.ret)
    o = ['#undef %s' % s.name]
    if s.name in SCANF_REDIRECTED:
        o.append('%s %s(%s);' % (s.ret, s.name, s.params_text or 'void'))
    o += ['EXPORT %s %s(%s)' % (s.ret, s.name, s.params_text or 'void'), '{']
    last = s.names()[-1] if s.names() else None
    va_list_needed = s.variadic and s.via and 'ap' in call
    if s.va:
        typ, name, cond = s.va
        o.append('\t%s %s = 0;' % (typ, name))
    for typ, name, expr in s.lets:
        o.append('\tconst %s %s = %s;' % (typ, name, expr))
    if va_list_needed:
        o.append('\tva_list ap;')
    o += (['\t%s ret;' % s.ret] if fv else []) + \
        ['\tuint64_t t0;', '\tint err;', '\tbool rec;', '']
    if s.va:
        typ, name, cond = s.va
        if cond:
            o.append('\tif (%s) {' % cond)
            ind = '\t\t'
        else:
            o.append('\t{')
            ind = '\t\t'
        o += [ind + 'va_list va_;', ind + 'va_start(va_, %s);' % last,
              ind + '%s = va_arg(va_, %s);' % (name, typ), ind + 'va_end(va_);', '\t}']
    if va_list_needed:
        o.append('\tva_start(ap, %s);' % last)
    end_va = '\tva_end(ap);' if va_list_needed else None
    o.append('\tif (!HAVE(%s)) {' % real_name)
    if fv:
        o.append('\t\tret = %s;' % fv)
    o.append('\t\tgoto out;')
    o.append('\t}')
    o.append('\tif (!capturing(%s)) {' % CATEGORIES[k.category])
    o.append(('\t\tret = %s;' if fv else '\t\t%s;') % call)
    for st in k.always:
        o.append('\t\t%s' % st)
    o.append('\t\tgoto out;')
    o.append('\t}')
    nested = 'true' if 'nested' in k.flags else 'cap_call_nested_ok()'
    o.append('\trec = cap_call_depth == 0 || %s;' % nested)
    for v in subs:
        o.append('\tif (%s) {' % v.parent[1])
        o += gen_body(k, v, s, call, '\t')
        o += ['\t\tgoto out;', '\t}']
    o += ['\t{'] + gen_body(k, k, s, call, '\t') + ['\t}']
    o.append('out:')
    if end_va:
        o.append(end_va)
    o.append('\treturn ret;' if fv else '\treturn;')
    o += ['}', '']
    return o


def gen_wrap(kinds):
    o = ['/* Generated by gen_calls.py from calls.txt: do not edit. */',
         '/*',
         ' * The wrappers of every interposed function not written by hand, and the lookup of',
         ' * the real functions (interpose_i.h explains the rules they follow).',
         ' */',
         '#undef _FILE_OFFSET_BITS /* define open, not open64 under the name open */',
         '#undef _FORTIFY_SOURCE',
         '#define __NO_INLINE__ 1 /* no inline definitions of the _unlocked stdio names */',
         '/* <stdio.h> of C99 and later names these __isoc99_*: keep its declarations away */']
    for n in SCANF_REDIRECTED:
        o.append('#define %s tfs_hidden_%s' % (n, n))
    o += ['#include <stdio.h>']
    for n in SCANF_REDIRECTED:
        o.append('#undef %s' % n)
    o += ['',
         '#include <dlfcn.h>', '#include <errno.h>', '#include <fcntl.h>',
         '#include <stdarg.h>', '#include <stdint.h>', '#include <stdio.h>', '#include <stdlib.h>',
         '#include <string.h>', '#include <sys/sendfile.h>', '#include <unistd.h>', '',
         '#include "allocs_i.h"', '#include "calls_i.h"', '#include "files_i.h"',
         '#include "interpose_i.h"', '',
         'struct cap_real cap_real;', '',
         'void cap_resolve_all(void)', '{']
    for k in kinds:
        for s in k.syms:
            o.append('\t*(void **)&cap_real.%s = dlsym(RTLD_NEXT, "%s");' % (s.name, s.name))
    o += ['}', '']
    for k in kinds:
        if 'custom' in k.flags:
            continue
        subs = [v for v in kinds if v.parent and v.parent[0] == k.name]
        for s in k.syms:
            o += gen_wrapper(k, s, subs)
    return '\n'.join(o)


def sym_names(kinds):
    return [s.name for k in kinds for s in k.syms]


def c_string(text):
    return '"' + text.replace('\\', '\\\\').replace('"', '\\"') + '"'


def gen_replay(kinds):
    """rp_libc_calls[]: every kind, its functions, and its `replay` statements, whose $NAME
    are the recorded arguments (fs/vreplay_call.c substitutes them), or NULL and the
    `noreplay` reason (README.txt lists those)."""
    out = ['/* Generated by capture/gen_calls.py from calls.txt: do not edit. */',
           '#include <stddef.h>', '', '#include "vreplay_i.h"', '',
           'const struct rp_libc rp_libc_calls[] = {']
    by_name = {k.name: k for k in kinds}
    for k in kinds:
        funcs = ', '.join(s.name for s in (by_name[k.parent[0]] if k.parent else k).syms)
        out.append('\t{%s, %s, %s, %s},' % (
            c_string(k.name), c_string(funcs),
            c_string(k.replay) if k.replay else 'NULL',
            c_string(k.noreplay) if k.noreplay else 'NULL'))
    out += ['};', '', 'const uint32_t rp_libc_n_calls = %d;' % len(kinds), '']
    return '\n'.join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('table')
    ap.add_argument('--header')
    ap.add_argument('--real')
    ap.add_argument('--kinds')
    ap.add_argument('--wrap')
    ap.add_argument('--map-in')
    ap.add_argument('--map')
    ap.add_argument('--list')
    ap.add_argument('--replay', help='the replay table of fs/vreplay_call.c')
    o = ap.parse_args()
    try:
        kinds = parse(o.table)
    except Fail as e:
        sys.exit('gen_calls: %s: %s' % (o.table, e))
    outs = []
    if o.header:
        outs.append((o.header, gen_header(kinds)))
    if o.real:
        outs.append((o.real, gen_real(kinds)))
    if o.kinds:
        outs.append((o.kinds, gen_kinds(kinds)))
    if o.wrap:
        outs.append((o.wrap, gen_wrap(kinds)))
    if o.map:
        with open(o.map_in) as f:
            text = f.read()
        names = sym_names(kinds)
        lines, cur = [], '\t\t'
        for n in names:
            if len(cur) + len(n) + 2 > 92:
                lines.append(cur.rstrip())
                cur = '\t\t'
            cur += n + '; '
        lines.append(cur.rstrip())
        outs.append((o.map, text.replace('\t\t@INTERPOSED@', '\n'.join(lines))))
    if o.list:
        outs.append((o.list, '\n'.join(sym_names(kinds)) + '\n'))
    if o.replay:
        outs.append((o.replay, gen_replay(kinds)))
    for path, text in outs:
        with open(path, 'w') as f:
            f.write(text)


if __name__ == '__main__':
    main()
