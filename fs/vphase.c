/*
 * Phase directory names: maps any phase name to a file name (fs_phase_dirname) and resolves
 * the names of every phase of a trace so that no two phase directories of a rank collide
 * (fs_phase_dirs_new, or the phases of some ranks: fs_phase_dirs_name). The rules are the
 * ones README.txt states. Nothing here builds nodes.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tfs/reader.h"
#include "vnode_i.h"

static bool needs_escape(unsigned char c)
{
	return c < 0x20 || c == 0x7f || c == '%' || c == '/' || c == '~';
}

static size_t encode_name(const char *name, char *out, size_t out_cap, bool *truncated)
{
	static const char hex[] = "0123456789ABCDEF";
	const unsigned char *s = (const unsigned char *)name;
	size_t len = 0, limit = out_cap - 1 < 240 ? out_cap - 1 : 240;
	bool dots = *s != '\0';

	assert(out_cap >= 256);
	*truncated = false;
	for (const unsigned char *p = s; *p; p++)
		dots = dots && *p == '.';
	if (*s == '\0') {
		memcpy(out, "%00", 4);
		return 3;
	}
	for (; *s; s++) {
		bool esc = needs_escape(*s) || (dots && s == (const unsigned char *)name);

		if (len + (esc ? 3 : 1) > limit) {
			*truncated = true;
			break;
		}
		if (esc) {
			out[len++] = '%';
			out[len++] = hex[*s >> 4];
			out[len++] = hex[*s & 15];
		} else {
			out[len++] = (char)*s;
		}
	}
	out[len] = '\0';
	return len;
}

size_t fs_phase_dirname(const char *name, char *out, size_t out_cap)
{
	bool truncated;

	return encode_name(name, out, out_cap, &truncated);
}

int fs_phase_rec_cmp(const void *a, const void *b)
{
	const struct fs_phase_rec *x = a, *y = b;
	int c;

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	c = strcmp(x->name, y->name);
	if (c)
		return c;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

int fs_phase_rec_of(const struct tfs_trace *t, uint32_t idx, struct fs_phase_rec *rec)
{
	struct tfs_phase_info pi;
	struct tfs_stream_info si;
	int rc = tfs_trace_phase(t, idx, &pi);

	if (rc == 0)
		rc = tfs_trace_stream(t, pi.stream, &si);
	if (rc < 0)
		return rc;
	*rec = (struct fs_phase_rec){.idx = idx,
				     .slot = idx,
				     .rank = si.rank,
				     .thread = si.thread,
				     .stream = pi.stream,
				     .name = pi.name ? pi.name : "",
				     .first = pi.first_event,
				     .n_events = pi.n_events};
	return 0;
}

int fs_phase_recs(const struct tfs_trace *t, uint32_t n_phases, struct fs_phase_rec *recs)
{
	for (uint32_t i = 0; i < n_phases; i++) {
		int rc = fs_phase_rec_of(t, i, &recs[i]);

		if (rc < 0)
			return rc;
	}
	return 0;
}

static int cmp_thread_idx(const void *a, const void *b)
{
	const struct fs_phase_rec *x = *(const struct fs_phase_rec *const *)a;
	const struct fs_phase_rec *y = *(const struct fs_phase_rec *const *)b;

	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/*
 * Directory names of one group of phases (same rank and name, sorted by index): the encoded
 * name, plus "~<first index>" if it was cut; a phase whose thread an earlier phase of the
 * group already has gets the encoded name plus "~<own index>". The earlier phases of a
 * thread are found by sorting the group by thread: a rank may have many phases of a name.
 */
static int name_group(const struct fs_phase_rec *g, uint32_t n, char **dirs)
{
	const struct fs_phase_rec **by_thread = malloc(((size_t)n + 1) * sizeof(*by_thread));
	char enc[256], base[256 + 16], own[256 + 16];
	bool truncated;

	if (!by_thread)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++)
		by_thread[i] = &g[i];
	qsort(by_thread, n, sizeof(*by_thread), cmp_thread_idx);
	encode_name(g[0].name, enc, sizeof(enc), &truncated);
	snprintf(base, sizeof(base), truncated ? "%s~%" PRIu32 : "%s", enc, g[0].idx);
	for (uint32_t i = 0; i < n; i++) {
		const struct fs_phase_rec *p = by_thread[i];
		bool seen = i > 0 && by_thread[i - 1]->thread == p->thread;

		snprintf(own, sizeof(own), "%s~%" PRIu32, enc, p->idx);
		dirs[p->slot] = strdup(seen ? own : base);
		if (!dirs[p->slot]) {
			free(by_thread);
			return -ENOMEM;
		}
	}
	free(by_thread);
	return 0;
}

int fs_phase_dirs_name(struct fs_phase_rec *recs, uint32_t n, char **dirs)
{
	int rc = 0;

	if (n > 1)
		qsort(recs, n, sizeof(*recs), fs_phase_rec_cmp);
	for (uint32_t i = 0, k; i < n && rc == 0; i += k) {
		for (k = 1; i + k < n && recs[i + k].rank == recs[i].rank &&
			    strcmp(recs[i + k].name, recs[i].name) == 0;
		     k++)
			;
		rc = name_group(&recs[i], k, dirs);
	}
	return rc;
}

int fs_phase_dirs_new(const struct tfs_trace *t, char ***out)
{
	struct tfs_trace_info ti;
	struct fs_phase_rec *recs;
	char **dirs;
	int rc;

	*out = NULL;
	tfs_trace_get_info(t, &ti);
	dirs = calloc((size_t)ti.n_phases + 1, sizeof(*dirs));
	recs = calloc((size_t)ti.n_phases + 1, sizeof(*recs));
	if (!dirs || !recs) {
		rc = -ENOMEM;
		goto err_free;
	}
	rc = fs_phase_recs(t, ti.n_phases, recs);
	if (rc == 0)
		rc = fs_phase_dirs_name(recs, ti.n_phases, dirs);
	if (rc < 0)
		goto err_free;
	free(recs);
	*out = dirs;
	return 0;

err_free:
	fs_phase_dirs_free(dirs, ti.n_phases);
	free(recs);
	return rc;
}

void fs_phase_dirs_free(char **dirs, uint32_t n_phases)
{
	if (!dirs)
		return;
	for (uint32_t i = 0; i < n_phases; i++)
		free(dirs[i]);
	free(dirs);
}

