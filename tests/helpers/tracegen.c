/* Test trace generator: see tracegen.h. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "tracegen.h"

static const struct tfs_arg_desc zone_args[] = {
	{.name = "name", .type = TFS_TYPE_STR, .enc = TFS_ENC_STR},
};
static const struct tfs_arg_desc pwrite_args[] = {
	{.name = "fd", .type = TFS_TYPE_U64, .enc = TFS_ENC_SYM, .sym_class = "file"},
	{.name = "count", .type = TFS_TYPE_U64, .enc = TFS_ENC_VAL},
	{.name = "offset", .type = TFS_TYPE_U64, .enc = TFS_ENC_VAL},
	{.name = "ret", .type = TFS_TYPE_I64, .enc = TFS_ENC_VAL, .flags = TFS_ARG_RESULT},
};
static const struct tfs_arg_desc send_args[] = {
	{.name = "dest", .type = TFS_TYPE_I64, .enc = TFS_ENC_RANK},
	{.name = "tag", .type = TFS_TYPE_I64, .enc = TFS_ENC_SIG},
	{.name = "bytes", .type = TFS_TYPE_U64, .enc = TFS_ENC_SIG},
};
static const struct tfs_arg_desc malloc_args[] = {
	{.name = "size", .type = TFS_TYPE_U64, .enc = TFS_ENC_VAL},
	{.name = "ptr", .type = TFS_TYPE_HEX, .enc = TFS_ENC_VAL, .flags = TFS_ARG_RESULT},
};
static const struct tfs_kind_desc kinds[TG_NKINDS] = {
	{"zone", "zone", 1, zone_args},
	{"pwrite", "io", 4, pwrite_args},
	{"send", "mpi", 3, send_args},
	{"malloc", "alloc", 2, malloc_args},
};
static const char *const zone_names[] = {"init", "solve \"inner\"", "out\tput", "\xff\x01 odd"};

int tg_declare(struct tfs_writer *w)
{
	for (uint32_t i = 0; i < TG_NKINDS; i++) {
		uint32_t id;
		int rc = tfs_writer_add_kind(w, &kinds[i], &id);

		if (rc < 0)
			return rc;
		if (id != i)
			return -EINVAL;
	}
	return 0;
}

static void make(struct tg_event *e, uint32_t kind, uint64_t *seed, uint64_t i, uint32_t rank)
{
	memset(e, 0, sizeof(*e));
	e->kind = kind;
	e->n_args = kinds[kind].n_args;
	switch (kind) {
	case TG_ZONE:
		e->args[0].s = zone_names[i % 4];
		break;
	case TG_PWRITE:
		e->args[0].u = 3 + i % 2;
		e->args[1].u = 4096;
		e->args[2].u = 4096 * i;
		e->args[3].i = seed ? (int64_t)tu_below(seed, 5000) - 1 : 4096;
		break;
	case TG_SEND:
		e->args[0].i = (int64_t)rank + 1;
		e->args[1].i = -7;
		e->args[2].u = 1u << (i % 3);
		break;
	default:
		e->args[0].u = seed ? tu_below(seed, 1u << 20) : 64;
		e->args[1].u = 0x7f0000000000u + 16 * i;
		break;
	}
}

int tg_fill(struct tg_stream *s, uint64_t n, int regular, uint64_t seed)
{
	uint64_t ts = 1000;

	s->n = n;
	s->ev = calloc(n ? n : 1, sizeof(*s->ev));
	if (!s->ev)
		return -ENOMEM;
	for (uint64_t i = 0; i < n; i++) {
		struct tg_event *e = &s->ev[i];
		static const uint8_t loop[7] = {TG_PWRITE, TG_PWRITE, TG_PWRITE, TG_ZONE,
						TG_SEND,   TG_MALLOC, TG_MALLOC};
		uint32_t kind = regular ? loop[i % 7] : (uint32_t)tu_below(&seed, TG_NKINDS);

		make(e, kind, regular ? NULL : &seed, regular ? i / 7 : tu_below(&seed, 100),
		     s->rank);
		ts += regular ? 250 + tu_below(&seed, 3) : tu_below(&seed, 1000000);
		e->ts = ts;
		e->dur = regular ? 100 + (i % 7) : tu_below(&seed, 1u << 30);
	}
	return 0;
}

void tg_free(struct tg_stream *s)
{
	free(s->ev);
	s->ev = NULL;
}

int tg_write(struct tfs_writer *w, const struct tg_stream *s)
{
	struct tfs_wstream *ws;
	int rc = tfs_writer_stream_new(w, s->rank, s->thread, &ws);

	for (uint64_t i = 0; i < s->n && rc == 0; i++)
		rc = tfs_wstream_append(ws, s->ev[i].kind, s->ev[i].ts, s->ev[i].dur,
					s->ev[i].args);
	return rc;
}
