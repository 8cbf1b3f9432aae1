/*
 * Symbolised addresses kept on disk (capture/symdisk.c): a cache of random entries (NULL
 * functions, empty files, no frames, 64 frames) written and read back equal; the bytes of a
 * small cache against a layout assembled here by hand from the file's description; every
 * truncation, every bit flip, another identity and damaged structure under a good checksum
 * refused whole (nothing reaches the cache); entries already held kept as they were; files
 * saved and loaded (modes 0600 and 0700), a file of another identity refused, and a full
 * directory trimmed to its least recently used files; every allocation of a read failing
 * in turn leaves only whole, right entries in the cache.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "symbols_i.h"
#include "testutil.h"

#define ID "rules 1\n/usr/lib/x.so\n1 2 3 4.000000005\ndebug -\n"

static uint64_t g_rng; /* tu_rand()'s state */

static uint64_t rnd(void)
{
	return tu_rand(&g_rng);
}

/* A cache of @n entries: random frame counts (0 to 64), names, files and lines. */
static struct cap_symcache *random_cache(size_t n, uint64_t seed)
{
	struct cap_symcache *c;
	static char buf[64][2][80];
	struct tfs_src_frame f[64];

	g_rng = seed;
	printf("# random cache of %zu entries, seed %" PRIu64 "\n", n, seed);
	assert_int_equal(cap_symcache_new(&c), 0);
	for (size_t i = 0; i < n; i++) {
		const struct tfs_src_frame *stored;
		uint32_t nf = i == 1 ? 64 : (uint32_t)(rnd() % 5);

		for (uint32_t k = 0; k < nf; k++) {
			snprintf(buf[k][0], 80, "fn_%" PRIu64 "<int>::x", rnd() % 1000);
			snprintf(buf[k][1], 80, "/src/file%" PRIu64 ".c", rnd() % 50);
			if (rnd() % 4 == 0)
				buf[k][1][0] = 0; /* no file */
			f[k] = (struct tfs_src_frame){rnd() % 7 ? buf[k][0] : NULL, buf[k][1],
						      (uint32_t)rnd()};
		}
		assert_int_equal(cap_symcache_put(c, 0x400000 + i * 0x40 + rnd() % 16, f, nf,
						  &stored),
				 0);
	}
	return c;
}

/* Entries 0 .. @n - 1 of @a and @b are equal, in order. */
static void assert_first_same(const struct cap_symcache *a, const struct cap_symcache *b,
			      size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct tfs_src_frame *fa, *fb;
		uint64_t pa, pb;
		uint32_t na, nb;

		cap_symcache_entry(a, i, &pa, &fa, &na);
		cap_symcache_entry(b, i, &pb, &fb, &nb);
		assert_int_equal(pa, pb);
		assert_int_equal(na, nb);
		for (uint32_t k = 0; k < na; k++) {
			if (fa[k].function)
				assert_string_equal(fa[k].function, fb[k].function);
			else
				assert_null(fb[k].function);
			assert_string_equal(fa[k].file, fb[k].file);
			assert_int_equal(fa[k].line, fb[k].line);
		}
	}
}

static void assert_same(const struct cap_symcache *a, const struct cap_symcache *b)
{
	assert_int_equal(cap_symcache_n(a), cap_symcache_n(b));
	assert_first_same(a, b, cap_symcache_n(a));
}

static void test_symdisk_round_trip(void **state)
{
	struct cap_symcache *a = random_cache(3000, 0x5eed), *b;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(cap_symdisk_build(a, ID, &buf, &len), 0);
	assert_int_equal(cap_symcache_new(&b), 0);
	assert_int_equal(cap_symdisk_parse(buf, len, ID, NULL), 3000);
	assert_int_equal(cap_symcache_n(b), 0);
	assert_int_equal(cap_symdisk_parse(buf, len, ID, b), 3000);
	assert_same(a, b);
	free(buf);
	cap_symcache_free(a);
	cap_symcache_free(b);
}

/* FNV-1a 64 as its authors publish it: offset basis 14695981039346656037, prime 2^40 + 435. */
static uint64_t fnv1a(const uint8_t *p, size_t n)
{
	uint64_t h = UINT64_C(14695981039346656037);

	while (n--)
		h = (h ^ *p++) * (UINT64_C(1) << 40 | 435);
	return h;
}

static void seal(uint8_t *b, size_t len)
{
	const uint64_t h = fnv1a(b, len - 8);

	for (int i = 0; i < 8; i++)
		b[len - 8 + i] = (uint8_t)(h >> (8 * i));
}

