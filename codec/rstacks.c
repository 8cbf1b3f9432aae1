/*
 * Reader side of backtraces and symbols (FORMAT.md §8 rank table, §10, §11). At open only
 * the rank table is read and checked; a rank's backtraces and its symbols are each decoded
 * in full on first use, under one lock, and kept until the trace is closed, so lookups
 * afterwards are lock-free in all but the check of the state. Corruption found while
 * decoding sticks: every later call reports the same diagnostic. It does not render:
 * fs/ turns backtraces and symbols into text.
 */
#include <stdlib.h>
#include <string.h>

#include "btrace_i.h"
#include "trace_i.h"

/*
 * Decoded frames over all backtraces of one rank: beyond this a section is refused with
 * -ENOMEM, since one byte of §10 can repeat a 1024-frame backtrace.
 */
#define MAX_DECODED_FRAMES (UINT64_C(1) << 25)

static int parse_entry(struct tfs_trace *t, struct tfs_rd *r, struct trank *e,
		       const struct trank *prev)
{
	uint64_t f[4];
	const struct sec_entry *bt, *sym;
	int rc = 0;

	for (int i = 0; i < 4 && rc == 0; i++)
		rc = rd_varint(r, &f[i]);
	if (rc < 0)
		return rc;
	if (f[0] >= t->n_ranks || (prev && f[0] <= prev->rank))
		return rd_fail(r, "rank table entry for rank %llu out of order or past %u ranks",
			       (unsigned long long)f[0], t->n_ranks);
	if (f[1] > t->cf.n || f[3] > t->cf.n || (f[1] == t->cf.n && f[3] == t->cf.n))
		return rd_fail(r, "rank %llu refers to sections %llu/%llu of %u",
			       (unsigned long long)f[0], (unsigned long long)f[1],
			       (unsigned long long)f[3], t->cf.n);
	bt = f[1] < t->cf.n ? &t->cf.ents[f[1]] : NULL;
	sym = f[3] < t->cf.n ? &t->cf.ents[f[3]] : NULL;
	if ((bt && (bt->type != SEC_BACKTRACES || bt->codec != 0)) ||
	    (sym && (sym->type != SEC_SYMBOLS || sym->codec == CTR_CODEC_RAW)))
		return rd_fail(r, "rank %llu refers to sections of the wrong type or codec",
			       (unsigned long long)f[0]);
	if (bt ? f[2] == 0 || f[2] > bt->stored : f[2] != 0)
		return rd_fail(r, "rank %llu claims %llu backtraces", (unsigned long long)f[0],
			       (unsigned long long)f[2]);
	e->rank = (uint32_t)f[0];
	e->bt_sec = (uint32_t)f[1];
	e->n_bt = f[2];
	e->sym_sec = (uint32_t)f[3];
	return 0;
}

int stacks_parse_table(struct tfs_trace *t, struct tfs_rd *r)
{
	uint64_t n = 0;
	int rc;

	if (pthread_mutex_init(&t->lazy_lock, NULL) != 0)
		return -ENOMEM;
	t->lazy_lock_ready = true;
	if (!ctr_at_least(&t->cf, 1, 1))
		return 0; /* FORMAT.md §8: 1.0 has no rank table */
	/* an entry takes at least 4 bytes */
	rc = rd_varint_max(r, rd_left(r) / 4, &n, "rank table size");
	if (rc < 0)
		return rc;
	t->ranks = calloc(n + 1, sizeof(*t->ranks));
	if (!t->ranks)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		rc = parse_entry(t, r, &t->ranks[i], i ? &t->ranks[i - 1] : NULL);
		if (rc < 0)
			return rc;
		t->n_rank_ents = i + 1;
	}
	if (ctr_newer_minor(&t->cf))
		r->off = r->len; /* FORMAT.md §1: fields of a newer minor */
	return 0;
}

static void rank_fini(struct trank *e)
{
	free(e->bt_first);
	free(e->bt_frames);
	symtab_fini(&e->sym);
}

void stacks_free(struct tfs_trace *t)
{
	for (uint32_t i = 0; i < t->n_rank_ents; i++)
		rank_fini(&t->ranks[i]);
	free(t->ranks);
	if (t->lazy_lock_ready)
		pthread_mutex_destroy(&t->lazy_lock);
}

