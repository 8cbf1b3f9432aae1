/*
 * The spool's own protocol (spool.c): a spool starts with SPOOL_START_CHUNKS ready and grows
 * up to its size; a forked process's spool takes its parent's policy; the wait for a free
 * chunk (SPOOL_WAIT) ends with the chunk the consumer frees, gives up when the consumer
 * frees nothing for the limit, and ends at once when the consumer is done; the words of
 * --when-full and of the sampling counts; /proc/<pid>/stat as a producer's identity. Producers here are threads of this test calling
 * the spool functions directly; the consumer is consumer.c's.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tfs/capture.h"
#include "tfs/writer.h"
#include "consumer_i.h"

#define N_CHUNKS 8u

struct fixture {
	struct spool s;
	struct cap_consumer *c;
	struct spool_chunk *owned[N_CHUNKS];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct cap_timing tm = {TFS_TIMING_LOSSLESS, 0, TFS_CODER_AUTO};

	assert_non_null(f);
	assert_int_equal(cap_spool_create(&f->s, NULL, N_CHUNKS * SPOOL_CHUNK_BYTES,
					  SPOOL_START_CHUNKS, TFS_TIMING_LOSSLESS,
					  TFS_TRACE_ON | TFS_TRACE_ZONES),
			 0);
	f->s.hdr->next_thread = 1;
	assert_int_equal(cap_consumer_new(&f->s, &tm, &f->c), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	cap_consumer_free(f->c);
	cap_spool_unmap(&f->s);
	free(f);
	return 0;
}

/* Own every chunk, as thread 0's chunks 0, 1, 2...: the spool is full. */
static void fill(struct fixture *f)
{
	for (uint32_t i = 0; i < N_CHUNKS; i++)
		assert_non_null(f->owned[i] = cap_spool_claim(&f->s, 0, i));
	assert_int_equal(cap_spool_n_ready(&f->s), N_CHUNKS);
	assert_null(cap_spool_claim(&f->s, 0, N_CHUNKS));
}

static uint64_t allocated(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (uint64_t)st.st_blocks * 512u;
}