/* Two entries: 0x1234 with (main, a.c, 7) and (no function, "", 0), then 0x10 with none. */
static const uint8_t small_file[] = {
    'T', 'F', 'S', 'Y', 'M', 'C', '0', '1', 3, 0, 0, 0, 'i', 'd', '\n', 2, 0, 0, 0,
    0x34, 0x12, 0, 0, 0, 0, 0, 0, 2,
    7, 0, 0, 0, 4, 0, 'm', 'a', 'i', 'n', 3, 0, 'a', '.', 'c',
    0, 0, 0, 0, 0xff, 0xff, 0, 0,
    0x10, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0 /* the checksum, sealed below */
};

static void test_symdisk_layout(void **state)
{
	const struct tfs_src_frame f[2] = {{"main", "a.c", 7}, {NULL, "", 0}}, *got, *stored;
	uint8_t want[sizeof(small_file)], *buf;
	struct cap_symcache *c, *d;
	uint32_t n;
	size_t len;

	(void)state;
	memcpy(want, small_file, sizeof(want));
	seal(want, sizeof(want));
	assert_int_equal(cap_symcache_new(&c), 0);
	assert_int_equal(cap_symcache_put(c, 0x1234, f, 2, &stored), 0);
	assert_int_equal(cap_symcache_put(c, 0x10, f, 0, &stored), 0);
	assert_int_equal(cap_symdisk_build(c, "id\n", &buf, &len), 0);
	assert_int_equal(len, sizeof(want));
	assert_memory_equal(buf, want, len);
	assert_int_equal(cap_symcache_new(&d), 0);
	assert_int_equal(cap_symdisk_parse(want, sizeof(want), "id\n", d), 2);
	assert_true(cap_symcache_get(d, 0x1234, &got, &n));
	assert_int_equal(n, 2);
	assert_string_equal(got[0].function, "main");
	assert_string_equal(got[0].file, "a.c");
	assert_int_equal(got[0].line, 7);
	assert_null(got[1].function);
	assert_string_equal(got[1].file, "");
	assert_true(cap_symcache_get(d, 0x10, &got, &n));
	assert_int_equal(n, 0);
	free(buf);
	cap_symcache_free(c);
	cap_symcache_free(d);
}

/* @b refused whole under identity @id with @err, the cache left empty. */
static void assert_refused_as(const uint8_t *b, size_t len, const char *id, int err)
{
	struct cap_symcache *c;

	assert_int_equal(cap_symcache_new(&c), 0);
	assert_int_equal(cap_symdisk_parse(b, len, id, c), err);
	assert_int_equal(cap_symdisk_parse(b, len, id, NULL), err);
	assert_int_equal(cap_symcache_n(c), 0);
	cap_symcache_free(c);
}

/* @b refused whole as damaged. */
static void assert_refused(const uint8_t *b, size_t len, const char *id)
{
	assert_refused_as(b, len, id, -TFS_ECORRUPT);
}

static void test_symdisk_refusals(void **state)
{
	struct cap_symcache *a = random_cache(40, 77);
	uint8_t *buf, *m;
	size_t len;

	(void)state;
	assert_int_equal(cap_symdisk_build(a, ID, &buf, &len), 0);
	m = malloc(len + 16);
	assert_non_null(m);
	/* whole, but of another identity */
	assert_refused_as(buf, len, "rules 1\n/usr/lib/x.so\n1 2 3 4.000000006\ndebug -\n",
			  -ESTALE);
	assert_refused_as(buf, len, "", -ESTALE);
	for (size_t n = 0; n < len; n++)
		assert_refused(buf, n, ID);
	for (size_t bit = 0; bit < 8 * len; bit++) {
		memcpy(m, buf, len);
		m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		assert_refused(m, len, ID);
	}
	/* damaged structure under a good checksum (the small file: offsets known) */
	{
		const size_t s = sizeof(small_file);
		struct {
			size_t at;
			uint8_t v;
		} edits[] = {
		    {15, 3},	/* three entries announced, two held */
		    {15, 1},	/* one announced: bytes left over */
		    {27, 65},	/* 65 frames */
		    {32, 5},	/* a name running into the next field */
		    {35, 0},	/* a NUL inside a name */
		    {38, 0xff}, /* a file name of 0xff.. bytes, past the end */
		    {0, 'X'},	/* the magic */
		};

		for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
			memcpy(m, small_file, s);
			m[edits[i].at] = edits[i].v;
			seal(m, s);
			assert_refused(m, s, "id\n");
		}
		memcpy(m, small_file, s - 8);
		m[s - 8] = 0; /* a byte after the last entry */
		seal(m, s + 1);
		assert_refused(m, s + 1, "id\n");
	}
	free(m);
	free(buf);
	cap_symcache_free(a);
}