static struct trank *find_rank(const struct tfs_trace *t, uint32_t rank)
{
	uint32_t lo = 0, hi = t->n_rank_ents;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (t->ranks[mid].rank < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->n_rank_ents && t->ranks[lo].rank == rank ? &t->ranks[lo] : NULL;
}

static int grow_frames(struct trank *e, uint64_t need, uint64_t *cap)
{
	uint64_t n = *cap ? *cap * 2 : 4096;
	uint64_t *p;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	p = realloc(e->bt_frames, (size_t)n * sizeof(*p));
	if (!p)
		return -ENOMEM;
	e->bt_frames = p;
	*cap = n;
	return 0;
}

static int decode_all(struct tfs_btdec *d, struct trank *e)
{
	uint64_t total = 0, cap = 0;
	uint32_t n;
	int rc = 0;

	e->bt_first = malloc((e->n_bt + 1) * sizeof(*e->bt_first));
	if (!e->bt_first)
		return -ENOMEM;
	e->bt_first[0] = 0;
	for (uint64_t i = 0; i <= e->n_bt && rc >= 0; i++) {
		if (total + BT_MAX_FRAMES > MAX_DECODED_FRAMES)
			return -ENOMEM;
		rc = grow_frames(e, total + BT_MAX_FRAMES, &cap);
		if (rc == 0)
			rc = btdec_next(d, e->bt_frames + total, BT_MAX_FRAMES, &n);
		if (rc == 1 && i == e->n_bt)
			rc = -TFS_ECORRUPT; /* cannot happen: the counts were compared */
		if (rc == 1) {
			total += n;
			e->bt_first[i + 1] = total;
		}
	}
	return rc;
}

/* Decode @e's backtraces section whole. On error nothing stays allocated. */
static int decode_backtraces(const struct tfs_trace *t, struct trank *e, struct tfs_diag *diag)
{
	const struct sec_entry *s = &t->cf.ents[e->bt_sec];
	struct tfs_btdec d;
	const uint8_t *data;
	uint8_t *owned;
	size_t len;
	int rc = ctr_load(&t->cf, e->bt_sec, &owned, &data, &len, diag);

	if (rc < 0)
		return rc;
	rc = btdec_init(&d, data, len, s->off, diag);
	if (rc < 0)
		goto out_free;
	if (d.n_backtraces != e->n_bt)
		rc = diag_set(diag, -TFS_ECORRUPT, s->off, "backtraces",
			      "section holds %llu backtraces but the rank table says %llu",
			      (unsigned long long)d.n_backtraces, (unsigned long long)e->n_bt);
	else
		rc = decode_all(&d, e);
	btdec_fini(&d);
	if (rc < 0) {
		free(e->bt_first);
		free(e->bt_frames);
		e->bt_first = NULL;
		e->bt_frames = NULL;
	}
out_free:
	free(owned);
	return rc;
}

static int decode_symbols(const struct tfs_trace *t, struct trank *e, struct tfs_diag *diag)
{
	const struct sec_entry *s = &t->cf.ents[e->sym_sec];
	const uint8_t *data;
	uint8_t *owned;
	size_t len;
	int rc = ctr_load(&t->cf, e->sym_sec, &owned, &data, &len, diag);

	if (rc < 0)
		return rc;
	rc = symtab_decode(&e->sym, data, len, s->off, diag);
	free(owned);
	return rc;
}

/*
 * Make sure part @bt (else the symbols) of @e is decoded. Corruption is remembered with its
 * diagnostic; a failed allocation is not, so a later call tries again.
 */
static int ensure(struct tfs_trace *t, struct trank *e, bool bt, struct tfs_diag *diag)
{
	int *state = bt ? &e->bt_state : &e->sym_state;
	struct tfs_diag *saved = bt ? &e->bt_diag : &e->sym_diag;
	struct tfs_diag d;
	int rc;

	memset(&d, 0, sizeof(d));
	pthread_mutex_lock(&t->lazy_lock);
	if (*state == 0) {
		rc = bt ? decode_backtraces(t, e, &d) : decode_symbols(t, e, &d);
		if (rc == 0)
			*state = 1;
		else if (rc == -TFS_ECORRUPT)
			*state = rc;
		*saved = d;
	}
	rc = *state == 1 ? 0 : *state < 0 ? *state : -ENOMEM;
	d = *saved;
	pthread_mutex_unlock(&t->lazy_lock);
	if (rc == -TFS_ECORRUPT && diag)
		*diag = d;
	return rc;
}

uint64_t tfs_trace_n_backtraces(const struct tfs_trace *t, uint32_t rank)
{
	const struct trank *e = find_rank(t, rank);

	return e ? e->n_bt : 0;
}

int tfs_trace_backtrace(struct tfs_trace *t, uint32_t rank, uint64_t id, const uint64_t **frames,
			uint32_t *n, struct tfs_diag *diag)
{
	struct trank *e = find_rank(t, rank);
	int rc;

	*frames = NULL;
	*n = 0;
	if (!e || id >= e->n_bt)
		return -ENOENT;
	rc = ensure(t, e, true, diag);
	if (rc < 0)
		return rc;
	*frames = e->bt_frames + e->bt_first[id];
	*n = (uint32_t)(e->bt_first[id + 1] - e->bt_first[id]);
	return 0;
}

int tfs_trace_symbol(struct tfs_trace *t, uint32_t rank, uint64_t addr,
		     const struct tfs_src_frame **frames, uint32_t *n, struct tfs_diag *diag)
{
	struct trank *e = find_rank(t, rank);
	int rc;

	*frames = NULL;
	*n = 0;
	if (!e || e->sym_sec == t->cf.n)
		return -ENOENT;
	rc = ensure(t, e, false, diag);
	if (rc < 0)
		return rc;
	*n = symtab_find(&e->sym, addr, frames);
	return *n ? 0 : -ENOENT;
}

int stacks_verify(struct tfs_trace *t, struct tfs_diag *diag)
{
	int rc = 0;

	for (uint32_t i = 0; i < t->n_rank_ents && rc == 0; i++) {
		struct trank *e = &t->ranks[i];

		if (e->bt_sec != t->cf.n)
			rc = ensure(t, e, true, diag);
		if (rc == 0 && e->sym_sec != t->cf.n)
			rc = ensure(t, e, false, diag);
	}
	return rc;
}