static void test_spool_starts_small_and_grows_to_its_size(void **state)
{
	struct fixture *f = *state;
	struct spool file = {0};
	char path[80];

	assert_int_equal(cap_spool_n_ready(&f->s), SPOOL_START_CHUNKS);
	assert_int_equal(f->s.hdr->policy.when_full, SPOOL_WAIT);
	assert_int_equal(f->s.hdr->policy.sample, SPOOL_SAMPLE_ALL);
	fill(f);
	/* a spool file: memory behind the ready chunks only */
	snprintf(path, sizeof(path), "%s/test_capture_spool.%d",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
	unlink(path);
	assert_int_equal(cap_spool_create(&file, path, 64u << 20, SPOOL_START_CHUNKS,
					  TFS_TIMING_NONE, TFS_TRACE_ON),
			 0);
	assert_int_equal(file.hdr->n_chunks, 1024);
	assert_int_equal(cap_spool_n_ready(&file), SPOOL_START_CHUNKS);
	assert_in_range(allocated(path), SPOOL_HDR_BYTES,
			SPOOL_HDR_BYTES + (SPOOL_START_CHUNKS + 1) * SPOOL_CHUNK_BYTES);
	cap_spool_unmap(&file);
	unlink(path);
}

static void test_spool_child_takes_the_policy(void **state)
{
	struct fixture *f = *state;
	const struct spool_policy p = {SPOOL_DROP, SPOOL_SAMPLE_BYTES, 4096};
	struct spool child = {0};
	char path[80];

	f->s.hdr->policy = p;
	snprintf(path, sizeof(path), "%s/test_capture_spool.%d.child",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
	unlink(path);
	assert_int_equal(cap_spool_create_child(&child, path, f->s.hdr, 7, 6, 0, 0), 0);
	assert_memory_equal(&child.hdr->policy, &p, sizeof(p));
	assert_int_equal(atomic_load(&child.hdr->consumer), SPOOL_CONSUMER_NONE);
	cap_spool_unmap(&child);
	unlink(path);
}

struct waiter {
	struct fixture *f;
	uint64_t limit_ns;
	struct spool_chunk *got;
	bool stalled;
};

static void *wait_main(void *arg)
{
	struct waiter *w = arg;

	w->got = cap_spool_claim_wait(&w->f->s, 0, N_CHUNKS, w->limit_ns, &w->stalled);
	return NULL;
}

/* Until a producer waits (how long it takes to get there is no matter). */
static void until_waiting(struct fixture *f)
{
	const struct timespec nap = {0, 1000000};

	while (atomic_load(&f->s.hdr->n_waiting) == 0)
		nanosleep(&nap, NULL);
}

static void test_spool_wait_gets_the_chunk_the_consumer_frees(void **state)
{
	struct fixture *f = *state;
	struct waiter w = {f, 600ull * 1000000000u, NULL, true};
	uint32_t recycled = atomic_load(&f->s.hdr->recycled);
	pthread_t th;

	assert_int_equal(atomic_load(&f->s.hdr->consumer), SPOOL_CONSUMER_ON);
	fill(f);
	assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
	until_waiting(f);
	cap_spool_hand_over(f->owned[0]);
	assert_int_equal(cap_consumer_poll(f->c), 1);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_ptr_equal(w.got, f->owned[0]);
	assert_false(w.stalled);
	assert_int_equal(w.got->seq, N_CHUNKS);
	assert_int_equal(atomic_load(&w.got->state), SPOOL_OWNED);
	assert_int_equal(atomic_load(&f->s.hdr->n_waiting), 0);
	assert_int_equal(atomic_load(&f->s.hdr->recycled), recycled + 1);
	assert_true(atomic_load(&f->s.hdr->wait_ns) > 0);
}

static void test_spool_wait_gives_up_when_nothing_is_freed(void **state)
{
	struct fixture *f = *state;
	struct waiter w = {f, 20000000u, NULL, false};

	fill(f);
	wait_main(&w);
	assert_null(w.got);
	assert_true(w.stalled);
	assert_int_equal(atomic_load(&f->s.hdr->n_waiting), 0);
	assert_true(atomic_load(&f->s.hdr->wait_ns) >= w.limit_ns);
}

static void test_spool_wait_ends_when_the_consumer_is_done(void **state)
{
	struct fixture *f = *state;
	struct waiter w = {f, 600ull * 1000000000u, f->owned[0], true};
	pthread_t th;

	fill(f);
	assert_int_equal(pthread_create(&th, NULL, wait_main, &w), 0);
	until_waiting(f);
	cap_spool_set_consumer(&f->s, SPOOL_CONSUMER_DONE);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_null(w.got);
	assert_false(w.stalled);
	/* done already: no wait at all */
	w.got = f->owned[0];
	w.stalled = true;
	wait_main(&w);
	assert_null(w.got);
	assert_false(w.stalled);
	/* a consumer that finishes is done */
	cap_spool_set_consumer(&f->s, SPOOL_CONSUMER_ON);
	assert_int_equal(cap_consumer_finish(f->c), 0);
	assert_int_equal(atomic_load(&f->s.hdr->consumer), SPOOL_CONSUMER_DONE);
}

static void test_spool_parses_policy_words(void **state)
{
	static const struct {
		const char *s;
		int rc;
		uint64_t v;
	} counts[] = {
	    {"1", 0, 1},
	    {"100", 0, 100},
	    {"4k", 0, 4096},
	    {"2M", 0, 2u << 20},
	    {"1g", 0, 1u << 30},
	    {"18446744073709551615", 0, UINT64_MAX},
	    {"0", -EINVAL, 0},
	    {"", -EINVAL, 0},
	    {"k", -EINVAL, 0},
	    {"12q", -EINVAL, 0},
	    {"-3", -EINVAL, 0},
	    {"4kk", -EINVAL, 0},
	    {"18446744073709551616", -EINVAL, 0}, /* 2^64 */
	    {"17179869184g", -EINVAL, 0},	  /* 2^64 too */
	};
	struct spool_policy p = {SPOOL_WAIT, SPOOL_SAMPLE_CALLS, 100};
	uint32_t wf = 7;
	uint64_t v;
	char buf[80];

	(void)state;
	assert_int_equal(cap_parse_when_full(NULL, &wf), 0);
	assert_int_equal(wf, SPOOL_WAIT);
	assert_int_equal(cap_parse_when_full("drop", &wf), 0);
	assert_int_equal(wf, SPOOL_DROP);
	assert_int_equal(cap_parse_when_full("wait", &wf), 0);
	assert_int_equal(wf, SPOOL_WAIT);
	assert_int_equal(cap_parse_when_full("Drop", &wf), -EINVAL);
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
		v = 0;
		assert_int_equal(cap_parse_count(counts[i].s, &v), counts[i].rc);
		if (counts[i].rc == 0)
			assert_true(v == counts[i].v);
	}
	cap_sample_describe(&p, buf, sizeof(buf));
	assert_string_equal(buf, "1 in 100 allocations (per thread)");
	p.sample = SPOOL_SAMPLE_BYTES;
	cap_sample_describe(&p, buf, sizeof(buf));
	assert_string_equal(buf, "1 per 100 bytes allocated (per thread)");
	p.sample = SPOOL_SAMPLE_ALL;
	cap_sample_describe(&p, buf, sizeof(buf));
	assert_string_equal(buf, "all");
}

/* /proc/<pid>/stat as the spool's producer identity reads it: a command holding ") " and
 * spaces is skipped whole; a pid no process has is -ENOENT. */
static void test_spool_proc_stat_reads_ppid_and_start(void **state)
{
	struct cap_proc_stat self, by_pid, odd;
	char name[16] = "";

	(void)state;
	assert_int_equal(cap_proc_stat(0, &self), 0);
	assert_int_equal(self.state, 'R');
	assert_int_equal(self.ppid, (uint32_t)getppid());
	assert_true(self.start > 0);
	assert_int_equal(cap_proc_stat((uint32_t)getpid(), &by_pid), 0);
	assert_int_equal(by_pid.ppid, self.ppid);
	assert_true(by_pid.start == self.start);
	assert_int_equal(prctl(PR_GET_NAME, name), 0);
	assert_int_equal(prctl(PR_SET_NAME, "a) 1 2 (b) c"), 0);
	assert_int_equal(cap_proc_stat(0, &odd), 0);
	prctl(PR_SET_NAME, name);
	assert_int_equal(odd.ppid, self.ppid);
	assert_true(odd.start == self.start);
	assert_int_equal(cap_proc_stat(0x7fffffffu, &odd), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_spool_starts_small_and_grows_to_its_size, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_spool_child_takes_the_policy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spool_wait_gets_the_chunk_the_consumer_frees,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spool_wait_gives_up_when_nothing_is_freed, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(test_spool_wait_ends_when_the_consumer_is_done, setup,
					    teardown),
	    cmocka_unit_test(test_spool_parses_policy_words),
	    cmocka_unit_test(test_spool_proc_stat_reads_ppid_and_start),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