static void test_symdisk_known_kept(void **state)
{
	const struct tfs_src_frame mine = {"mine", "m.c", 1}, *got, *stored;
	uint8_t want[sizeof(small_file)];
	struct cap_symcache *c;
	uint32_t n;

	(void)state;
	memcpy(want, small_file, sizeof(want));
	seal(want, sizeof(want));
	assert_int_equal(cap_symcache_new(&c), 0);
	assert_int_equal(cap_symcache_put(c, 0x1234, &mine, 1, &stored), 0);
	assert_int_equal(cap_symdisk_parse(want, sizeof(want), "id\n", c), 1);
	assert_true(cap_symcache_get(c, 0x1234, &got, &n));
	assert_int_equal(n, 1);
	assert_string_equal(got[0].function, "mine");
	assert_int_equal(cap_symcache_n(c), 2);
	cap_symcache_free(c);
}

/* Each allocation of a read failing in turn: -ENOMEM, and every entry kept is whole. */
static void test_symdisk_out_of_memory(void **state)
{
	struct cap_symcache *a = random_cache(200, 4242), *b;
	uint8_t *buf;
	size_t len;
	long rc = -ENOMEM, k;

	(void)state;
	assert_int_equal(cap_symdisk_build(a, ID, &buf, &len), 0);
	for (k = 0; rc == -ENOMEM; k++) {
		size_t kept;

		if (cap_symcache_new(&b) < 0)
			fail();
		fa_arm(k);
		rc = cap_symdisk_parse(buf, len, ID, b);
		fa_disarm();
		assert_true(rc == -ENOMEM || rc == 200);
		kept = cap_symcache_n(b);
		assert_first_same(a, b, kept); /* in order: the first @kept of @a's */
		if (rc == 200)
			assert_int_equal(kept, 200);
		cap_symcache_free(b);
	}
	printf("# a read of 200 entries survived %ld failed allocations\n", k - 1);
	assert_true(k > 10);
	free(buf);
	cap_symcache_free(a);
}

static size_t count_sym(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = 0;

	assert_non_null(d);
	while ((e = readdir(d)))
		n += strlen(e->d_name) > 4 && !strcmp(e->d_name + strlen(e->d_name) - 4, ".sym");
	closedir(d);
	return n;
}

/* Whether every entry of @a whose address @skip (unless NULL) lacks is in @b, the same. */
static bool holds(const struct cap_symcache *b, const struct cap_symcache *a,
		  const struct cap_symcache *skip)
{
	for (size_t i = 0; i < cap_symcache_n(a); i++) {
		const struct tfs_src_frame *fa, *fb;
		uint32_t na, nb;
		uint64_t pc;

		cap_symcache_entry(a, i, &pc, &fa, &na);
		if (skip && cap_symcache_get(skip, pc, &fb, &nb))
			continue;
		if (!cap_symcache_get(b, pc, &fb, &nb) || nb != na)
			return false;
		for (uint32_t k = 0; k < na; k++)
			if (fa[k].line != fb[k].line || strcmp(fa[k].file, fb[k].file) ||
			    (fa[k].function ? !fb[k].function || strcmp(fa[k].function, fb[k].function)
					    : fb[k].function != NULL))
				return false;
	}
	return true;
}

/* The entries of @a whose address @b lacks. */
static size_t not_in(const struct cap_symcache *a, const struct cap_symcache *b)
{
	size_t n_not = 0;

	for (size_t i = 0; i < cap_symcache_n(a); i++) {
		const struct tfs_src_frame *f;
		uint64_t pc;
		uint32_t n;

		cap_symcache_entry(a, i, &pc, &f, &n);
		n_not += !cap_symcache_get(b, pc, &f, &n);
	}
	return n_not;
}

/*
 * Two recordings that found the file missing save one after the other: the second keeps
 * the first's entries (it reads the file the first wrote), also when the file was
 * rewritten in place since (the same inode); while another holds the directory's lock, a
 * save gives up (-EBUSY) after a bounded wait, and nothing is written.
 */
