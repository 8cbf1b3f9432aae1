/*
 * Encoder of the `streams` section (FORMAT.md §8), format 2: the stream table by columns,
 * ranks as differences, so that the streams of many ranks doing the same thing make
 * repeating bytes that the section's compression takes almost for free.
 */
#include <string.h>

#include "streams_i.h"
#include "tfs/tfs.h"

static uint64_t sec_or_none(const struct sx_table *t, uint32_t sec)
{
	return sec == UINT32_MAX ? t->n_sect : sec;
}

static int put_streams(const struct sx_table *t, struct tfs_buf *out)
{
	int rc = buf_put_varint(out, t->n_streams);
	uint32_t prev = 0;

	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++) {
		rc = buf_put_varint(out, zigzag_enc((int64_t)t->streams[i].rank - (int64_t)prev));
		prev = t->streams[i].rank;
	}
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++)
		rc = buf_put_varint(out, t->streams[i].thread);
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++)
		rc = buf_put_varint(out, t->streams[i].n_events);
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++)
		rc = buf_put_varint(out, t->streams[i].gsec);
	for (uint32_t i = 0; i < t->n_streams && rc == 0; i++)
		rc = buf_put_varint(out, sec_or_none(t, t->streams[i].vsec));
	return rc;
}

int sx_encode(const struct sx_table *t, struct tfs_buf *out)
{
	uint64_t bits = 0;
	int rc;

	if (t->timing == TFS_TIMING_LOSSY)
		memcpy(&bits, &t->rel_err, sizeof(bits));
	rc = buf_put_varint(out, t->n_ranks);
	if (rc == 0)
		rc = buf_put_varint(out, t->max_thread);
	if (rc == 0)
		rc = buf_put_u8(out, (uint8_t)t->timing);
	if (rc == 0)
		rc = buf_put_u64(out, bits);
	if (rc == 0)
		rc = buf_put_varint(out, t->timing == TFS_TIMING_NONE ? 0 : t->max_ts);
	if (rc == 0)
		rc = buf_put_varint(out, t->timing == TFS_TIMING_NONE ? 0 : t->max_dur);
	if (rc == 0)
		rc = put_streams(t, out);
	if (rc == 0)
		rc = buf_put_varint(out, t->n_phases);
	for (uint32_t i = 0; i < t->n_phases && rc == 0; i++) {
		const struct sx_phase *p = &t->phases[i];

		rc = buf_put_str(out, p->name, strlen(p->name));
		if (rc == 0)
			rc = buf_put_varint(out, p->stream);
		if (rc == 0)
			rc = buf_put_varint(out, p->first);
		if (rc == 0)
			rc = buf_put_varint(out, p->n);
	}
	if (rc == 0)
		rc = buf_put_varint(out, t->n_ranks_bt);
	for (uint32_t i = 0; i < t->n_ranks_bt && rc == 0; i++) {
		const struct sx_rank *r = &t->ranks[i];
		uint64_t f[4] = {r->rank, sec_or_none(t, r->bt_sec), r->n_bt,
				 sec_or_none(t, r->sym_sec)};

		for (int j = 0; j < 4 && rc == 0; j++)
			rc = buf_put_varint(out, f[j]);
	}
	return rc;
}
