/*
 * The generated files of the virtual tree: info.json (the same object `tracefs info --json`
 * prints), README.txt (fixed text plus a few trace facts) and the tail of every trace.json
 * (metadata and phase events), plus the text buffer the generators share. Only the phase
 * events decode anything: their first and last events' times. This is the only file that
 * builds JSON; the event lines of trace.json come from the codec's Chrome view.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tfs/reader.h"
#include "tfs/writer.h"
#include "vlayout_i.h"
#include "vpict_i.h"

static const char *timing_name(int timing)
{
	switch (timing) {
	case TFS_TIMING_NONE:
		return "none";
	case TFS_TIMING_LOSSLESS:
		return "lossless";
	case TFS_TIMING_LOSSY:
		return "lossy";
	}
	return "unknown";
}

json_t *fs_json_bytes_new(const char *s)
{
	size_t n = strlen(s), len = tfs_escape(NULL, 0, s, n, TFS_ESCAPE_UTF8, NULL);
	char *utf8;
	json_t *j;

	if (len == n) /* nothing replaced */
		return json_stringn(s, n);
	utf8 = malloc(len + 1);
	if (!utf8)
		return NULL;
	tfs_escape(utf8, len + 1, s, n, TFS_ESCAPE_UTF8, NULL);
	j = json_stringn(utf8, len);
	free(utf8);
	return j;
}

/*
 * A name for fs_info_json_new(): fs_json_bytes_new(), or with @raw the bytes of @s as they
 * are (not JSON to dump: for `tracefs info` to print with the text escapes).
 */
static json_t *name_json(const char *s, bool raw)
{
	return raw ? json_stringn_nocheck(s, strlen(s)) : fs_json_bytes_new(s);
}

/*
 * Set @key of @obj to @val, stealing @val whatever happens; false if either is NULL (an
 * allocation failed before) or the set fails.
 */
static bool put(json_t *obj, const char *key, json_t *val)
{
	if (!obj || !val) {
		json_decref(val);
		return false;
	}
	return json_object_set_new(obj, key, val) == 0;
}

/* Append @val to @arr, stealing @val whatever happens. */
static bool push(json_t *arr, json_t *val)
{
	if (!arr || !val) {
		json_decref(val);
		return false;
	}
	return json_array_append_new(arr, val) == 0;
}

/*
 * The metadata keys whose values are numbers (FORMAT.md §3.1 and the capture's), with or
 * without a .rank<R> suffix: info.json gives them as JSON integers when they are canonical
 * decimal numbers, so that a key has one type across traces; every other value is a string.
 */
static const char *const meta_integers[] = {"pid",	   "ppid",	     "backtrace_depth",
					    "backtraces", "dropped_events", "mpi_size"};

static bool meta_is_integer(const char *key)
{
	size_t len = strcspn(key, ".");

	if (key[len] && strncmp(key + len, ".rank", 5))
		return false;
	for (size_t i = 0; i < sizeof(meta_integers) / sizeof(meta_integers[0]); i++) {
		if (strlen(meta_integers[i]) == len && !strncmp(key, meta_integers[i], len))
			return true;
	}
	return false;
}

/* @v as a JSON integer when @key holds numbers and @v is one (no sign, no leading 0). */
static json_t *meta_value(const char *key, const char *v, bool raw)
{
	unsigned long long n;
	char *end;

	if (!meta_is_integer(key) || !*v || (*v == '0' && v[1]) || *v < '0' || *v > '9')
		return name_json(v, raw);
	errno = 0;
	n = strtoull(v, &end, 10);
	if (*end || errno || n > (unsigned long long)INT64_MAX)
		return name_json(v, raw);
	return json_integer((json_int_t)n);
}

static bool put_meta(json_t *o, const struct tfs_trace *t, bool raw)
{
	static const char *const keys[] = {"program", "cmdline", "host", "start_time"};
	json_t *meta = json_object();
	const char *k, *v;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		v = tfs_trace_meta(t, keys[i]);
		if (!put(o, keys[i], v ? name_json(v, raw) : json_null()))
			goto err_free_meta;
	}
	for (uint32_t i = 0; tfs_trace_meta_at(t, i, &k, &v) == 0; i++) {
		json_t *key = name_json(k, raw), *val = meta_value(k, v, raw);
		int rc;

		if (!key || !val) {
			json_decref(key);
			json_decref(val);
			goto err_free_meta;
		}
		/* a raw key is no UTF-8 to check; the set steals @val whatever happens */
		rc = json_object_set_new_nocheck(meta, json_string_value(key), val);
		json_decref(key);
		if (rc < 0)
			goto err_free_meta;
	}
	return put(o, "meta", meta);

err_free_meta:
	json_decref(meta);
	return false;
}

