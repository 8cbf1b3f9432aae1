/*
 * A trace for check_names.py, written through the public writer API: names and paths that
 * hold every kind of byte the views must escape (FORMAT.md §9.1): C0 controls with a
 * newline, DEL, the C1 controls as UTF-8 (U+0085) and as raw bytes (0x85, 0x9b), bytes of
 * no UTF-8 between valid UTF-8, '"', '\\', '>', ';'. They are in file names, an fopen mode,
 * the metadata of three processes (program, images, end), phase names and a symbol's
 * function and file; what ends a C comment or string ("*" "/", a trigraph "??" "/" and a
 * newline), what XML refuses (U+FFFE, "]]>"); a program name of 1000 bytes of UTF-8 and a
 * phase name longer than a directory name may be, each cut inside a character were it cut
 * at a fixed byte. check_names.py states what each view must print, byte for byte. It
 * prints nothing.
 *
 *   mknames OUT
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tfs/writer.h"

/* the strings, as check_names.py has them too */
#define FILE_A "/tmp/a\tb\nc\x01\x1b[0m\x7f d\xc2\x85" "e\x85" "f\xc3\xa9g\"h\\i>j;k"
#define FILE_B "\xc3\xa9\xff\xc3\xa9 caf\xc3"
#define OPENTYPE "r e\x01"
#define PROGRAM "prog\nname\xc2\x85\x9b\xc3\xa9\xff */ *?\?/\n/"
#define IMAGES "sh -> " PROGRAM
#define END0 "exited 0\nforged line"
#define CHILD "child\x1b]0;t\x07"
#define PHASE "ph\xc2\x85\x85"
#define PHASE_C "c*/\"q\\?\?/\nz\xef\xbf\xbe&<]]>"
#define E2 "\xc3\xa9"
#define E10 E2 E2 E2 E2 E2 E2 E2 E2 E2 E2
#define E50 E10 E10 E10 E10 E10
#define PHASE_LONG "x" E50 E50 E50 /* 301 bytes, cut at 240 inside an e-acute */
#define LONG_PROGRAM E50 E50 E50 E50 E50 E50 E50 E50 E50 E50 /* 1000 bytes */
#define FUNCTION "fn\n\xc2\x85<x>;y\x9b"
#define SRCFILE "/src/a\tb\xc2\x85.c"

static const struct tfs_arg_desc fopen_args[] = {
    {"path", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"opentype", TFS_TYPE_STR, TFS_ENC_STR, 0, NULL},
    {"file", TFS_TYPE_U64, TFS_ENC_SYM, 0, "file"},
    {"result", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
static const struct tfs_arg_desc read_args[] = {
    {"fd", TFS_TYPE_I64, TFS_ENC_SIG, 0, NULL},
    {"path", TFS_TYPE_U64, TFS_ENC_SYM, TFS_ARG_ATTACH | TFS_ARG_INPUT, "file"},
    {"count", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"result", TFS_TYPE_I64, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};
static const struct tfs_arg_desc malloc_args[] = {
    {"size", TFS_TYPE_U64, TFS_ENC_VAL, TFS_ARG_BYTES, NULL},
    {"stack", TFS_TYPE_U64, TFS_ENC_SYM, 0, "stack"},
    {"ptr", TFS_TYPE_HEX, TFS_ENC_VAL, TFS_ARG_RESULT, NULL},
};

static int write_rank(struct tfs_writer *w, uint32_t rank, const uint32_t *kinds)
{
	union tfs_arg fo[4] = {{.s = FILE_A}, {.s = OPENTYPE}, {.u = 1}, {.i = 3}};
	union tfs_arg rd[4] = {{.i = 3}, {.u = 1}, {.u = 100}, {.i = 100}};
	union tfs_arg rd2[4] = {{.i = 4}, {.u = 2}, {.u = 7}, {.i = 7}};
	union tfs_arg ma[3] = {{.u = 64}, {.u = 0}, {.u = 0x1000}};
	struct tfs_wstream *s;
	int rc;

	rc = tfs_writer_stream_new(w, rank, 0, &s);
	if (rc == 0)
		rc = tfs_wstream_append(s, kinds[0], 0, 0, fo);
	if (rc == 0)
		rc = tfs_wstream_append(s, kinds[1], 0, 0, rd);
	if (rc == 0)
		rc = tfs_wstream_append(s, kinds[1], 0, 0, rd2);
	if (rc == 0)
		rc = tfs_wstream_append(s, kinds[2], 0, 0, ma);
	if (rc == 0)
		rc = tfs_writer_set_name(w, rank, "file", 1, FILE_A);
	if (rc == 0)
		rc = tfs_writer_set_name(w, rank, "file", 2, FILE_B);
	return rc;
}

static int write_trace(struct tfs_writer *w, const char *out)
{
	static const char *const meta[][2] = {
	    {"program", PROGRAM}, {"images", IMAGES},	   {"end", END0},
	    {"pid", "100"},	  {"program.rank1", CHILD}, {"images.rank1", CHILD},
	    {"end.rank1", "killed\r"}, {"pid.rank1", "101"}, {"ppid.rank1", "100"},
	    {"program.rank2", LONG_PROGRAM}, {"images.rank2", LONG_PROGRAM},
	    {"end.rank2", "exited 2"}, {"pid.rank2", "102"}, {"ppid.rank2", "100"},
	};
	struct tfs_kind_desc kd[3] = {{"fopen", "stdio", 4, fopen_args},
				      {"read", "posix", 4, read_args},
				      {"malloc", "alloc", 3, malloc_args}};
	struct tfs_src_frame sym = {FUNCTION, SRCFILE, 7};
	uint64_t frames[2] = {0x400000, 0x400100};
	uint32_t kinds[3];
	int rc = 0;

	for (int i = 0; i < 3 && rc == 0; i++)
		rc = tfs_writer_add_kind(w, &kd[i], &kinds[i]);
	for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]) && rc == 0; i++)
		rc = tfs_writer_set_meta(w, meta[i][0], meta[i][1]);
	for (uint32_t r = 0; r < 3 && rc == 0; r++)
		rc = write_rank(w, r, kinds);
	if (rc == 0)
		rc = tfs_writer_add_phase(w, PHASE, 0, 0, 0, 2);
	if (rc == 0)
		rc = tfs_writer_add_phase(w, PHASE_C, 0, 0, 1, 2);
	if (rc == 0)
		rc = tfs_writer_add_phase(w, PHASE_LONG, 1, 0, 0, 4);
	if (rc == 0)
		rc = tfs_writer_add_backtrace(w, 0, 0, frames, 2);
	if (rc == 0)
		rc = tfs_writer_add_symbol(w, 0, frames[1], &sym, 1);
	if (rc == 0)
		rc = tfs_writer_save(w, out);
	return rc;
}

int main(int argc, char **argv)
{
	struct tfs_writer_opts o = {.timing = TFS_TIMING_NONE};
	struct tfs_writer *w;
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: mknames OUT\n");
		return 2;
	}
	rc = tfs_writer_new(&o, &w);
	if (rc == 0) {
		rc = write_trace(w, argv[1]);
		tfs_writer_free(w);
	}
	if (rc < 0) {
		fprintf(stderr, "mknames: cannot write %s: %s\n", argv[1], strerror(-rc));
		return 1;
	}
	return 0;
}
