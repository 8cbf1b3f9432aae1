/*
 * profile.speedscope.json of a rank: speedscope's own file format, which it imports in
 * linear time (its trace-event importer shifts arrays and takes seconds per 10^5 events of a
 * thread). One evented profile per thread, in nanoseconds (untimed: one unit per event),
 * whose open and close events nest because they come from the nesting walk (vwalk.c: spans
 * clamped into their parents), and whose frames are shared: a zone's name or a call's kind,
 * so every occurrence of a call is one frame and the Sandwich and Left Heavy views merge
 * them. When the rank has backtraces, a sampled profile in bytes follows: one sample per
 * call stack of allocs.folded, weighted by the bytes allocated there. The file is made
 * once and kept; it holds about 80 bytes per event.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "tfs/writer.h"
#include "vpict_i.h"

/* One open or close event of a thread, in the walk's order. */
struct rec {
	uint64_t at;
	uint32_t frame;
	bool open;
};

/* Frames by name: an open-addressing table over the frame list. */
struct frames {
	char **name; /* owned copies, escaped for JSON when written */
	uint32_t n, cap;
	uint32_t *slot; /* [slot_cap]: frame + 1, 0 empty */
	uint32_t slot_cap;
};

struct ss {
	struct fs_vtree *vt;
	struct frames fr;
	uint32_t *term_frame; /* [n_terminals]: frame + 1, 0 not yet */
	struct rec *recs;
	size_t n_recs, recs_cap;
	struct fs_sbuf b;
	bool back; /* the walk goes backward (end order) */
};

static uint32_t hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static int frames_grow(struct frames *f)
{
	uint32_t cap = f->slot_cap ? 2 * f->slot_cap : 256;
	uint32_t *slot = calloc(cap, sizeof(*slot));

	if (!slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < f->n; i++) {
		uint32_t j = hash(f->name[i]) & (cap - 1);

		while (slot[j])
			j = (j + 1) & (cap - 1);
		slot[j] = i + 1;
	}
	free(f->slot);
	f->slot = slot;
	f->slot_cap = cap;
	return 0;
}