static json_t *timing_json(const struct tfs_trace_info *ti)
{
	json_t *o = json_object();

	if (!put(o, "mode", json_string(timing_name(ti->timing))) ||
	    (ti->timing == TFS_TIMING_LOSSY && !put(o, "rel_err", json_real(ti->rel_err))) ||
	    !put(o, "max_ts_ns", json_integer((json_int_t)ti->max_ts_ns)) ||
	    !put(o, "max_dur_ns", json_integer((json_int_t)ti->max_dur_ns))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * A trace of more streams than this lists its streams and ranks in runs, so that info of
 * 10^6 ranks of one program is a few entries, not 10^6 JSON objects (about 2 GB).
 */
#define FS_INFO_STREAMS_EACH 1024

static json_t *stream_json(const struct tfs_stream_info *si, uint32_t index, uint32_t count,
			   bool runs)
{
	json_t *o = json_object();

	if (!put(o, "index", json_integer(index)) || !put(o, "rank", json_integer(si->rank)) ||
	    !put(o, "thread", json_integer(si->thread)) ||
	    !put(o, "events", json_integer((json_int_t)si->n_events)) ||
	    !put(o, "blocks", json_integer(si->n_blocks)) ||
	    !put(o, "rules", json_integer(si->n_rules)) ||
	    !put(o, "height", json_integer(si->height)) ||
	    !put(o, "same_as", json_integer(si->same_as)) ||
	    !put(o, "grammar_bytes", json_integer((json_int_t)si->grammar_bytes)) ||
	    !put(o, "values_bytes", json_integer((json_int_t)si->values_bytes)) ||
	    (runs && !put(o, "count", json_integer(count)))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* Whether stream @b (index @ib) continues the run of @a: the next rank, a copy of one stream. */
static bool continues(const struct tfs_stream_info *a, uint32_t ia,
		      const struct tfs_stream_info *b, uint32_t ib)
{
	return ib == ia + 1 && b->rank == a->rank + 1 && b->thread == a->thread &&
	       a->same_as != ia && b->same_as == a->same_as && b->n_events == a->n_events &&
	       b->n_blocks == a->n_blocks && b->n_rules == a->n_rules && b->height == a->height &&
	       b->grammar_bytes == a->grammar_bytes && b->values_bytes == a->values_bytes;
}

/*
 * "streams": one entry a stream, by rank then thread, "index" its place in the file (what
 * same_as refers to); past FS_INFO_STREAMS_EACH streams, one entry a run of streams of
 * consecutive ranks and indices, each a copy of one stream, with "index" (its first stream)
 * and "count" (streams in it: ranks rank .. rank + count - 1).
 */
static bool put_stream_list(json_t *o, const struct tfs_trace *t, const struct tfs_trace_info *ti)
{
	bool runs = ti->n_streams > FS_INFO_STREAMS_EACH;
	json_t *streams = json_array();
	struct tfs_stream_info first = {0}, last = {0}, si;
	uint32_t i0 = 0, n = 0, prev = 0, idx;

	for (uint32_t s = 0; streams && s < ti->n_streams; s++) {
		if (tfs_trace_stream_sorted(t, s, &idx) < 0 || tfs_trace_stream(t, idx, &si) < 0 ||
		    si.rank >= ti->n_ranks)
			goto err_free_streams;
		if (s > 0 && runs && continues(&last, prev, &si, idx)) {
			last = si;
			prev = idx;
			n++;
			continue;
		}
		if (s > 0 && !push(streams, stream_json(&first, i0, n, runs)))
			goto err_free_streams;
		first = last = si;
		i0 = prev = idx;
		n = 1;
	}
	if (streams && ti->n_streams && !push(streams, stream_json(&first, i0, n, runs)))
		goto err_free_streams;
	return put(o, "streams", streams);

err_free_streams:
	json_decref(streams);
	return false;
}

/* The threads of @rank, in order: [] for a rank without streams. */
static json_t *rank_threads(const struct tfs_trace *t, uint32_t rank)
{
	json_t *threads = json_array();
	struct tfs_stream_info si;
	uint32_t first, n, idx;

	tfs_trace_rank_streams(t, rank, &first, &n);
	for (uint32_t k = first; threads && k < first + n; k++) {
		if (tfs_trace_stream_sorted(t, k, &idx) < 0 || tfs_trace_stream(t, idx, &si) < 0 ||
		    !push(threads, json_integer(si.thread)))
			goto err_free_threads;
	}
	return threads;

err_free_threads:
	json_decref(threads);
	return NULL;
}

/*
 * "ranks": [{"rank": r, "threads": [t...]}] in rank order, the ranks shown (those with
 * streams, and a process that recorded no event, with threads []: struct fs_procs); past
 * FS_INFO_STREAMS_EACH streams, consecutive ranks of the same threads are one entry with
 * "count" (ranks rank .. rank + count - 1).
 */
static bool put_ranks(json_t *o, const struct tfs_trace *t, const struct tfs_trace_info *ti,
		      const struct fs_procs *p)
{
	bool runs = ti->n_streams > FS_INFO_STREAMS_EACH;
	json_t *ranks = json_array(), *e = NULL;
	uint32_t first = 0;

	for (uint32_t k = 0; ranks && k < p->n_shown; k++) {
		const uint32_t rank = p->shown[k];
		json_t *threads = rank_threads(t, rank);

		if (!threads)
			goto err_free_ranks;
		if (e && runs && rank == first + json_integer_value(json_object_get(e, "count")) &&
		    json_equal(threads, json_object_get(e, "threads"))) {
			json_decref(threads);
			if (json_object_set_new(e, "count", json_integer(rank - first + 1)))
				goto err_free_ranks;
			continue;
		}
		e = json_object();
		if (!e) {
			json_decref(threads);
			goto err_free_ranks;
		}
		if (!put(e, "rank", json_integer(rank))) {
			json_decref(threads);
			json_decref(e);
			goto err_free_ranks;
		}
		if (!put(e, "threads", threads) || (runs && !put(e, "count", json_integer(1)))) {
			json_decref(e);
			goto err_free_ranks;
		}
		if (!push(ranks, e))
			goto err_free_ranks;
		first = rank;
	}
	return put(o, "ranks", ranks);

err_free_ranks:
	json_decref(ranks);
	return false;
}

/* A phase as info.json lists it: its name, directory, rank, thread and events. */
struct phase_row {
	const char *name, *dir;
	uint32_t rank, thread;
	uint64_t first, events;
};

/* Whether @b is the phase that @a, the last of a run of @count, would be on the next rank. */
static bool phase_continues(const struct phase_row *a, uint32_t count, const struct phase_row *b)
{
	return b->rank == a->rank + count && b->thread == a->thread && b->first == a->first &&
	       b->events == a->events && !strcmp(b->name, a->name) && !strcmp(b->dir, a->dir);
}

static json_t *phase_json(const struct phase_row *r, uint32_t count, bool runs, bool raw)
{
	json_t *e = json_object();

	if (!put(e, "name", name_json(r->name, raw)) || !put(e, "dir", name_json(r->dir, raw)) || !put(e, "rank", json_integer(r->rank)) ||
	    !put(e, "thread", json_integer(r->thread)) ||
	    !put(e, "first_event", json_integer((json_int_t)r->first)) ||
	    !put(e, "events", json_integer((json_int_t)r->events)) ||
	    (runs && !put(e, "count", json_integer(count)))) {
		json_decref(e);
		return NULL;
	}
	return e;
}

/*
 * "phases": one entry a phase, in the trace's order; past FS_INFO_STREAMS_EACH phases,
 * consecutive phases alike (name, directory, thread, first event and events) on
 * consecutive ranks are one entry with "count" (ranks rank .. rank + count - 1), as
 * streams are, so that a job of 10^6 ranks that all mark one phase lists it once.
 */
static bool put_phases(json_t *o, const struct tfs_trace *t, const struct tfs_trace_info *ti,
		       bool raw)
{
	bool runs = ti->n_phases > FS_INFO_STREAMS_EACH;
	json_t *phases = json_array();
	struct phase_row first = {0};
	uint32_t count = 0;
	char **dirs;

	if (!phases || fs_phase_dirs_new(t, &dirs) < 0)
		goto err_free_phases;
	for (uint32_t i = 0; i < ti->n_phases; i++) {
		struct tfs_phase_info pi;
		struct tfs_stream_info si;
		struct phase_row r;

		if (tfs_trace_phase(t, i, &pi) < 0 || tfs_trace_stream(t, pi.stream, &si) < 0)
			goto err_free_dirs;
		r = (struct phase_row){.name = pi.name ? pi.name : "", .dir = dirs[i],
				       .rank = si.rank, .thread = si.thread,
				       .first = pi.first_event, .events = pi.n_events};
		if (count && runs && phase_continues(&first, count, &r)) {
			count++;
			continue;
		}
		if (count && !push(phases, phase_json(&first, count, runs, raw)))
			goto err_free_dirs;
		first = r;
		count = 1;
	}
	if (count && !push(phases, phase_json(&first, count, runs, raw)))
		goto err_free_dirs;
	fs_phase_dirs_free(dirs, ti->n_phases);
	return put(o, "phases", phases);

err_free_dirs:
	fs_phase_dirs_free(dirs, ti->n_phases);
err_free_phases:
	json_decref(phases);
	return false;
}

static json_t *section_json(uint32_t idx, const struct tfs_section_info *s)
{
	json_t *o = json_object();

	if (!put(o, "index", json_integer(idx)) || !put(o, "type", json_string(s->type_name)) ||
	    !put(o, "codec", json_string(s->codec == 2 ? "packed" : s->codec ? "zstd" : "raw")) ||
	    !put(o, "offset", json_integer((json_int_t)s->offset)) ||
	    !put(o, "stored_bytes", json_integer((json_int_t)s->stored_bytes)) ||
	    !put(o, "raw_bytes", json_integer((json_int_t)s->raw_bytes))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* "sections" (each) and "section_totals" ({type: {count, stored_bytes, raw_bytes}}). */
static bool put_sections(json_t *o, const struct tfs_trace *t, const struct tfs_trace_info *ti)
{
	json_t *list = json_array(), *totals = json_object(), *tab;
	bool ok = list && totals;

	for (uint32_t i = 0; ok && i < ti->n_sections; i++) {
		struct tfs_section_info s;
		json_t *tot;

		ok = tfs_trace_section(t, i, &s) == 0 && push(list, section_json(i, &s));
		if (!ok)
			break;
		tot = json_object_get(totals, s.type_name);
		if (!tot) {
			tot = json_object();
			if (!put(tot, "count", json_integer(0)) ||
			    !put(tot, "stored_bytes", json_integer(0)) ||
			    !put(tot, "raw_bytes", json_integer(0))) {
				json_decref(tot);
				ok = false;
				break;
			}
			ok = put(totals, s.type_name, tot);
			if (!ok)
				break;
		}
		json_integer_set(json_object_get(tot, "count"),
				 json_integer_value(json_object_get(tot, "count")) + 1);
		json_integer_set(json_object_get(tot, "stored_bytes"),
				 json_integer_value(json_object_get(tot, "stored_bytes")) +
				     (json_int_t)s.stored_bytes);
		json_integer_set(json_object_get(tot, "raw_bytes"),
				 json_integer_value(json_object_get(tot, "raw_bytes")) +
				     (json_int_t)s.raw_bytes);
	}
	if (!ok) {
		json_decref(list);
		json_decref(totals);
		return false;
	}
	/* the table (with the packed sections' bytes) completes the file: header + all = size */
	tab = json_object();
	if (!put(tab, "count", json_integer(1)) ||
	    !put(tab, "stored_bytes", json_integer((json_int_t)ti->table_bytes)) ||
	    !put(tab, "raw_bytes", json_integer((json_int_t)ti->table_raw_bytes))) {
		json_decref(tab);
		tab = NULL;
	}
	ok = put(totals, "table", tab);
	if (!ok) {
		json_decref(list);
		json_decref(totals);
		return false;
	}
	return put(o, "sections", list) && put(o, "section_totals", totals);
}

/* JSON of a string that may be unknown (NULL: null). */
static json_t *str_or_null(const char *s, bool raw)
{
	return s ? name_json(s, raw) : json_null();
}

static json_t *int_or_null(int64_t v)
{
	return v >= 0 ? json_integer((json_int_t)v) : json_null();
}

static json_t *process_json(const struct fs_proc *q, uint32_t rank, bool raw)
{
	json_t *o = json_object();
	bool known = q->end && strncmp(q->end, "unknown", 7) != 0;

	if (!put(o, "rank", json_integer(rank)) || !put(o, "program", str_or_null(q->program, raw)) ||
	    !put(o, "images", str_or_null(q->images, raw)) || !put(o, "pid", int_or_null(q->pid)) ||
	    !put(o, "ppid", int_or_null(q->ppid)) ||
	    !put(o, "parent_rank", int_or_null(q->parent_rank)) ||
	    !put(o, "end", str_or_null(q->end, raw)) || !put(o, "end_known", json_boolean(known))) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/*
 * "processes": each rank of a recording as the process it was (program, images, pid,
 * ppid, parent rank, end; end_known false when the end is "unknown: <why>" or absent).
 * Only for a recording's process tree (pid metadata, not an MPI job's ranks).
 */
static bool put_processes(json_t *o, const struct fs_procs *p, bool raw)
{
	json_t *arr;

	if (!p->by_pid)
		return true;
	arr = json_array();
	for (uint32_t k = 0; arr && k < p->n_shown; k++) {
		struct fs_proc q;

		fs_proc_at(p, p->shown[k], &q);
		if (!push(arr, process_json(&q, p->shown[k], raw))) {
			json_decref(arr);
			arr = NULL;
		}
	}
	return put(o, "processes", arr);
}

json_t *fs_info_json_new(const struct tfs_trace *t, bool raw_names)
{
	struct tfs_trace_info ti;
	struct fs_procs *p;
	char version[32];
	json_t *o;
	double per_event, ratio;

	tfs_trace_get_info(t, &ti);
	if (fs_procs_new(t, ti.n_ranks, &p) < 0)
		return NULL;
	o = json_object();
	snprintf(version, sizeof(version), "%u.%u", ti.version_major, ti.version_minor);
	per_event = ti.n_events ? (double)ti.file_bytes / (double)ti.n_events : 0.0;
	ratio = ti.file_bytes ? (double)ti.text_bytes / (double)ti.file_bytes : 0.0;
	if (!put(o, "format", json_string(version)) ||
	    !put(o, "tracefs_version", json_string(tfs_version())) || !put_meta(o, t, raw_names) ||
	    !put(o, "timing", timing_json(&ti)) || !put(o, "n_ranks", json_integer(ti.n_ranks)) ||
	    !put(o, "n_streams", json_integer(ti.n_streams)) ||
	    !put(o, "n_phases", json_integer(ti.n_phases)) ||
	    !put(o, "n_kinds", json_integer(ti.n_kinds)) ||
	    !put(o, "n_terminals", json_integer(ti.n_terminals)) ||
	    !put(o, "events", json_integer((json_int_t)ti.n_events)) ||
	    !put(o, "file_bytes", json_integer((json_int_t)ti.file_bytes)) ||
	    !put(o, "text_bytes", json_integer((json_int_t)ti.text_bytes)) ||
	    !put(o, "bytes_per_event", json_real(per_event)) ||
	    !put(o, "compression_ratio", json_real(ratio)) || !put_processes(o, p, raw_names) ||
	    !put_ranks(o, t, &ti, p) || !put_stream_list(o, t, &ti) ||
	    !put_phases(o, t, &ti, raw_names) || !put_sections(o, t, &ti)) {
		json_decref(o);
		o = NULL;
	}
	fs_procs_free(p);
	return o;
}

/* README.txt after its layout (fs_layout_readme()): the formats, then the names. */
static const char readme_formats[] =
    "\n"
    "Formats (FORMAT.md section 9 in the tracefs sources is the exact specification)\n"
    "  trace.txt     <s>.<ns> <dur_ns> T<thread> <name>(<arg>=<value>, ...) = <result>\n"
    "                Times are absent when the trace has no timing. Strings are quoted with\n"
    "                C escapes, symbolic ids print as class#id, ranks as absolute numbers.\n"
    "                A descriptor is followed by its file's name in <>: fd=3</etc/passwd>,\n"
    "                = 4<pipe:[77]> (C escapes without quotes, '>' as \\x3e; <file#N> when\n"
    "                the trace has no name for it); events.jsonl has it as \"path\":\"...\".\n"
    "                Lines are padded with spaces so that every line of one call signature\n"
    "                has the same length.\n"
    "  events.jsonl  {\"ts\":<ns>,\"dur\":<ns>,\"rank\":<r>,\"thread\":<t>,\"name\":\"<name>\",\n"
    "                \"args\":{...}} (no ts, dur when the trace has no timing)\n"
    "                One JSON object per line, padded with spaces like trace.txt; the result\n"
    "                is an ordinary member of args; strings keep valid UTF-8, escape\n"
    "                controls (\\n, \\u00XX) and have U+FFFD (\\ufffd) for each byte that\n"
    "                is no UTF-8, as info.json and trace.json have names and paths.\n"
    "                A thread's files list its events in the order the trace stores them:\n"
    "                as they end for a recorded trace (metadata event_order=end: an event\n"
    "                follows the events nested in it), else usually as they start.\n"
    "                A rank's (or phase's) trace.txt and events.jsonl interleave the lines of\n"
    "                its threads by key, non-decreasing (ties: lower thread first, then\n"
    "                stream order). An event's key is the largest end time (ts + dur) when\n"
    "                event_order is \"end\", else the largest start time, of the events of\n"
    "                its thread (in this file) up to and including it: exactly its own end\n"
    "                (start) time when its thread's events are in that order.\n"
    "%s"
    "  trace.json    [ then one \"X\" event per line, {\"name\":...,\"cat\":...,\"ph\":\"X\",\n"
    "                \"ts\":<us>,\"dur\":<us>,\"pid\":<rank>,\"tid\":<thread>,\"args\":{...}}\n"
    "                (microseconds with three decimals; without timing ts is the event's\n"
    "                index), then \"M\" events naming each process \"rank <r>\" and thread\n"
    "                \"thread <t>\", then the phases as \"X\" events of category \"phase\"\n"
    "                on a track of their own per rank, named \"phases\" (tid %" PRIu64 "),\n"
    "                from the start of a phase's first event to the end of its last; ].\n"
    "                Zones are named by their name argument. Marks are \"i\" events named\n"
    "                by their message; where the recorder dropped events (its spool was\n"
    "                full) a mark \"dropped <n> events\" (category \"capture\") says so, and\n"
    "                one for the whole process at the end counts those no thread could place.\n"
    "  summary.txt   one line per event kind (\"kind\") and per zone name (\"zone\"):\n"
    "                count, total and mean duration in ns (- when no event of the line has\n"
    "                a duration: instants, calls the capture does not time such as the\n"
    "                malloc family, any trace without timing), bytes moved (the sum of the\n"
    "                arguments that count bytes; negative results count 0), sorted by total\n"
    "                duration, largest first. Lines starting with # are comments.\n"
    "  signatures.txt  <id> <occurrences> <signature>: every distinct call (kind and the\n"
    "                arguments stored once), \"*\" for values that vary per call, ranks\n"
    "                relative to the caller (r+1). Ids are the t<id> of grammar.txt.\n"
    "  grammar.txt   per distinct stream a line \"== stream ... ==\", then its rules, block by\n"
    "                block: R<i> -> <symbols>, S the start rule, x^n x repeated n times.\n"
    "  stacks.folded <frame>;<frame>;... <n>, sorted, for flamegraph.pl, speedscope or\n"
    "                inferno. For a rank with backtraces, n counts events: every event of\n"
    "                the rank once, at \"rank <r>;thread <t>\", then the frames of its\n"
    "                backtrace as allocs.folded prints them (none for an event without a\n"
    "                stack argument), then the zones it lies in. For a rank without, n is\n"
    "                bytes allocated (allocation calls: category \"alloc\", with a\n"
    "                byte-count argument) at \"rank <r>;thread <t>\" and the zones. An\n"
    "                event lies in the zones of its thread (a zone in itself) with zone\n"
    "                start <= ts < zone end and ts + dur <= zone end, wherever the zone is\n"
    "                listed, outermost first (earlier start, then longer, then stream\n"
    "                order). Zone names are written as in trace.txt without quotes, ';' as\n"
    "                \\x3b. In a phase directory, the events of the phase are counted, in\n"
    "                any zone of their thread.\n"
    "  backtraces.txt  every backtrace stack#<n> of the rank, in id order: a line\n"
    "                \"stack#<n>\", then one line per frame, outermost first (the thread's\n"
    "                entry first, the call that allocated last), indented two spaces:\n"
    "                \"<function> (<file>:<line>)\" (\":<line>\" left out when unknown, the\n"
    "                parentheses when both are), and after it one such line per function\n"
    "                inlined at that address, outermost first, ending in \" [inlined]\"; an\n"
    "                address without symbols prints as 0x<hex>. C++ and Rust names are\n"
    "                demangled (they may hold spaces and parentheses: the location is the\n"
    "                last parenthesised group), code that no symbol names prints as\n"
    "                <file name>+0x<return address in that file>. Names are written as\n"
    "                trace.txt writes a string, without the quotes: \\\", \\\\, \\n, \\t, \\r,\n"
    "                and \\xHH for other control bytes, DEL, C1 controls (U+0080..U+009F)\n"
    "                and bytes of no UTF-8. A backtrace as deep as the recording\n"
    "                kept (metadata backtrace_depth) may have lost its outer frames: its\n"
    "                first line is \"  [truncated]\", and in every folded stack and\n"
    "                heap.txt it starts with a [truncated] frame.\n"
    "  files.txt     one line per file id of the rank, by id, after two # comment lines:\n"
    "                <id> <kind> <calls> <read> <written> <first> <last> <flags> <name>.\n"
    "                kind comes from the name: pipe, socket, tcp, udp, unix (pipe:[N],\n"
    "                socket:[N], tcp:..., ...), anon (anon_inode:...), tty (/dev/pts/...,\n"
    "                /dev/tty..., /dev/console), device (other /dev/... but the file\n"
    "                systems /dev/shm/, /dev/mqueue/ and /dev/hugepages/), dir (a name\n"
    "                ending in / or opened O_DIRECTORY), file, ? (no name in the trace).\n"
    "                calls: the calls that name it (events with a result; fd_file is\n"
    "                none); read, written: the byte-count arguments of the calls that read\n"
    "                from it or write to it (as the trace's schema says; negative 0);\n"
    "                first, last: start of its first call and end of its last in ns, or\n"
    "                T<thread>:<event> in (thread, event) order without timing, - when no\n"
    "                call named it; flags: of the first call that opened it (open(2)\n"
    "                flags by name, or fopen's mode; a call that failed opened nothing),\n"
    "                - when none did; name: the path, - when none. Names and flags are\n"
    "                written as in backtraces.txt, a space in flags as \\x20.\n"
    "  allocs.folded <frame>;<frame>;... <bytes>, sorted: for flamegraph.pl, speedscope or\n"
    "                inferno. Counts the rank's events whose kind has a stack argument (a\n"
    "                symbolic id of class \"stack\"): per backtrace, the sum of their\n"
    "                byte-count arguments (whatever their kind: allocations, and 0 for\n"
    "                frees), all threads together. Frames are function names as in\n"
    "                backtraces.txt (inlined functions are frames of their own, ';' also\n"
    "                \\x3b), 0x<hex> without symbols, [no frames] for an empty backtrace,\n"
    "                [not sampled] for the events of stack -1 (metadata backtrace_sampling);\n"
    "                stacks that print the same are summed, stacks of 0 bytes left out.\n"
    "\n"
    "Phase directory names\n"
    "  A phase name is used as is, except that '%%', '/', '~' and every byte the text files\n"
    "  escape (\\n, \\t, \\r, \\xHH: controls, DEL, the C1 controls, bytes of no UTF-8) are\n"
    "  written %%XX (hex), a name made only of dots starts with %%2E, and the empty name is\n"
    "  %%00: so a directory name is UTF-8, as info.json's \"dir\" names it byte for byte.\n"
    "  A name longer than 240 bytes is cut between two characters and gets ~<n> appended,\n"
    "  n being the phase's index in info.json (which also lists each phase's \"dir\"); a\n"
    "  phase that covers the same thread as an earlier phase of the same name gets its own\n"
    "  directory <name>~<n>.\n"
    "\n"
    "Every file has an exact size and can be read at any offset: only the events under the\n"
    "bytes read are decoded. summary.txt, stacks.folded, backtraces.txt, allocs.folded and\n"
    "files.txt are\n"
    "computed (one pass over their events; stacks.folded: two for threads in end order, three\n"
    "in neither order) the first time they are listed or opened; a rank's merged trace.txt\n"
    "and events.jsonl index their threads' times the first time they are read.\n";

static const char readme_untimed[] =
    "                This trace has no timing: those files hold each thread's lines\n"
    "                in turn (thread order), not interleaved.\n";

/*
 * README.txt's list of the processes of a recording: per rank its program (the ones it ran
 * before, when it exec'd), pid, the rank that started it and how it ended; one line each
 * whatever the program is called (names escaped as everywhere, §9.1).
 */
static void put_readme_procs(struct fs_sbuf *b, const struct fs_procs *p)
{
	if (!p || !p->by_pid)
		return;
	fs_sb_printf(b, "Processes (a rank each, along the fork tree)\n");
	for (uint32_t k = 0; k < p->n_shown; k++) {
		const uint32_t r = p->shown[k];
		struct fs_proc proc;
		const struct fs_proc *q = &proc;

		fs_proc_at(p, r, &proc);
		fs_sb_printf(b, "  rank %" PRIu32 "  ", r);
		fs_sb_name(b, q->program ? q->program : "?", NULL);
		if (q->images && strstr(q->images, " -> ")) {
			fs_sb_printf(b, " (ran ");
			fs_sb_name(b, q->images, NULL);
			fs_sb_printf(b, ")");
		}
		if (q->pid >= 0)
			fs_sb_printf(b, ", pid %" PRId64, q->pid);
		if (q->parent_rank >= 0)
			fs_sb_printf(b, ", started by rank %" PRId64, q->parent_rank);
		else if (q->ppid >= 0 && r > 0)
			fs_sb_printf(b, ", started by pid %" PRId64 " (not traced)", q->ppid);
		fs_sb_printf(b, ": ");
		fs_sb_name(b, q->end ? q->end : "end unknown", NULL);
		fs_sb_printf(b, "\n");
	}
	fs_sb_printf(b, "\n");
}

static int readme_new(const struct fs_vtree *vt, const char *trace_name, char **out,
		      size_t *out_len)
{
	const struct tfs_trace *t = vt->trace;
	struct fs_sbuf b = {0};
	struct tfs_trace_info ti;
	const char *program = tfs_trace_meta(t, "program");

	tfs_trace_get_info(t, &ti);
	fs_sb_printf(&b, "tracefs view of ");
	fs_sb_name(&b, trace_name ? trace_name : "a trace", NULL);
	fs_sb_printf(&b, "\n\n");
	fs_sb_printf(&b, "This tree is generated from one compressed trace file; nothing in it is "
		      "stored as text.\n");
	if (program) {
		fs_sb_printf(&b, "  program   ");
		fs_sb_name(&b, program, NULL);
		fs_sb_printf(&b, "\n");
	}
	fs_sb_printf(&b,
		  "  events    %" PRIu64 " in %" PRIu32 " stream%s (one per rank and thread) "
		  "of %" PRIu32 " rank%s\n",
		  ti.n_events, ti.n_streams, ti.n_streams == 1 ? "" : "s", ti.n_ranks,
		  ti.n_ranks == 1 ? "" : "s");
	fs_sb_printf(&b, "  phases    %" PRIu32 " (event ranges of one stream each)\n", ti.n_phases);
	fs_sb_printf(&b, "  timing    %s", timing_name(ti.timing));
	if (ti.timing == TFS_TIMING_LOSSY)
		fs_sb_printf(&b, " (relative error <= %g)", ti.rel_err);
	if (ti.timing != TFS_TIMING_NONE)
		fs_sb_printf(&b, "\n  order     %s",
			     fs_merge_by_end(vt) ? "end (each thread lists an event when it ends): "
						   "merged files by end time"
						 : "start: merged files by start time");
	fs_sb_printf(&b,
		  "\n  size      %" PRIu64 " bytes for %" PRIu64 " bytes of trace.txt "
		  "(ratio %.1f)\n",
		  ti.file_bytes, ti.text_bytes,
		  ti.file_bytes ? (double)ti.text_bytes / (double)ti.file_bytes : 0.0);
	fs_sb_printf(&b, "\n");
	put_readme_procs(&b, vt->procs);
	fs_layout_readme(vt, &b);
	fs_sb_printf(&b, readme_formats, ti.timing == TFS_TIMING_NONE ? readme_untimed : "",
		     (uint64_t)vt->max_thread + 1);
	if (b.failed) {
		free(b.data);
		return -ENOMEM;
	}
	*out = b.data;
	*out_len = b.len;
	return 0;
}

int fs_readme_new(const struct fs_vtree *vt, const char *trace_name, char **out, size_t *len)
{
	return readme_new(vt, trace_name, out, len);
}

int fs_info_text_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, char **out,
		     size_t *len)
{
	json_t *j = fs_info_json_new(vt->trace, false);
	char *text, *grown;

	if (!j)
		return -ENOMEM;
	text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(j);
	if (!text)
		return -ENOMEM;
	*len = strlen(text) + 1;
	grown = realloc(text, *len + 1);
	if (!grown) {
		free(text);
		return -ENOMEM;
	}
	grown[*len - 1] = '\n';
	grown[*len] = '\0';
	*out = grown;
	return 0;
}

/* ---- the end of trace.json: metadata and phases ---- */

/* Nanoseconds as Chrome's microseconds with three decimals (FORMAT.md §9). */
static void put_us(struct fs_sbuf *b, uint64_t ns)
{
	fs_sb_printf(b, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

/* Objects separated by ",\n"; the last one gets no comma. */
static void next_object(struct fs_sbuf *b, bool *first)
{
	if (!*first)
		fs_sb_put(b, ",\n", 2);
	*first = false;
}

/* A phase's extent: from its first event's start to its last event's end. */
static int phase_extent(struct fs_vtree *vt, const struct tfs_phase_info *pi, uint64_t *ts_ns,
			uint64_t *dur_ns)
{
	struct tfs_cursor *c;
	struct tfs_event ev;
	uint64_t end;
	int rc;

	if (vt->ti.timing == TFS_TIMING_NONE) {
		/* as the events: one microsecond per event index */
		*ts_ns = pi->first_event * 1000;
		*dur_ns = pi->n_events * 1000;
		return 0;
	}
	rc = tfs_cursor_new(vt->trace, pi->stream, TFS_VIEW_TEXT, pi->first_event, pi->n_events,
			    &c);
	if (rc < 0)
		return rc;
	rc = tfs_cursor_event(c, pi->first_event, &ev, NULL);
	*ts_ns = ev.ts_ns;
	if (rc == 0)
		rc = tfs_cursor_event(c, pi->first_event + pi->n_events - 1, &ev, NULL);
	end = ev.ts_ns + ev.dur_ns;
	*dur_ns = end > *ts_ns ? end - *ts_ns : 0;
	tfs_cursor_free(c);
	return rc;
}

/* A phase as trace.json draws it: on a track of its thread where phases nest. */
struct tphase {
	uint32_t idx, thread;
	uint64_t ts_ns, dur_ns, first, n;
	const char *name;
	uint32_t level; /* its thread's phase track */
};

static int put_phase(struct fs_vtree *vt, struct fs_sbuf *b, uint32_t rank,
		     const struct tphase *p, bool *first)
{
	uint64_t tid = (uint64_t)vt->max_thread + 1 + (uint64_t)p->level * (vt->max_thread + 1) +
		       p->thread;
	json_t *name;
	char *text;

	name = fs_json_bytes_new(p->name ? p->name : "");
	text = name ? json_dumps(name, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;
	json_decref(name);
	if (!text)
		return -ENOMEM;
	next_object(b, first);
	fs_sb_printf(b, "{\"name\":%s,\"cat\":\"phase\",\"ph\":\"X\",\"ts\":", text);
	put_us(b, p->ts_ns);
	fs_sb_printf(b, ",\"dur\":");
	put_us(b, p->dur_ns);
	fs_sb_printf(b, ",\"pid\":%" PRIu32 ",\"tid\":%" PRIu64 ",\"args\":{\"phase\":%" PRIu32
		     ",\"thread\":%" PRIu32 ",\"first_event\":%" PRIu64 ",\"events\":%" PRIu64 "}}",
		     rank, tid, p->idx, p->thread, p->first, p->n);
	free(text);
	return 0;
}

/* @s as a JSON string (fs_json_bytes_new(), ASCII escapes). @return 0 or -ENOMEM */
static int put_json_str(struct fs_sbuf *b, const char *s)
{
	json_t *j = fs_json_bytes_new(s);
	char *text = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_ENSURE_ASCII) : NULL;

	json_decref(j);
	if (!text)
		return -ENOMEM;
	fs_sb_put(b, text, strlen(text));
	free(text);
	return 0;
}

static int put_name_meta(struct fs_sbuf *b, const char *what, uint32_t pid, uint64_t tid,
			 const char *name, bool *first)
{
	next_object(b, first);
	fs_sb_printf(b, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRIu32 ",\"tid\":%" PRIu64
		     ",\"args\":{\"name\":", what, pid, tid);
	if (put_json_str(b, name) < 0)
		return -ENOMEM;
	fs_sb_printf(b, "}}");
	return 0;
}

/* A thread's name in trace.json: "worker (thread 3)" when the program named it. */
static void thread_label(const struct fs_vtree *vt, uint32_t rank, uint32_t thread, char *buf,
			 size_t cap)
{
	char name[256];
	struct fs_proc q;
	const char *given = NULL;

	if (vt->procs && rank < vt->procs->n) {
		fs_proc_at(vt->procs, rank, &q);
		given = fs_proc_thread_name(&q, thread, name, sizeof(name));
	}

	if (given)
		snprintf(buf, cap, "%s (thread %" PRIu32 ")", given, thread);
	else
		snprintf(buf, cap, "thread %" PRIu32, thread);
}

static int cmp_tphase(const void *a, const void *b)
{
	const struct tphase *x = a, *y = b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

#define MAX_PHASE_TRACKS 64 /* phase tracks per thread; the last takes what is left */
#define MAX_PHASE_DEPTH 16  /* phases nested on one track */

/*
 * Each phase on the first track of its thread where it nests: phases of one thread that
 * overlap without one holding the other go on tracks of their own. Sorts @v by (thread,
 * start, longest first).
 */
static void phase_tracks(struct tphase *v, size_t n)
{
	static_assert(MAX_PHASE_TRACKS * MAX_PHASE_DEPTH <= 1024, "stack use");
	uint64_t end[MAX_PHASE_TRACKS][MAX_PHASE_DEPTH];
	uint32_t depth[MAX_PHASE_TRACKS];

	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_tphase);
	for (size_t i = 0; i < n; i++) {
		uint64_t e = v[i].ts_ns + v[i].dur_ns;
		uint32_t k;

		if (i == 0 || v[i].thread != v[i - 1].thread)
			memset(depth, 0, sizeof(depth));
		for (k = 0; k < MAX_PHASE_TRACKS - 1; k++) {
			while (depth[k] && end[k][depth[k] - 1] <= v[i].ts_ns)
				depth[k]--;
			if ((!depth[k] || end[k][depth[k] - 1] >= e) && depth[k] < MAX_PHASE_DEPTH)
				break;
		}
		if (depth[k] < MAX_PHASE_DEPTH)
			end[k][depth[k]++] = e;
		v[i].level = k;
	}
}

/* The phases of @rank in @sc (from *@p on, which advances past them), placed on tracks. */
static int rank_phases(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank, uint32_t *p,
		       struct tphase **out, size_t *n_out)
{
	struct tphase *v = NULL;
	size_t n = 0;
	int rc = 0;

	for (; *p < sc->n_phases && rc == 0; (*p)++) {
		struct tfs_phase_info pi;
		struct tfs_stream_info si;
		struct tphase *t;

		rc = tfs_trace_phase(vt->trace, sc->phases[*p], &pi);
		if (rc == 0)
			rc = tfs_trace_stream(vt->trace, pi.stream, &si);
		if (rc < 0 || si.rank != rank)
			break;
		if (pi.n_events == 0)
			continue;
		t = realloc(v, (n + 1) * sizeof(*v));
		if (!t) {
			rc = -ENOMEM;
			break;
		}
		v = t;
		v[n] = (struct tphase){sc->phases[*p], si.thread, 0, 0, pi.first_event, pi.n_events,
				       pi.name, 0};
		rc = phase_extent(vt, &pi, &v[n].ts_ns, &v[n].dur_ns);
		n++;
	}
	if (rc < 0) {
		free(v);
		return rc;
	}
	phase_tracks(v, n);
	*out = v;
	*n_out = n;
	return 0;
}

static void put_sort_index(struct fs_sbuf *b, uint32_t pid, uint64_t tid, uint64_t idx,
			   bool *first)
{
	next_object(b, first);
	fs_sb_printf(b, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%" PRIu32
		     ",\"tid\":%" PRIu64 ",\"args\":{\"sort_index\":%" PRIu64 "}}", pid, tid, idx);
}

/* The names of @rank's phase tracks, each listed right after its thread. */
static int name_phase_tracks(struct fs_vtree *vt, struct fs_sbuf *b, uint32_t rank,
			     const struct tphase *v, size_t n, bool *first)
{
	uint64_t stride = (uint64_t)vt->max_thread + 1;
	char label[600], name[640];
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		uint64_t tid = stride + v[i].level * stride + v[i].thread;
		bool seen = false;

		for (size_t j = i; j-- > 0 && v[j].thread == v[i].thread && !seen;)
			seen = v[j].level == v[i].level;
		if (seen)
			continue;
		thread_label(vt, rank, v[i].thread, label, sizeof(label));
		if (v[i].level)
			snprintf(name, sizeof(name), "%s: phases %" PRIu32, label, v[i].level + 1);
		else
			snprintf(name, sizeof(name), "%s: phases", label);
		rc = put_name_meta(b, "thread_name", rank, tid, name, first);
		if (rc == 0)
			put_sort_index(b, rank, tid,
				       (uint64_t)v[i].thread * (MAX_PHASE_TRACKS + 1) + 1 + v[i].level,
				       first);
	}
	return rc;
}

/*
 * Per rank of the scope: its name, its threads' names and order, then its phases, each
 * thread's on tracks of their own listed right after it; then the flows and counters
 * (vflows.c). The later parts of a split trace.json (@whole false) have names only.
 */
static int chrome_tail(struct fs_vtree *vt, const struct fs_scope *sc, bool whole, char **out,
		       size_t *len)
{
	struct fs_sbuf b = {0};
	bool first = true;
	uint32_t p = 0;
	int rc = 0;

	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++) {
		const struct fs_seg *s = &sc->segs[i];
		struct tphase *v = NULL;
		size_t n = 0;
		char label[600];

		if (i == 0 || s->rank != s[-1].rank) {
			fs_proc_name(vt->procs, s->rank, label, sizeof(label));
			rc = put_name_meta(&b, "process_name", s->rank, 0, label, &first);
			if (rc == 0 && vt->ti.timing == TFS_TIMING_NONE)
				rc = put_name_meta(&b, "process_labels", s->rank, 0,
						   "untimed: synthetic clock, 1 us per event in "
						   "recorded order", &first);
		}
		thread_label(vt, s->rank, s->thread, label, sizeof(label));
		if (rc == 0)
			rc = put_name_meta(&b, "thread_name", s->rank, s->thread, label, &first);
		if (rc == 0)
			put_sort_index(&b, s->rank, s->thread,
				       (uint64_t)s->thread * (MAX_PHASE_TRACKS + 1), &first);
		if (rc < 0 || !whole || (i + 1 < sc->n_segs && s[1].rank == s->rank))
			continue;
		/* the last thread of the rank: its phases (sc->phases follow the rank order) */
		rc = rank_phases(vt, sc, s->rank, &p, &v, &n);
		if (rc == 0)
			rc = name_phase_tracks(vt, &b, s->rank, v, n, &first);
		for (size_t k = 0; k < n && rc == 0; k++)
			rc = put_phase(vt, &b, s->rank, &v[k], &first);
		free(v);
	}
	if (rc == 0 && whole)
		rc = fs_chrome_extras(vt, sc, &b, &first);
	fs_sb_put(&b, first ? "]\n" : "\n]\n", first ? 2 : 3);
	if (rc < 0) {
		free(b.data);
		return rc;
	}
	return fs_sb_detach(&b, out, len);
}

int fs_chrome_tail_new(struct fs_vtree *vt, const struct fs_scope *sc, char **out, size_t *len)
{
	return chrome_tail(vt, sc, true, out, len);
}

int fs_chrome_tail_nophase_new(struct fs_vtree *vt, const struct fs_scope *sc, char **out,
			       size_t *len)
{
	return chrome_tail(vt, sc, false, out, len);
}