static void test_symdisk_concurrent(void **state)
{
	char dir[] = "/tmp/tfs-symdisk.XXXXXX";
	struct cap_symcache *x = random_cache(300, 1), *y = random_cache(300, 2), *z, *all;
	struct cap_symcache *y0 = random_cache(300, 2); /* y as it was found */
	const size_t only_y = not_in(y, x);
	size_t only_z;
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_true(only_y > 200);
	assert_int_equal(cap_symdisk_load(dir, ID, x), -ENOENT);
	assert_int_equal(cap_symdisk_load(dir, ID, y), -ENOENT);
	assert_int_equal(cap_symdisk_save(dir, ID, x, false), 0);
	assert_int_equal(cap_symdisk_save(dir, ID, y, false), 0);
	assert_int_equal(cap_symcache_n(y), 300 + only_y); /* y took x's in */
	assert_int_equal(cap_symcache_new(&all), 0);
	assert_int_equal(cap_symdisk_load(dir, ID, all), (long)(300 + only_y));
	/* an address both found is y's (the same whenever the identities are the same) */
	assert_true(holds(all, y0, NULL) && holds(all, x, y0) && holds(y, all, NULL));
	/* the file rewritten in place with z's entries, the inode kept: y reads them in too */
	z = random_cache(50, 3);
	assert_int_equal(cap_symdisk_build(z, ID, &buf, &len), 0);
	{
		char path[512];
		int fd;

		snprintf(path, sizeof(path), "%s/%016" PRIx64 ".sym", dir,
			 fnv1a((const uint8_t *)ID, strlen(ID)));
		fd = open(path, O_WRONLY | O_TRUNC);
		assert_true(fd >= 0);
		assert_int_equal(write(fd, buf, len), (ssize_t)len);
		close(fd);
		only_z = not_in(z, y);
		assert_true(only_z > 0);
		assert_int_equal(cap_symdisk_save(dir, ID, y, false), 0);
		assert_int_equal(cap_symcache_n(y), 300 + only_y + only_z);
		assert_int_equal(not_in(z, y), 0);
		/* the directory locked by another: no save, the file as it was */
		{
			int held = open(dir, O_RDONLY | O_DIRECTORY);
			struct stat before, after;

			assert_true(held >= 0);
			assert_int_equal(flock(held, LOCK_EX), 0);
			assert_int_equal(stat(path, &before), 0);
			assert_int_equal(cap_symdisk_save(dir, ID, x, false), -EBUSY);
			assert_int_equal(stat(path, &after), 0);
			assert_int_equal(before.st_ino, after.st_ino);
			close(held);
			assert_int_equal(cap_symdisk_save(dir, ID, x, false), 0);
		}
		unlink(path);
	}
	assert_int_equal(rmdir(dir), 0);
	free(buf);
	cap_symcache_free(x);
	cap_symcache_free(y);
	cap_symcache_free(z);
	cap_symcache_free(y0);
	cap_symcache_free(all);
}