/* The frame named @name (copied), made on first use. @return its index, or -ENOMEM */
static int64_t frame_of(struct frames *f, const char *name)
{
	uint32_t j;

	if (2 * (f->n + 1) > f->slot_cap && frames_grow(f) < 0)
		return -ENOMEM;
	for (j = hash(name) & (f->slot_cap - 1); f->slot[j]; j = (j + 1) & (f->slot_cap - 1)) {
		if (!strcmp(f->name[f->slot[j] - 1], name))
			return f->slot[j] - 1;
	}
	if (f->n == f->cap) {
		uint32_t cap = f->cap ? 2 * f->cap : 64;
		char **v = realloc(f->name, (size_t)cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		f->name = v;
		f->cap = cap;
	}
	f->name[f->n] = strdup(name);
	if (!f->name[f->n])
		return -ENOMEM;
	f->slot[j] = ++f->n;
	return f->n - 1;
}

static int span_cb(void *arg, const struct fs_span *sp, bool open)
{
	struct ss *s = arg;
	uint32_t *tf = &s->term_frame[sp->term];

	if (s->vt->pict->terms[sp->term].instant)
		return 0; /* a mark is a moment, not a frame */

	if (!*tf) {
		int64_t fi = frame_of(&s->fr, s->vt->pict->terms[sp->term].name);

		if (fi < 0)
			return (int)fi;
		*tf = (uint32_t)fi + 1;
	}
	if (s->n_recs == s->recs_cap) {
		size_t cap = s->recs_cap ? 2 * s->recs_cap : 4096;
		struct rec *r = realloc(s->recs, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		s->recs = r;
		s->recs_cap = cap;
	}
	/*
	 * Going forward the walk opens a span at its start; going backward (end order) it
	 * opens it at its end, which in time is where the frame closes.
	 */
	bool real_open = s->back ? !open : open;

	s->recs[s->n_recs++] = (struct rec){real_open ? sp->start : sp->end, *tf - 1, real_open};
	return 0;
}

/* The characters of @p as JSON string content: '"', '\\' and control bytes escaped. */
static void put_json_chars(struct fs_sbuf *b, const unsigned char *p)
{
	for (; *p; p++) {
		if (*p == '"' || *p == '\\')
			fs_sb_printf(b, "\\%c", *p);
		else if (*p < 0x20 || *p == 0x7f)
			fs_sb_printf(b, "\\u%04x", *p);
		else
			fs_sb_put(b, p, 1);
	}
}

/* @str as a JSON string: UTF-8 as is, other bytes U+FFFD (fs_json_bytes_new(), §9.1). */
static void put_json_str(struct fs_sbuf *b, const char *str)
{
	const unsigned char *p = (const unsigned char *)str;
	json_t *j = NULL;

	while (*p && *p < 0x80)
		p++;
	if (*p) {
		j = fs_json_bytes_new(str);
		if (!j) {
			b->failed = true;
			return;
		}
		str = json_string_value(j);
	}
	fs_sb_put(b, "\"", 1);
	put_json_chars(b, (const unsigned char *)str);
	fs_sb_put(b, "\"", 1);
	json_decref(j);
}

static void put_profile_name(struct ss *s, const struct fs_seg *seg)
{
	char name[600];

	fs_thread_label(s->vt->procs, seg->rank, seg->thread, name, sizeof(name));
	put_json_str(&s->b, name);
}

/* One thread's evented profile. */
static int put_thread(struct ss *s, const struct fs_seg *seg, bool *first)
{
	uint64_t lo, hi;
	int rc;

	s->n_recs = 0;
	rc = fs_walk_seg(s->vt, seg, span_cb, s, &s->back);
	if (rc < 0 || s->n_recs == 0)
		return rc;
	lo = s->back ? s->recs[s->n_recs - 1].at : s->recs[0].at;
	hi = s->back ? s->recs[0].at : s->recs[s->n_recs - 1].at;
	fs_sb_printf(&s->b, "%s\n{\"type\":\"evented\",\"name\":", *first ? "" : ",");
	*first = false;
	put_profile_name(s, seg);
	fs_sb_printf(&s->b, ",\"unit\":\"%s\",\"startValue\":%" PRIu64 ",\"endValue\":%" PRIu64
		     ",\"events\":[", fs_untimed(s->vt) ? "none" : "nanoseconds", lo, hi);
	for (size_t k = 0; k < s->n_recs; k++) {
		const struct rec *r = &s->recs[s->back ? s->n_recs - 1 - k : k];

		fs_sb_printf(&s->b, "%s\n{\"type\":\"%c\",\"frame\":%" PRIu32 ",\"at\":%" PRIu64 "}",
			     k ? "," : "", r->open ? 'O' : 'C', r->frame, r->at);
	}
	fs_sb_put(&s->b, "]}", 2);
	return 0;
}

/*
 * The rank's allocations as a sampled profile in bytes: each line of allocs.folded
 * ("f1;f2;f3 <bytes>") a sample of its frames, weighted by its bytes.
 */
static int put_allocs(struct ss *s, const struct fs_scope *sc, uint32_t rank, bool *first)
{
	struct fs_sbuf samples = {0}, weights = {0};
	uint64_t total = 0;
	char *folded, *line, *next;
	size_t len;
	int rc;

	if (tfs_trace_n_backtraces(s->vt->trace, rank) == 0)
		return 0;
	rc = fs_allocs_new(s->vt, sc, rank, &folded, &len);
	if (rc < 0)
		return rc;
	for (line = folded; rc == 0 && line < folded + len && *line; line = next) {
		char *end = strchr(line, '\n'), *sp, *f, *semi;
		uint64_t bytes;

		next = end ? end + 1 : folded + len;
		if (end)
			*end = '\0';
		sp = strrchr(line, ' ');
		if (!sp)
			continue;
		*sp = '\0';
		bytes = strtoull(sp + 1, NULL, 10);
		fs_sb_printf(&samples, "%s[", total || samples.len ? "," : "");
		for (f = line; rc == 0 && f; f = semi ? semi + 1 : NULL) {
			int64_t fi;

			semi = strchr(f, ';');
			if (semi)
				*semi = '\0';
			fi = frame_of(&s->fr, f);
			if (fi < 0)
				rc = (int)fi;
			else
				fs_sb_printf(&samples, "%s%" PRId64, f == line ? "" : ",", fi);
		}
		fs_sb_put(&samples, "]", 1);
		fs_sb_printf(&weights, "%s%" PRIu64, weights.len ? "," : "", bytes);
		total = fs_sat_add(total, bytes);
	}
	if (rc == 0 && samples.len) {
		fs_sb_printf(&s->b, "%s\n{\"type\":\"sampled\",\"name\":\"allocated bytes by call "
			     "stack (allocs.folded)\",\"unit\":\"bytes\",\"startValue\":0,"
			     "\"endValue\":%" PRIu64 ",\"samples\":[", *first ? "" : ",", total);
		fs_sb_put(&s->b, samples.data, samples.len);
		fs_sb_put(&s->b, "],\"weights\":[", 13);
		fs_sb_put(&s->b, weights.data, weights.len);
		fs_sb_put(&s->b, "]}", 2);
		*first = false;
	}
	if (samples.failed || weights.failed)
		rc = -ENOMEM;
	free(samples.data);
	free(weights.data);
	free(folded);
	return rc;
}

int fs_speedscope_new(struct fs_vtree *vt, const struct fs_scope *sc, uint32_t rank,
		      char **out, size_t *len)
{
	struct ss s = {.vt = vt};
	struct fs_sbuf head = {0};
	char proc[300];
	bool first = true;
	int rc = fs_pict_ready(vt);

	if (rc < 0)
		return rc;
	s.term_frame = calloc((size_t)vt->ti.n_terminals + 1, sizeof(*s.term_frame));
	if (!s.term_frame)
		return -ENOMEM;
	for (uint32_t i = 0; i < sc->n_segs && rc == 0; i++)
		rc = put_thread(&s, &sc->segs[i], &first);
	if (rc == 0)
		rc = put_allocs(&s, sc, rank, &first);
	fs_proc_name(vt->procs, rank, proc, sizeof(proc));
	fs_sb_printf(&head, "{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
		     "\"exporter\":\"tracefs@%s\",\"name\":", tfs_version());
	put_json_str(&head, proc);
	fs_sb_printf(&head, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
	for (uint32_t f = 0; f < s.fr.n; f++) {
		fs_sb_printf(&head, "%s\n{\"name\":", f ? "," : "");
		put_json_str(&head, s.fr.name[f]);
		fs_sb_put(&head, "}", 1);
	}
	fs_sb_printf(&head, "]},\n\"profiles\":[");
	fs_sb_put(&head, s.b.data ? s.b.data : "", s.b.len);
	fs_sb_put(&head, "]}\n", 3);
	if (s.b.failed)
		head.failed = true;
	for (uint32_t f = 0; f < s.fr.n; f++)
		free(s.fr.name[f]);
	free(s.fr.name);
	free(s.fr.slot);
	free(s.term_frame);
	free(s.recs);
	free(s.b.data);
	if (rc < 0) {
		free(head.data);
		return rc;
	}
	return fs_sb_detach(&head, out, len);
}
