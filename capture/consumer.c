/*
 * The consumer: reads the raw records of a spool chunk by chunk, each producing thread's
 * chunks in their order, and turns them into trace events of that thread's writer stream:
 * zone begin/end pairs into `zone` events (start and duration), memory accesses into
 * `load`/`store` with symbolic sites, phases into writer phase ranges, interposed calls
 * (calls_i.h) into one event of their kind (declared only when the spool records calls),
 * allocations with a `stack` argument naming their backtrace when the spool has backtraces
 * (interned and symbolised by stacks.c and symbolize.c), a thread's dropped events into a
 * `dropped` mark where they were (ending the zones whose end was dropped there).
 * Chunks it has read are recycled to the producers. It trusts nothing in the spool: a
 * malformed record ends the reading of its chunk and is counted. It neither creates spools
 * nor runs programs.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tfs/capture.h"
#include "tfs/writer.h"
#include "calls_i.h"
#include "consumer_i.h"
#include "files_i.h"
#include "stacks_i.h"

#define RANK 0 /* the one process of a spool */

enum ckind { K_ZONE, K_ZONE_UNFINISHED, K_MARK, K_COUNTER, K_THREAD_NAME, K_LOAD, K_STORE,
	     K_DROPPED, N_KINDS };

static const struct tfs_arg_desc zone_args[] = {
    {"name", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"depth", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
};
static const struct tfs_arg_desc mark_args[] = {
    {"message", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
};
static const struct tfs_arg_desc counter_args[] = {
    {"name", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"value", TFS_TYPE_I64, TFS_ENC_VAL, 0, NULL},
};
static const struct tfs_arg_desc thread_name_args[] = {
    {"name", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
};
/* a mark (its message first, FORMAT.md §9) of where a thread dropped events: its duration
 * spans the first to the last of them */
static const struct tfs_arg_desc dropped_args[] = {
    {"message", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"count", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
};
static const struct tfs_arg_desc mem_args[] = {
    {"addr", TFS_TYPE_HEX, TFS_ENC_VAL, 0, NULL},
    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"site", TFS_TYPE_U64, TFS_ENC_SYM, 0, "site"},
};

#define N_ARGS(a) (uint32_t)(sizeof(a) / sizeof((a)[0]))
static const struct tfs_kind_desc kinds[N_KINDS] = {
    [K_ZONE] = {"zone", "zone", N_ARGS(zone_args), zone_args},
    [K_ZONE_UNFINISHED] = {"zone_unfinished", "zone", N_ARGS(zone_args), zone_args},
    [K_MARK] = {"mark", "user", N_ARGS(mark_args), mark_args},
    [K_COUNTER] = {"counter", "user", N_ARGS(counter_args), counter_args},
    [K_THREAD_NAME] = {"thread_name", "thread", N_ARGS(thread_name_args), thread_name_args},
    [K_LOAD] = {"load", "mem", N_ARGS(mem_args), mem_args},
    [K_STORE] = {"store", "mem", N_ARGS(mem_args), mem_args},
    [K_DROPPED] = {"dropped", "capture", N_ARGS(dropped_args), dropped_args},
};

struct czone {
	uint32_t name; /* per-thread string id */
	uint64_t ts_ns;
};

/* The first event index of a thread after it saw process-phase generation @gen. */
struct csync {
	uint32_t gen;
	uint64_t index;
};

struct cphase {
	uint32_t id;
	char *name;
	uint64_t first;
};

/* What the consumer knows of one producing thread. */
struct cthread {
	struct tfs_wstream *s; /* NULL until the thread's first record */
	uint64_t next_seq;     /* the chunk number to read next */
	uint64_t last_ts;      /* raw, of the latest record */
	char **strs;	       /* by per-thread string id */
	uint32_t n_strs;
	struct czone *zones; /* open zones, innermost last */
	uint32_t n_zones, zones_cap;
	struct csync *syncs;
	uint32_t n_syncs, syncs_cap;
	struct cphase *phases; /* open thread phases */
	uint32_t n_phases, phases_cap;
	uint64_t *bt;	       /* [SPOOL_MAX_BT_FRAMES]: its latest backtrace in this chunk */
	uint64_t *bt_h;	       /* [SPOOL_MAX_BT_FRAMES + 1]: bt_h[k] the hash state
				  (cap_stacks_hash_step) after bt's first k frames */
	uint32_t bt_n;
	bool bt_known;	       /* bt_id is the stack id of bt */
	uint64_t bt_id;
};

struct pphase {
	uint32_t id;
	char *name;
	uint32_t thread; /* the thread that began it */
	uint32_t gen_begin, gen_end; /* gen_end 0: still open */
};

struct cand {
	uint32_t thread;
	uint64_t seq;
	uint32_t idx;
};

struct cap_consumer {
	struct spool *spool;
	struct tfs_writer *w;
	bool timed;
	uint32_t kind[N_KINDS];
	uint32_t call_kind[N_CALLS]; /* valid when calls: the spool records interposed calls */
	uint32_t *mpi_kind; /* cap_mpi_n_kinds, when the spool records MPI calls; declared on
			       first use (a trace holds the kinds of the MPI calls made, not all
			       of mpi.h's), UINT32_MAX until then */
	uint8_t *mpi_pd; /* TFS_MAX_ARGS bytes an MPI kind, set on its first use: of each
			    argument 1 + the index of its class in cap_mpi_predefs, 0 none */
	uint64_t pd_named[CAP_MPI_MAX_PREDEF][CAP_MPI_MAX_PREDEF_IDS / 64]; /* ids named */
	bool in_place_named;
	bool calls;
	uint32_t *nested_kind; /* N_CALLS + cap_mpi_n_kinds, the kinds of calls recorded inside
				  others (REC_CALL_NESTED), declared on first use; NULL until one */
	struct cap_stacks *stacks; /* NULL when the spool records no backtraces */
	struct cthread *threads;
	uint32_t n_threads;
	struct pphase *pphases;
	uint32_t n_pphases, pphases_cap;
	uint64_t *site_keys; /* open addressing, key 0 is "empty" (stored as key + 1) */
	uint32_t *site_ids;
	uint32_t sites_cap, n_sites;
	char **tnames;	    /* by thread id: the name the program gave it last, or NULL */
	uint32_t tnames_cap;
	struct cand *cands; /* scratch, n_chunks entries */
	bool in_partial;    /* reading a chunk nobody handed over */
	uint64_t n_dropped_said; /* the drops the `dropped` marks of the trace count */
	bool finished;
	int err;
	struct tfs_recording_stats st;
};

int cap_parse_timing(const char *s, struct cap_timing *out)
{
	static const char fast[] = ",fast";
	const size_t n_fast = sizeof(fast) - 1;
	size_t len = s ? strlen(s) : 0;
	char mode[64], *end;

	out->timing = TFS_TIMING_LOSSLESS;
	out->rel_err = 0;
	out->coder = TFS_CODER_AUTO;
	if (len >= sizeof(mode))
		return -EINVAL;
	if (len > n_fast && !strcmp(s + len - n_fast, fast)) {
		out->coder = TFS_CODER_FAST;
		len -= n_fast;
	}
	memcpy(mode, s ? s : "", len);
	mode[len] = '\0';
	if (!len && out->coder == TFS_CODER_AUTO)
		return 0;
	if (!strcmp(mode, "lossless"))
		return 0;
	if (!strcmp(mode, "none") && out->coder == TFS_CODER_AUTO) {
		out->timing = TFS_TIMING_NONE;
		return 0;
	}
	if (strncmp(mode, "lossy:", 6) != 0)
		return -EINVAL;
	out->rel_err = strtod(mode + 6, &end);
	if (end == mode + 6 || *end || !(out->rel_err >= 1.0 / 1024 && out->rel_err < 1))
		return -EINVAL;
	out->timing = TFS_TIMING_LOSSY;
	return 0;
}

int cap_parse_trace(const char *s, uint32_t *mask)
{
	static const struct {
		const char *word;
		uint32_t bits;
	} words[] = {
	    {"zones", TFS_TRACE_ZONES},	     {"mem", TFS_TRACE_MEM},
	    {"alloc", TFS_TRACE_ALLOC},	     {"io", TFS_TRACE_IO},
	    {"threads", TFS_TRACE_THREADS},  {"mpi", TFS_TRACE_MPI},
	    {"nested", TFS_TRACE_NESTED},
	    {"all", TFS_TRACE_ZONES | TFS_TRACE_MEM | TFS_TRACE_ALLOC | TFS_TRACE_IO |
			TFS_TRACE_THREADS},
	};

	*mask = TFS_TRACE_ON;
	while (*s) {
		size_t n = strcspn(s, ","), i;

		for (i = 0; i < sizeof(words) / sizeof(words[0]); i++)
			if (strlen(words[i].word) == n && !strncmp(s, words[i].word, n))
				break;
		if (i == sizeof(words) / sizeof(words[0]))
			return -EINVAL;
		*mask |= words[i].bits;
		s += n + (s[n] == ',');
	}
	return 0;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	uint32_t n = *cap ? *cap : 8;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, (size_t)n * elem);
	if (!q)
		return -ENOMEM;
	memset((char *)q + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
	*p = q;
	*cap = n;
	return 0;
}

/* Declare call @call's kind, with a last `stack` argument when it carries backtraces. */
static int add_call_kind(struct cap_consumer *c, uint32_t call)
{
	static const struct tfs_arg_desc stack = {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"};
	const struct tfs_kind_desc *k = &cap_call_kinds[call];
	struct tfs_arg_desc args[TFS_MAX_ARGS];
	struct tfs_kind_desc with = *k;

	if (!c->stacks || !cap_call_has_stack(call))
		return tfs_writer_add_kind(c->w, k, &c->call_kind[call]);
	if (k->n_args >= TFS_MAX_ARGS)
		return -EINVAL;
	memcpy(args, k->args, k->n_args * sizeof(*args));
	args[k->n_args] = stack;
	with.args = args;
	with.n_args = k->n_args + 1;
	return tfs_writer_add_kind(c->w, &with, &c->call_kind[call]);
}

int cap_consumer_new(struct spool *s, const struct cap_timing *tm, struct cap_consumer **out)
{
	/*
	 * small traces (MPI ranks) get their timing recompressed at save: level 16 is level
	 * 19's size (MPI stencils, a ring; sqlite3 0.2% larger) at a fifth of its time, about
	 * 70 ns per event (tests/bench/run_values, run_recorder)
	 */
	struct tfs_writer_opts wo = {.timing = tm->timing, .rel_err = tm->rel_err,
				     .timing_coder = tm->coder, .late_kinds = 1,
				     .values_save_level = 16};
	struct cap_consumer *c;
	int rc;

	*out = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->spool = s;
	c->timed = tm->timing != TFS_TIMING_NONE;
	c->cands = calloc(s->hdr->n_chunks, sizeof(*c->cands));
	if (!c->cands) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = tfs_writer_new(&wo, &c->w);
	if (rc < 0)
		goto err_free;
	/* events are appended as their records arrive: when they end (FORMAT.md §3.1) */
	rc = tfs_writer_set_meta(c->w, "event_order", "end");
	for (int k = 0; k < N_KINDS && rc == 0; k++)
		rc = tfs_writer_add_kind(c->w, &kinds[k], &c->kind[k]);
	/* kinds are fixed before the first stream: declare the calls only when recorded */
	c->calls = s->hdr->trace_mask & (TFS_TRACE_ALLOC | TFS_TRACE_IO | TFS_TRACE_THREADS);
	if (rc == 0 && c->calls && s->hdr->bt_depth)
		rc = cap_stacks_new(&c->stacks);
	for (uint32_t k = 0; c->calls && k < N_CALLS && rc == 0; k++)
		rc = add_call_kind(c, k);
	if (rc == 0 && (s->hdr->trace_mask & TFS_TRACE_MPI) && cap_mpi_n_kinds) {
		c->mpi_kind = malloc(cap_mpi_n_kinds * sizeof(*c->mpi_kind));
		c->mpi_pd = calloc(cap_mpi_n_kinds, TFS_MAX_ARGS);
		if (!c->mpi_kind || !c->mpi_pd)
			rc = -ENOMEM;
		else
			memset(c->mpi_kind, 0xff, cap_mpi_n_kinds * sizeof(*c->mpi_kind));
	}
	if (rc < 0)
		goto err_free;
	cap_spool_set_consumer(s, SPOOL_CONSUMER_ON);
	*out = c;
	return 0;

err_free:
	cap_consumer_free(c);
	return rc;
}

static void thread_fini(struct cthread *ct)
{
	for (uint32_t i = 0; i < ct->n_strs; i++)
		free(ct->strs[i]);
	free(ct->strs);
	free(ct->zones);
	free(ct->syncs);
	for (uint32_t i = 0; i < ct->n_phases; i++)
		free(ct->phases[i].name);
	free(ct->phases);
	free(ct->bt);
	free(ct->bt_h);
}

void cap_consumer_free(struct cap_consumer *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->n_threads; i++)
		thread_fini(&c->threads[i]);
	free(c->threads);
	for (uint32_t i = 0; i < c->n_pphases; i++)
		free(c->pphases[i].name);
	free(c->pphases);
	free(c->site_keys);
	free(c->site_ids);
	for (uint32_t i = 0; i < c->tnames_cap; i++)
		free(c->tnames[i]);
	free(c->tnames);
	free(c->cands);
	free(c->mpi_kind);
	free(c->mpi_pd);
	free(c->nested_kind);
	cap_stacks_free(c->stacks);
	tfs_writer_free(c->w);
	free(c);
}

static uint64_t rel_ts(const struct cap_consumer *c, uint64_t ts)
{
	uint64_t origin = c->spool->hdr->origin_ns;

	return c->timed && ts > origin ? ts - origin : 0;
}

static uint64_t n_events(const struct cthread *ct)
{
	return ct->s ? tfs_wstream_n_events(ct->s) : 0;
}

static void emit_kind(struct cap_consumer *c, struct cthread *ct, uint32_t kind, uint64_t ts,
		      uint64_t dur, const union tfs_arg *args)
{
	int rc;

	if (c->err)
		return;
	rc = tfs_wstream_append(ct->s, kind, rel_ts(c, ts), c->timed ? dur : 0, args);
	if (rc < 0) {
		c->err = rc;
		return;
	}
	c->st.n_events++;
	if (c->in_partial)
		c->st.n_partial_events++;
}

static void emit(struct cap_consumer *c, struct cthread *ct, enum ckind k, uint64_t ts,
		 uint64_t dur, const union tfs_arg *args)
{
	emit_kind(c, ct, c->kind[k], ts, dur, args);
}

/*
 * The stack id of the backtrace at @r[@w] (spool_i.h), @words the record's length, @ct's
 * previous backtrace in the chunk updated. @return 0, -EBADMSG, -ENOMEM or a writer error
 */
static int read_backtrace(struct cap_consumer *c, struct cthread *ct, const uint64_t *r,
			  uint32_t w, uint32_t words, uint64_t *id)
{
	uint32_t keep, n_new;
	int rc;

	if (w >= words)
		return -EBADMSG;
	keep = r[w] & 0xffff;
	n_new = (r[w] >> 16) & 0xffff;
	if ((r[w] >> 32) == SPOOL_BT_UNSAMPLED && keep == 0 && n_new == 0 && w + 1 == words) {
		*id = TFS_SYM_NONE; /* not sampled: the thread's backtrace stays as it was */
		return 0;
	}
	if ((r[w] >> 32) || keep > ct->bt_n || keep + n_new > SPOOL_MAX_BT_FRAMES ||
	    w + 1 + n_new != words)
		return -EBADMSG;
	if (keep == ct->bt_n && n_new == 0 && ct->bt_known) {
		*id = ct->bt_id; /* the same as the thread's previous one: the common case */
		return 0;
	}
	if (!ct->bt && !(ct->bt = malloc(SPOOL_MAX_BT_FRAMES * sizeof(*ct->bt))))
		return -ENOMEM;
	if (!ct->bt_h && !(ct->bt_h = malloc((SPOOL_MAX_BT_FRAMES + 1) * sizeof(*ct->bt_h))))
		return -ENOMEM;
	memcpy(ct->bt + keep, r + w + 1, n_new * sizeof(*ct->bt));
	/* the kept frames' hash is known: only the new ones are hashed */
	ct->bt_h[0] = CAP_STACKS_HASH_SEED;
	for (uint32_t i = keep; i < keep + n_new; i++)
		ct->bt_h[i + 1] = cap_stacks_hash_step(ct->bt_h[i], ct->bt[i]);
	ct->bt_n = keep + n_new;
	ct->bt_known = false;
	rc = cap_stacks_intern_hashed(c->stacks, c->w, RANK, ct->bt, ct->bt_n,
				      cap_stacks_hash_end(ct->bt_h[ct->bt_n], ct->bt_n), id);
	if (rc < 0)
		return rc;
	ct->bt_known = true;
	ct->bt_id = *id;
	return 0;
}

/* Thread @thread is named @name from now on (the last name counts). @return 0, -ENOMEM */
static int name_thread(struct cap_consumer *c, uint64_t thread, const char *name)
{
	char *d;

	/* ids are handed out by the spool header's counter; any other names no thread */
	if (thread >= atomic_load_explicit(&c->spool->hdr->next_thread, memory_order_relaxed))
		return 0;
	if (grow((void **)&c->tnames, &c->tnames_cap, (uint32_t)thread + 1, sizeof(char *)))
		return -ENOMEM;
	d = strdup(name);
	if (!d)
		return -ENOMEM;
	free(c->tnames[thread]);
	c->tnames[thread] = d;
	return 0;
}

/* A setname call (calls.txt) that succeeded names its thread. @return 0 or -ENOMEM */
static int note_setname(struct cap_consumer *c, const struct tfs_kind_desc *k,
			const union tfs_arg *a)
{
	uint64_t thread = UINT64_MAX;
	const char *name = NULL;
	int64_t ret = -1;

	for (uint32_t i = 0; i < k->n_args; i++) {
		if (!strcmp(k->args[i].name, "thread"))
			thread = a[i].u;
		else if (!strcmp(k->args[i].name, "name"))
			name = a[i].s;
		else if (!strcmp(k->args[i].name, "ret"))
			ret = a[i].i;
	}
	return ret == 0 && name ? name_thread(c, thread, name) : 0;
}

/*
 * The names the program gave its threads, as the metadata `thread_names`: one line
 * `<thread>=<name>` per named thread, in thread order, '\' and a newline in a name written
 * `\\` and `\n`; empty when none (every rank of a merge says so: no value is inherited).
 * @return 0 or -ENOMEM
 */
static int set_thread_names(struct cap_consumer *c)
{
	size_t cap = 1, len = 0;
	char *buf;
	int rc;

	for (uint32_t t = 0; t < c->tnames_cap; t++)
		if (c->tnames[t])
			cap += 16 + 2 * strlen(c->tnames[t]);
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (uint32_t t = 0; t < c->tnames_cap; t++) {
		if (!c->tnames[t])
			continue;
		len += (size_t)snprintf(buf + len, cap - len, "%s%" PRIu32 "=", len ? "\n" : "", t);
		for (const char *p = c->tnames[t]; *p; p++) {
			if (*p == '\\' || *p == '\n')
				buf[len++] = '\\';
			buf[len++] = *p == '\n' ? 'n' : *p;
		}
	}
	buf[len] = '\0';
	rc = cap_consumer_set_meta(c, "thread_names", buf);
	free(buf);
	return rc;
}

/*
 * The kind of call @call made inside others (REC_CALL_NESTED): its own arguments, then
 * `depth` and `in` (the outermost call it was inside), declared at first use.
 * @return 0 or a writer error
 */
static int nested_kind(struct cap_consumer *c, uint32_t call, const struct tfs_kind_desc *k,
		       uint32_t *out)
{
	static const struct tfs_arg_desc more[] = {
	    {"depth", TFS_TYPE_U64, TFS_ENC_SIG, 0, NULL},
	    {"in", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
	};
	struct tfs_arg_desc args[TFS_MAX_ARGS];
	struct tfs_kind_desc twin = *k;
	const uint32_t n_all = N_CALLS + cap_mpi_n_kinds;
	int rc;

	if (!c->nested_kind) {
		c->nested_kind = malloc(n_all * sizeof(*c->nested_kind));
		if (!c->nested_kind)
			return -ENOMEM;
		memset(c->nested_kind, 0xff, n_all * sizeof(*c->nested_kind));
	}
	if (c->nested_kind[call] != UINT32_MAX) {
		*out = c->nested_kind[call];
		return 0;
	}
	if (k->n_args + 2 > TFS_MAX_ARGS)
		return -EINVAL;
	memcpy(args, k->args, k->n_args * sizeof(*args));
	memcpy(args + k->n_args, more, sizeof(more));
	twin.args = args;
	twin.n_args = k->n_args + 2;
	rc = tfs_writer_add_kind(c->w, &twin, &c->nested_kind[call]);
	if (rc < 0) {
		c->nested_kind[call] = UINT32_MAX;
		return rc;
	}
	*out = c->nested_kind[call];
	return 0;
}

/*
 * The path of a file id, once per id (FORMAT.md §12): a call that opens a file (open,
 * openat, creat, fopen) or declares one (fd_file) has a STR argument `path` and a SYM
 * argument of class "file" that is not attached to another; the views then print the path
 * wherever an attached argument names that id. Only calls with strings get here.
 */
static void name_file(struct cap_consumer *c, const struct tfs_kind_desc *k,
		      const union tfs_arg *a)
{
	int32_t path = -1, file = -1;
	bool in_dir = false;
	int rc;

	for (uint32_t i = 0; i < k->n_args; i++) {
		const struct tfs_arg_desc *d = &k->args[i];

		if (!strcmp(d->name, "dirfd"))
			in_dir = a[i].i != AT_FDCWD;
		if (d->enc == TFS_ENC_STR && !strcmp(d->name, "path"))
			path = (int32_t)i;
		else if (d->enc == TFS_ENC_SYM && file < 0 && !(d->flags & TFS_ARG_ATTACH) &&
			 d->sym_class && !strcmp(d->sym_class, "file"))
			file = (int32_t)i;
	}
	/* relative to a directory descriptor, or a descriptor's alias: an fd_file gave the
	   whole path, or the pipe or file behind it (files.c) */
	if (path < 0 || file < 0 || a[file].u == TFS_SYM_NONE || !a[path].s[0] ||
	    (in_dir && a[path].s[0] != '/') || cap_path_names_fd(a[path].s))
		return;
	rc = tfs_writer_set_name(c->w, RANK, "file", a[file].u, a[path].s);
	if (rc == -ENOMEM && !c->err)
		c->err = rc;
}

/* mpi_pd of an allocation id that a buffer offset follows (MPI_IN_PLACE's place) */
#define PD_BUFFER 0xff

/* Whether @off is @stem's offset, "<stem>_off" (FORMAT.md §9.3). */
static bool is_offset_of(const char *off, const char *stem)
{
	size_t n = strlen(stem);

	return !strncmp(off, stem, n) && !strcmp(off + n, "_off");
}

/* Set a name; only running out of memory matters (the name is a courtesy to readers). */
static void set_name(struct cap_consumer *c, const char *cls, uint64_t id, const char *name)
{
	int rc = tfs_writer_set_name(c->w, RANK, cls, id, name);

	if (rc == -ENOMEM && !c->err)
		c->err = rc;
}

/*
 * On the first use of MPI kind @i (@k): the names of the values of each value-name class
 * its arguments have, as the calls' implementation defines them (FORMAT.md §9.2: the views
 * print `source=MPI_ANY_SOURCE`), and which arguments hold predefined handles.
 */
static void mpi_kind_names(struct cap_consumer *c, uint32_t i, const struct tfs_kind_desc *k)
{
	const struct cap_mpi_impl *im = NULL;

	for (uint32_t j = 0; j < cap_mpi_n_impls; j++)
		if (i - cap_mpi_impls[j].first < cap_mpi_impls[j].n)
			im = &cap_mpi_impls[j];
	for (uint32_t a = 0; a < k->n_args; a++) {
		const char *cls = k->args[a].sym_class;

		if (!cls)
			continue;
		if (k->args[a].enc == TFS_ENC_SYM) {
			for (uint32_t p = 0; p < cap_mpi_n_predefs; p++)
				if (!strcmp(cls, cap_mpi_predefs[p].sym_class))
					c->mpi_pd[(size_t)i * TFS_MAX_ARGS + a] = (uint8_t)(p + 1);
			if (!strcmp(cls, "alloc") && a + 1 < k->n_args &&
			    is_offset_of(k->args[a + 1].name, k->args[a].name))
				c->mpi_pd[(size_t)i * TFS_MAX_ARGS + a] = PD_BUFFER;
			continue;
		}
		for (uint32_t v = 0; im && v < im->n_vnames; v++)
			if (!strcmp(cls, im->vnames[v].sym_class))
				set_name(c, cls, im->vnames[v].key, im->vnames[v].name);
	}
}

/* The standard name of each predefined handle an MPI call of kind @i passes, once an id. */
static void mpi_handle_names(struct cap_consumer *c, uint32_t i, const struct tfs_kind_desc *k,
			     const union tfs_arg *a)
{
	const uint8_t *pd = c->mpi_pd + (size_t)i * TFS_MAX_ARGS;

	for (uint32_t j = 0; j < k->n_args; j++) {
		const struct cap_mpi_predef *p;
		uint64_t id = a[j].u, *named;

		if (!pd[j])
			continue;
		/* a buffer in no allocation is numbered, MPI_IN_PLACE all ones (mpi_rt_i.h,
		 * mpirt_buf): named at its first use, FORMAT.md §9.3 prints it by that name */
		if (pd[j] == PD_BUFFER) {
			if (!c->in_place_named && !id && a[j + 1].u == UINT64_MAX) {
				c->in_place_named = true;
				set_name(c, "buf", UINT64_MAX, "MPI_IN_PLACE");
			}
			continue;
		}
		p = &cap_mpi_predefs[pd[j] - 1];
		named = c->pd_named[pd[j] - 1];
		if (id >= p->n || named[id / 64] >> (id % 64) & 1)
			continue;
		named[id / 64] |= 1ull << (id % 64);
		set_name(c, p->sym_class, id, p->names[id]);
	}
}

/*
 * An interposed call: its u64 words and NUL-terminated strings, matched to its kind's
 * arguments in order, then its backtrace when @with_bt (REC_CALL_BT), or its depth and the
 * call it was inside when @nested (REC_CALL_NESTED).
 * @return 0, -EBADMSG or -errno
 */
static int call_record(struct cap_consumer *c, struct cthread *ct, const uint64_t *r,
		       uint32_t words, bool with_bt, bool nested)
{
	uint32_t call = (uint32_t)(r[0] >> 32), w = 3, n_str = 0;
	size_t len = (r[0] >> 16) & 0xffff, off = 0;
	union tfs_arg a[TFS_MAX_ARGS];
	const struct tfs_kind_desc *k;
	const char *str;

	k = cap_call_kind(call);
	if (!k || words < 3 || (call < N_CALLS ? !c->calls : !c->mpi_kind))
		return -EBADMSG;
	if (nested) { /* the two words after the payload */
		if (with_bt || words < 5 || r[words - 2] == 0 || r[words - 2] > UINT32_MAX)
			return -EBADMSG;
		words -= 2;
	}
	/* a recorded call has a stack exactly when its kind was declared with one */
	if (with_bt != (c->stacks && cap_call_has_stack(call)))
		return -EBADMSG;
	/* the words first, in one pass (most calls have no string), then the strings after them */
	for (uint32_t i = 0; i < k->n_args; i++) {
		if (k->args[i].enc == TFS_ENC_STR) {
			n_str++;
			continue;
		}
		if (w >= words)
			return -EBADMSG;
		a[i].u = r[w++];
	}
	if (w + (len + 7) / 8 > words)
		return -EBADMSG;
	str = (const char *)(r + w);
	for (uint32_t i = 0; n_str && i < k->n_args; i++) {
		const char *end;

		if (k->args[i].enc != TFS_ENC_STR)
			continue;
		end = off < len ? memchr(str + off, '\0', len - off) : NULL;
		if (!end)
			return -EBADMSG;
		a[i].s = str + off;
		off = (size_t)(end - str) + 1;
	}
	if (call >= N_CALLS && c->mpi_kind[call - N_CALLS] == UINT32_MAX) {
		int rc = tfs_writer_add_kind(c->w, k, &c->mpi_kind[call - N_CALLS]);

		if (rc < 0) {
			c->mpi_kind[call - N_CALLS] = UINT32_MAX;
			c->err = c->err ? c->err : rc;
			return 0;
		}
		mpi_kind_names(c, call - N_CALLS, k);
	}
	if (call >= N_CALLS)
		mpi_handle_names(c, call - N_CALLS, k, a);
	if (with_bt) {
		int rc = read_backtrace(c, ct, r, w + (uint32_t)((len + 7) / 8), words,
					&a[k->n_args].u);

		if (rc < 0)
			return rc;
	}
	if (nested) {
		const struct tfs_kind_desc *in = cap_call_kind((uint32_t)r[words + 1]);
		uint32_t twin;
		int rc;

		if (k->n_args + 2 > TFS_MAX_ARGS)
			return -EBADMSG;
		rc = nested_kind(c, call, k, &twin);
		if (rc < 0) {
			c->err = c->err ? c->err : rc;
			return 0;
		}
		a[k->n_args].u = r[words];
		a[k->n_args + 1].s = in ? in->name : "?";
		emit_kind(c, ct, twin, r[1], r[2], a);
	} else {
		emit_kind(c, ct, call < N_CALLS ? c->call_kind[call] : c->mpi_kind[call - N_CALLS],
			  r[1], r[2], a);
	}
	/* a nested open or fd_file names its file as a plain one does */
	if (len)
		name_file(c, k, a);
	return call == CALL_SETNAME ? note_setname(c, k, a) : 0;
}

/* Symbolic id of memory-access site @key: 0, 1, 2... in order of first use. */
static int site_id(struct cap_consumer *c, uint64_t key, uint64_t *id)
{
	uint32_t i;

	if (2 * (c->n_sites + 1) > c->sites_cap) {
		uint32_t cap = c->sites_cap ? 2 * c->sites_cap : 64;
		uint64_t *keys = calloc(cap, sizeof(*keys));
		uint32_t *ids = calloc(cap, sizeof(*ids));

		if (!keys || !ids) {
			free(keys);
			free(ids);
			return -ENOMEM;
		}
		for (uint32_t j = 0; j < c->sites_cap; j++) {
			if (!c->site_keys[j])
				continue;
			for (i = (uint32_t)(c->site_keys[j] * 0x9e3779b97f4a7c15u >> 40) % cap;
			     keys[i]; i = (i + 1) % cap)
				;
			keys[i] = c->site_keys[j];
			ids[i] = c->site_ids[j];
		}
		free(c->site_keys);
		free(c->site_ids);
		c->site_keys = keys;
		c->site_ids = ids;
		c->sites_cap = cap;
	}
	key++;
	for (i = (uint32_t)(key * 0x9e3779b97f4a7c15u >> 40) % c->sites_cap; c->site_keys[i];
	     i = (i + 1) % c->sites_cap) {
		if (c->site_keys[i] == key) {
			*id = c->site_ids[i];
			return 0;
		}
	}
	c->site_keys[i] = key;
	c->site_ids[i] = c->n_sites;
	*id = c->n_sites++;
	return 0;
}

static const char *str_of(struct cap_consumer *c, const struct cthread *ct, uint32_t id)
{
	if (id < ct->n_strs && ct->strs[id])
		return ct->strs[id];
	c->st.bad_records++;
	return "?";
}

static int add_sync(struct cthread *ct, uint32_t gen)
{
	if (grow((void **)&ct->syncs, &ct->syncs_cap, ct->n_syncs + 1, sizeof(*ct->syncs)))
		return -ENOMEM;
	ct->syncs[ct->n_syncs].gen = gen;
	ct->syncs[ct->n_syncs].index = n_events(ct);
	ct->n_syncs++;
	return 0;
}

static int def_string(struct cthread *ct, uint32_t id, const char *s)
{
	char *d;

	if (id >= ct->n_strs) {
		uint32_t cap = ct->n_strs;

		if (grow((void **)&ct->strs, &cap, id + 1, sizeof(char *)))
			return -ENOMEM;
		ct->n_strs = cap;
	}
	d = strdup(s);
	if (!d)
		return -ENOMEM;
	free(ct->strs[id]);
	ct->strs[id] = d;
	return 0;
}

static void zone_end(struct cap_consumer *c, struct cthread *ct, uint64_t ts)
{
	struct czone z;
	union tfs_arg a[2];

	if (ct->n_zones == 0) {
		c->st.bad_records++;
		return;
	}
	z = ct->zones[--ct->n_zones];
	a[0].s = str_of(c, ct, z.name);
	a[1].u = ct->n_zones;
	emit(c, ct, K_ZONE, z.ts_ns, ts > z.ts_ns ? ts - z.ts_ns : 0, a);
}

/*
 * A REC_DROPPED: the thread's zones the record does not count had their end dropped, so
 * they end here, unfinished, rather than hold every later zone inside them; then the mark.
 */
static void dropped(struct cap_consumer *c, struct cthread *ct, const uint64_t *r)
{
	char msg[64];
	union tfs_arg a[2];

	while (ct->n_zones > r[4] && !c->err) {
		struct czone z = ct->zones[--ct->n_zones];

		a[0].s = str_of(c, ct, z.name);
		a[1].u = ct->n_zones;
		emit(c, ct, K_ZONE_UNFINISHED, z.ts_ns, r[1] > z.ts_ns ? r[1] - z.ts_ns : 0, a);
	}
	snprintf(msg, sizeof(msg), "dropped %" PRIu64 " event%s", r[2], r[2] == 1 ? "" : "s");
	a[0].s = msg;
	a[1].u = r[2];
	emit(c, ct, K_DROPPED, r[1], r[3] > r[1] ? r[3] - r[1] : 0, a);
	c->n_dropped_said += r[2];
}

static int phase_begin(struct cap_consumer *c, struct cthread *ct, uint32_t thread,
		       uint32_t id, uint64_t scope, uint64_t gen, const char *name)
{
	char *d = strdup(name);

	if (!d)
		return -ENOMEM;
	if (scope == TFS_PHASE_PROCESS) {
		if (grow((void **)&c->pphases, &c->pphases_cap, c->n_pphases + 1,
			 sizeof(*c->pphases)) ||
		    add_sync(ct, (uint32_t)gen)) {
			free(d);
			return -ENOMEM;
		}
		c->pphases[c->n_pphases++] = (struct pphase){id, d, thread, (uint32_t)gen, 0};
		return 0;
	}
	if (grow((void **)&ct->phases, &ct->phases_cap, ct->n_phases + 1, sizeof(*ct->phases))) {
		free(d);
		return -ENOMEM;
	}
	ct->phases[ct->n_phases++] = (struct cphase){id, d, n_events(ct)};
	return 0;
}

static int close_thread_phase(struct cap_consumer *c, struct cthread *ct, uint32_t thread,
			      uint32_t i)
{
	struct cphase p = ct->phases[i];
	int rc = tfs_writer_add_phase(c->w, p.name, 0, thread, p.first, n_events(ct) - p.first);

	free(p.name);
	memmove(ct->phases + i, ct->phases + i + 1, (ct->n_phases - i - 1) * sizeof(p));
	ct->n_phases--;
	return rc;
}

static int phase_end(struct cap_consumer *c, struct cthread *ct, uint32_t thread, uint32_t id,
		     uint64_t gen)
{
	if (gen) {
		for (uint32_t i = 0; i < c->n_pphases; i++)
			if (c->pphases[i].id == id)
				c->pphases[i].gen_end = (uint32_t)gen;
		return add_sync(ct, (uint32_t)gen);
	}
	for (uint32_t i = ct->n_phases; i-- > 0;)
		if (ct->phases[i].id == id)
			return close_thread_phase(c, ct, thread, i);
	c->st.bad_records++;
	return 0;
}

/* The string payload of a record, NUL-terminated in @buf. false: it does not fit. */
static bool payload(const uint64_t *r, uint32_t words, uint32_t n_args, char *buf, size_t cap)
{
	size_t len = (r[0] >> 16) & 0xffff;

	if (2 + n_args + (len + 7) / 8 > words || len >= cap)
		return false;
	memcpy(buf, r + 2 + n_args, len);
	buf[len] = '\0';
	return true;
}

/* One record of thread @thread. @return 0, -EBADMSG (malformed: stop the chunk), -ENOMEM */
static int record(struct cap_consumer *c, uint32_t thread, const uint64_t *r, uint32_t words)
{
	struct cthread *ct = &c->threads[thread];
	uint32_t kind = cap_rec_kind(r[0]), aux = (uint32_t)(r[0] >> 32);
	char buf[SPOOL_MAX_PATH + 1]; /* a name, message or path: longer ones are malformed */
	union tfs_arg a[3];
	uint64_t site;

	ct->last_ts = r[1];
	c->st.n_records++;
	switch (kind) {
	case REC_STRING:
		if (!payload(r, words, 0, buf, sizeof(buf)))
			return -EBADMSG;
		return def_string(ct, aux, buf);
	case REC_ZONE_BEGIN:
		if (grow((void **)&ct->zones, &ct->zones_cap, ct->n_zones + 1, sizeof(*ct->zones)))
			return -ENOMEM;
		ct->zones[ct->n_zones++] = (struct czone){aux, r[1]};
		return 0;
	case REC_ZONE_END:
		zone_end(c, ct, r[1]);
		return 0;
	case REC_MARK:
	case REC_THREAD_NAME:
		if (!payload(r, words, 0, buf, sizeof(buf)))
			return -EBADMSG;
		a[0].s = buf;
		emit(c, ct, kind == REC_MARK ? K_MARK : K_THREAD_NAME, r[1], 0, a);
		return kind == REC_THREAD_NAME ? name_thread(c, thread, buf) : 0;
	case REC_COUNTER:
		if (words < 3)
			return -EBADMSG;
		a[0].s = str_of(c, ct, aux);
		a[1].i = (int64_t)r[2];
		emit(c, ct, K_COUNTER, r[1], 0, a);
		return 0;
	case REC_MEM:
		if (words < 5)
			return -EBADMSG;
		if (site_id(c, r[4], &site) < 0)
			return -ENOMEM;
		a[0].u = r[2];
		a[1].u = r[3];
		a[2].u = site;
		emit(c, ct, (r[0] >> 16) & 1 ? K_STORE : K_LOAD, r[1], 0, a);
		return 0;
	case REC_PHASE_BEGIN:
		if (!payload(r, words, 2, buf, sizeof(buf)))
			return -EBADMSG;
		return phase_begin(c, ct, thread, aux, r[2], r[3], buf);
	case REC_PHASE_END:
		if (words < 3)
			return -EBADMSG;
		return phase_end(c, ct, thread, aux, r[2]);
	case REC_SYNC:
		return words < 3 ? -EBADMSG : add_sync(ct, (uint32_t)r[2]);
	case REC_DROPPED:
		if (words < 5)
			return -EBADMSG;
		dropped(c, ct, r);
		return 0;
	case REC_CALL:
	case REC_CALL_BT:
	case REC_CALL_NESTED:
		return call_record(c, ct, r, words, kind == REC_CALL_BT, kind == REC_CALL_NESTED);
	case REC_MODULE:
		if (!c->stacks || !payload(r, words, 4, buf, sizeof(buf)) ||
		    r[5] > SPOOL_FRAME_TAG_MAX)
			return -EBADMSG;
		return cap_stacks_add_module(c->stacks, r[2], r[3], r[4], (uint32_t)r[5], buf);
	default:
		return -EBADMSG;
	}
}

static int thread_get(struct cap_consumer *c, uint32_t thread, struct cthread **out)
{
	struct cthread *ct;
	int rc;

	/* ids are handed out by the spool header's counter; any other is a damaged chunk */
	if (thread >= atomic_load_explicit(&c->spool->hdr->next_thread, memory_order_relaxed))
		return -EBADMSG;
	if (thread >= c->n_threads) {
		uint32_t cap = c->n_threads;

		if (grow((void **)&c->threads, &cap, thread + 1, sizeof(*c->threads)))
			return -ENOMEM;
		c->n_threads = cap;
	}
	ct = &c->threads[thread];
	if (!ct->s) {
		rc = tfs_writer_stream_new(c->w, 0, thread, &ct->s);
		if (rc < 0)
			return rc;
		c->st.n_threads++;
	}
	*out = ct;
	return 0;
}

/* Read the records of one chunk, up to its published fill. */
static int read_chunk(struct cap_consumer *c, struct spool_chunk *ch)
{
	uint64_t fill = atomic_load_explicit(&ch->fill, memory_order_acquire);
	const uint8_t *data = cap_chunk_data(ch);
	struct cthread *ct;
	uint64_t off = 0;
	int rc;

	rc = thread_get(c, ch->thread, &ct);
	if (rc == -EBADMSG) {
		c->st.bad_records++;
		return 0;
	}
	if (rc < 0)
		return rc;
	if (fill > cap_chunk_cap(c->spool) || fill % 8) {
		c->st.bad_records++;
		fill = 0; /* damaged: nothing in it can be trusted */
	}
	c->st.n_chunks++;
	ct->bt_n = 0; /* a chunk's backtraces refer to none before it */
	ct->bt_known = false;
	while (off + 16 <= fill) {
		const uint64_t *r = (const uint64_t *)(data + off);
		uint32_t words = cap_rec_words(r[0]);

		if (words < 2 || off + words * 8u > fill) {
			c->st.bad_records++;
			break;
		}
		rc = record(c, ch->thread, r, words);
		if (rc == -EBADMSG) {
			c->st.bad_records++;
			break;
		}
		if (rc < 0)
			return rc;
		if (c->err)
			return c->err;
		off += words * 8u;
	}
	ct->next_seq = ch->seq + 1;
	return 0;
}

static int cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t next_seq(const struct cap_consumer *c, uint32_t thread)
{
	return thread < c->n_threads ? c->threads[thread].next_seq : 0;
}

/* Read chunks in state FULL (and OWNED too when @all), each thread's in order. */
static int take_in(struct cap_consumer *c, bool all)
{
	const struct spool *s = c->spool;
	const uint32_t n_ready = cap_spool_n_ready(s);
	uint32_t n = 0;
	int rc, taken = 0;

	/* chunks past the ready ones were never claimed and have no memory behind them */
	for (uint32_t i = 0; i < n_ready; i++) {
		struct spool_chunk *ch = cap_spool_chunk(s, i);
		uint32_t st = atomic_load_explicit(&ch->state, memory_order_acquire);

		if (st == SPOOL_FULL || (all && st == SPOOL_OWNED))
			c->cands[n++] = (struct cand){ch->thread, ch->seq, i};
	}
	qsort(c->cands, n, sizeof(*c->cands), cand_cmp);
	for (uint32_t i = 0; i < n; i++) {
		struct spool_chunk *ch = cap_spool_chunk(s, c->cands[i].idx);

		/* a thread's next chunk may still be filling: read none after it */
		if (!all && c->cands[i].seq != next_seq(c, c->cands[i].thread))
			continue;
		c->in_partial = atomic_load_explicit(&ch->state, memory_order_relaxed) ==
				SPOOL_OWNED;
		c->st.n_partial_chunks += c->in_partial;
		rc = read_chunk(c, ch);
		c->in_partial = false;
		if (rc < 0)
			return c->err = rc;
		atomic_store_explicit(&ch->state, SPOOL_FREE, memory_order_release);
		cap_spool_recycled(s);
		taken++;
	}
	return taken;
}

int cap_consumer_poll(struct cap_consumer *c)
{
	if (c->err)
		return c->err;
	if (c->finished) /* handed over early (MPI_Finalize): nothing more is taken in */
		return 0;
	return take_in(c, false);
}

static int end_thread(struct cap_consumer *c, uint32_t thread)
{
	struct cthread *ct = &c->threads[thread];
	union tfs_arg a[2];
	int rc = 0;

	if (!ct->s)
		return 0;
	while (ct->n_zones > 0 && !c->err) {
		struct czone z = ct->zones[--ct->n_zones];

		a[0].s = str_of(c, ct, z.name);
		a[1].u = ct->n_zones;
		emit(c, ct, K_ZONE_UNFINISHED, z.ts_ns,
		     ct->last_ts > z.ts_ns ? ct->last_ts - z.ts_ns : 0, a);
		c->st.open_zones++;
	}
	while (ct->n_phases > 0 && rc == 0) {
		rc = close_thread_phase(c, ct, thread, ct->n_phases - 1);
		c->st.open_phases++;
	}
	return c->err ? c->err : rc;
}

/* Index of the first event thread @ct recorded after it saw generation @gen. */
static uint64_t sync_index(const struct cthread *ct, uint32_t gen)
{
	for (uint32_t i = 0; i < ct->n_syncs; i++)
		if (ct->syncs[i].gen >= gen)
			return ct->syncs[i].index;
	return n_events(ct);
}

static int add_process_phase(struct cap_consumer *c, const struct pphase *p)
{
	int rc = 0;

	for (uint32_t t = 0; t < c->n_threads && rc == 0; t++) {
		const struct cthread *ct = &c->threads[t];
		uint64_t first, end;

		if (!ct->s)
			continue;
		first = sync_index(ct, p->gen_begin);
		end = p->gen_end ? sync_index(ct, p->gen_end) : n_events(ct);
		if (end < first)
			end = first;
		/* threads with nothing in the span are left out, except the one that began it */
		if (end > first || t == p->thread)
			rc = tfs_writer_add_phase(c->w, p->name, 0, t, first, end - first);
	}
	return rc;
}

/* Symbolise the backtraces' addresses (the process is gone); metadata says how many. */
static int finish_stacks(struct cap_consumer *c)
{
	char buf[80];
	int rc = cap_stacks_symbolize(c->stacks, c->w, RANK, &c->st.n_named_addrs);

	c->st.n_stacks = cap_stacks_n_stacks(c->stacks);
	c->st.n_addrs = cap_stacks_n_addrs(c->stacks);
	snprintf(buf, sizeof(buf), "%" PRIu32, c->spool->hdr->bt_depth);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "backtrace_depth", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64, c->st.n_stacks);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "backtraces", buf);
	snprintf(buf, sizeof(buf), "%" PRIu64 " (%" PRIu64 " named)", c->st.n_addrs,
		 c->st.n_named_addrs);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "backtrace_addresses", buf);
	cap_sample_describe(&c->spool->hdr->policy, buf, sizeof(buf));
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "backtrace_sampling", buf);
	return rc;
}