static void test_symdisk_files(void **state)
{
	char top[] = "/tmp/tfs-symdisk.XXXXXX", dir[256], path[512], other[512];
	struct cap_symcache *a = random_cache(500, 9), *b;
	struct stat st;

	(void)state;
	assert_non_null(mkdtemp(top));
	snprintf(dir, sizeof(dir), "%s/a/b", top);
	assert_int_equal(cap_symdisk_load(dir, ID, a), -ENOENT);
	assert_int_equal(cap_symdisk_save(dir, ID, a, false), 0);
	assert_int_equal(stat(dir, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0700);
	assert_int_equal(count_sym(dir), 1);
	assert_int_equal(cap_symcache_new(&b), 0);
	assert_int_equal(cap_symdisk_load(dir, ID, b), 500);
	assert_same(a, b);
	cap_symcache_free(b);
	/* the file of ID under the name of another identity: refused */
	{
		DIR *d = opendir(dir);
		struct dirent *e;

		while ((e = readdir(d)))
			if (strstr(e->d_name, ".sym"))
				snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		closedir(d);
		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_mode & 0777, 0600);
		assert_int_equal(cap_symcache_new(&b), 0);
		assert_int_equal(cap_symdisk_save(dir, "other", b, false), 0);
		assert_int_equal(count_sym(dir), 2);
		/* find the other's name, put ID's bytes there */
		d = opendir(dir);
		while ((e = readdir(d)))
			if (strstr(e->d_name, ".sym") && !strstr(path, e->d_name))
				snprintf(other, sizeof(other), "%s/%s", dir, e->d_name);
		closedir(d);
		assert_int_equal(rename(path, other), 0);
		assert_int_equal(cap_symdisk_load(dir, "other", b), -ESTALE);
		assert_int_equal(cap_symcache_n(b), 0);
		cap_symcache_free(b);
	}
	/* a full directory: the least recently used go, other files stay */
	for (int i = 0; i < SYMDISK_MAX_FILES + 10; i++) {
		struct timespec t[2] = {{1000000 + i, 0}, {1000000 + i, 0}};
		int fd;

		snprintf(path, sizeof(path), "%s/%016x.sym", dir, 0xf000 + i);
		fd = open(path, O_WRONLY | O_CREAT, 0600);
		assert_true(fd >= 0);
		assert_int_equal(futimens(fd, t), 0);
		close(fd);
	}
	snprintf(path, sizeof(path), "%s/notes.txt", dir);
	close(open(path, O_WRONLY | O_CREAT, 0600));
	assert_int_equal(cap_symdisk_save(dir, ID, a, false), 0);
	assert_int_equal(count_sym(dir), SYMDISK_MAX_FILES + 12); /* no trimming asked */
	assert_int_equal(cap_symdisk_save(dir, ID, a, true), 0);
	assert_int_equal(count_sym(dir), SYMDISK_MAX_FILES);
	assert_int_equal(access(path, F_OK), 0);
	/* 266 old files, the renamed one and ID's: the 12 oldest went */
	assert_int_equal(access(path, F_OK), 0); /* notes.txt */
	for (int i = 0; i <= 12; i++) {
		snprintf(path, sizeof(path), "%s/%016x.sym", dir, 0xf000 + i);
		assert_int_equal(access(path, F_OK), i < 12 ? -1 : 0);
	}
	assert_int_equal(cap_symcache_new(&b), 0);
	assert_int_equal(cap_symdisk_load(dir, ID, b), 500);
	cap_symcache_free(b);
	/* what may not be read: a FIFO (must not block), a directory, a file others may write */
	{
		char mine[512];

		/* ID's file: named by its identity's FNV-1a (symdisk.c) */
		snprintf(mine, sizeof(mine), "%s/%016" PRIx64 ".sym", dir,
			 fnv1a((const uint8_t *)ID, strlen(ID)));
		assert_int_equal(access(mine, F_OK), 0);
		assert_int_equal(chmod(mine, 0622), 0);
		assert_int_equal(cap_symcache_new(&b), 0);
		assert_int_equal(cap_symdisk_load(dir, ID, b), -EPERM);
		assert_int_equal(chmod(mine, 0600), 0);
		/* larger than any file written: damaged, not read (sparse, nothing allocated) */
		assert_int_equal(truncate(mine, SYMDISK_MAX_BYTES + 1), 0);
		assert_int_equal(cap_symdisk_load(dir, ID, b), -TFS_ECORRUPT);
		assert_int_equal(unlink(mine), 0);
		/* a symbolic link, even to a good file: refused, and replaced by a save */
		assert_int_equal(cap_symdisk_save(dir, "other", a, false), 0);
		assert_int_equal(symlink(other, mine), 0);
		assert_int_equal(cap_symdisk_load(dir, ID, b), -EPERM);
		assert_int_equal(cap_symdisk_save(dir, ID, a, false), 0);
		assert_int_equal(lstat(mine, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		assert_int_equal(cap_symdisk_load(dir, ID, b), 500);
		cap_symcache_free(b);
		assert_int_equal(cap_symcache_new(&b), 0);
		assert_int_equal(unlink(mine), 0);
		assert_int_equal(mkfifo(mine, 0600), 0);
		assert_int_equal(cap_symdisk_load(dir, ID, b), -EPERM);
		assert_int_equal(cap_symdisk_save(dir, ID, a, false), 0); /* replaces it */
		assert_int_equal(cap_symdisk_load(dir, ID, b), 500);
		cap_symcache_free(b);
		assert_int_equal(unlink(mine), 0);
		assert_int_equal(mkdir(mine, 0700), 0);
		assert_int_equal(cap_symcache_new(&b), 0);
		assert_int_equal(cap_symdisk_load(dir, ID, b), -EPERM);
		assert_true(cap_symdisk_save(dir, ID, a, false) < 0);
		assert_int_equal(cap_symcache_n(b), 0);
		cap_symcache_free(b);
	}
	cap_symcache_free(a);
	{
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", top);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_symdisk_round_trip),
	    cmocka_unit_test(test_symdisk_layout),
	    cmocka_unit_test(test_symdisk_refusals),
	    cmocka_unit_test(test_symdisk_known_kept),
	    cmocka_unit_test(test_symdisk_out_of_memory),
	    cmocka_unit_test(test_symdisk_files),
	    cmocka_unit_test(test_symdisk_concurrent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