/*
 * Which clock stamped the events: `clock` = monotonic or tsc, and with tsc `tsc_hz`, the rate
 * the recording measured. Apart, so that the ranks of a job, each its own recording with a
 * rate measured a little differently, merge into one `clock` (the MPI merge keeps rank 0's
 * tsc_hz only).
 */
static int set_clock_meta(struct cap_consumer *c)
{
	const uint64_t hz = atomic_load(&c->spool->hdr->tsc_hz);
	char buf[32];
	int rc = cap_consumer_set_meta(c, "clock", hz > SPOOL_TSC_NONE ? "tsc" : "monotonic");

	if (rc == 0 && hz > SPOOL_TSC_NONE) {
		snprintf(buf, sizeof(buf), "%" PRIu64, hz);
		rc = cap_consumer_set_meta(c, "tsc_hz", buf);
	}
	return rc;
}

int cap_consumer_finish(struct cap_consumer *c)
{
	char buf[32];
	int rc;

	if (c->finished)
		return -EALREADY;
	c->finished = true;
	/* what producers write from now on is in no trace: they must not wait for it */
	cap_spool_set_consumer(c->spool, SPOOL_CONSUMER_DONE);
	if (c->err)
		return c->err;
	rc = take_in(c, true);
	if (rc < 0)
		return rc;
	for (uint32_t t = 0; t < c->n_threads && rc >= 0; t++)
		rc = end_thread(c, t);
	for (uint32_t i = 0; i < c->n_pphases && rc >= 0; i++) {
		c->st.open_phases += c->pphases[i].gen_end == 0;
		rc = add_process_phase(c, &c->pphases[i]);
	}
	if (rc >= 0 && c->stacks)
		rc = finish_stacks(c);
	if (rc >= 0)
		rc = set_thread_names(c);
	if (rc < 0)
		return c->err = rc;
	c->st.dropped_events = atomic_load(&c->spool->hdr->dropped_events);
	c->st.wait_ns = atomic_load(&c->spool->hdr->wait_ns);
	c->st.n_stalls = atomic_load(&c->spool->hdr->n_stalls);
	snprintf(buf, sizeof(buf), "%" PRIu64, c->st.dropped_events);
	rc = cap_consumer_set_meta(c, "dropped_events", buf);
	/* drops of threads that ended before they could say them: no mark says where (always
	   written, so that a merged rank never takes another's value, FORMAT.md §3.1) */
	snprintf(buf, sizeof(buf), "%" PRIu64, c->st.dropped_events > c->n_dropped_said
						   ? c->st.dropped_events - c->n_dropped_said : 0);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "dropped_unplaced", buf);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "when_full", c->spool->hdr->policy.when_full ==
							      SPOOL_DROP ? "drop" : "wait");
	if (rc == 0 && c->timed)
		rc = set_clock_meta(c);
	return rc;
}

int cap_consumer_set_meta(struct cap_consumer *c, const char *key, const char *value)
{
	return tfs_writer_set_meta(c->w, key, value);
}

int cap_consumer_set_common_meta(struct cap_consumer *c, const char *program,
				 const char *cmdline, long pid, const char *mode)
{
	time_t secs = (time_t)(c->spool->hdr->origin_realtime_ns / 1000000000u);
	char start[64] = "", pid_s[32], host[256] = "";
	struct tm tm;
	int rc;

	if (gmtime_r(&secs, &tm))
		strftime(start, sizeof(start), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(pid_s, sizeof(pid_s), "%ld", pid);
	gethostname(host, sizeof(host) - 1);
	rc = cap_consumer_set_meta(c, "program", program);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "cmdline", cmdline);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "pid", pid_s);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "capture", mode);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "start_time", start);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "host", host);
	if (rc == 0)
		rc = cap_consumer_set_meta(c, "tracefs_version", tfs_version());
	return rc;
}

int cap_consumer_save(struct cap_consumer *c, const char *path)
{
	if (c->err)
		return c->err;
	return tfs_writer_save(c->w, path);
}

void cap_consumer_skip_recompress(struct cap_consumer *c)
{
	tfs_writer_skip_recompress(c->w);
}

void cap_consumer_cap_recompress(struct cap_consumer *c, int level)
{
	tfs_writer_cap_recompress(c->w, level);
}

void cap_consumer_merge_input(struct cap_consumer *c)
{
	tfs_writer_merge_input(c->w);
}

int cap_consumer_save_mem(struct cap_consumer *c, void **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	if (c->err)
		return c->err;
	return tfs_writer_save_mem(c->w, out, len);
}

void cap_consumer_stats(const struct cap_consumer *c, struct tfs_recording_stats *st)
{
	*st = c->st;
}
