/*
 * One trace for the whole MPI job, made at MPI_Finalize: each rank gets its trace so far
 * (cap_trace_now: from its consumer thread in-process, from its recorder under `tracefs
 * record`), then the ranks merge pairwise
 * in ceil(log2(P)) rounds over a duplicate of MPI_COMM_WORLD (in round k, rank r with bit k
 * set sends its trace to r - 2^k and stops; the receiver merges the two with
 * tfs_merge_traces, its ranks first), and rank 0 writes $TFS_MPI_OUTPUT (set by `tracefs
 * record`), else $TFS_OUTPUT, else <program>.trace. A rank holds at most
 * two traces at once (its own merged part and its partner's), never a per-rank array. On any
 * failure a rank keeps its own trace as <output>.<rank> so nothing recorded is lost; a rank
 * that calls MPI_Abort keeps its own the same way, since the launcher kills every rank and
 * recorder right after. It does not record anything itself.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "tfs/merge.h"
#include "tfs/reader.h"
#include "tfs/writer.h"
#include "capture_i.h"
#include "mpi_rt_i.h"

#define SAVE_TIMEOUT_MS 120000
#define CHUNK_BYTES (1 << 30) /* MPI counts are int: send in pieces */
#define TAG_LEN 7301
#define TAG_DATA 7302

/* Send @len bytes (a length of 0 tells the receiver this rank has no trace). */
static void send_trace(const void *buf, uint64_t len, int to, MPI_Comm comm)
{
	PMPI_Send(&len, 1, MPI_UINT64_T, to, TAG_LEN, comm);
	for (uint64_t off = 0; off < len; off += CHUNK_BYTES) {
		uint64_t n = len - off < CHUNK_BYTES ? len - off : CHUNK_BYTES;

		PMPI_Send((const char *)buf + off, (int)n, MPI_BYTE, to, TAG_DATA, comm);
	}
}

/*
 * Receive a trace. Out of memory, each piece is still received (as a truncated message: the
 * communicator returns errors) so the sender is never left blocked.
 */
static int recv_trace(void **out, size_t *len, int from, MPI_Comm comm)
{
	uint64_t n = 0;
	char *buf, sink[1];

	PMPI_Recv(&n, 1, MPI_UINT64_T, from, TAG_LEN, comm, MPI_STATUS_IGNORE);
	buf = n ? malloc(n) : NULL;
	for (uint64_t off = 0; off < n; off += CHUNK_BYTES) {
		uint64_t k = n - off < CHUNK_BYTES ? n - off : CHUNK_BYTES;

		if (buf)
			PMPI_Recv(buf + off, (int)k, MPI_BYTE, from, TAG_DATA, comm,
				  MPI_STATUS_IGNORE);
		else
			PMPI_Recv(sink, 0, MPI_BYTE, from, TAG_DATA, comm, MPI_STATUS_IGNORE);
	}
	if (n && !buf)
		return -ENOMEM;
	*out = buf;
	*len = (size_t)n;
	return n ? 0 : -ENODATA;
}

/*
 * Merge @b (the next ranks) after @a; on success *a is replaced. Every rank's pid, start
 * time and TSC rate (each rank measures its own) would make the trace grow with the number
 * of ranks: rank 0's are kept, unless TFS_MPI_PIDS=1 asks for all of them.
 */
static int merge2(void **a, size_t *a_len, const void *b, size_t b_len)
{
	static const char *const rank0_only[] = {"pid", "start_time", "tsc_hz", NULL};
	const char *all = getenv("TFS_MPI_PIDS");
	struct tfs_merge_opts opts = {
	    .first_only_keys = all && strcmp(all, "1") == 0 ? NULL : rank0_only};
	struct tfs_trace *in[2] = {NULL, NULL};
	struct tfs_diag diag = {0};
	void *out;
	size_t len;
	int rc;

	rc = tfs_trace_open_mem(*a, *a_len, &in[0], &diag);
	if (rc == 0)
		rc = tfs_trace_open_mem(b, b_len, &in[1], &diag);
	if (rc == 0)
		rc = tfs_merge_traces_opts(in, 2, &opts, &out, &len, &diag);
	if (in[1])
		tfs_trace_close(in[1]);
	if (in[0])
		tfs_trace_close(in[0]);
	if (rc < 0)
		return rc;
	free(*a);
	*a = out;
	*a_len = len;
	return 0;
}

static void keep_own(const char *out, int rank, const void *buf, size_t len, int why)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s.%d", out, rank);
	fprintf(stderr, "tracefs: rank %d: cannot merge the ranks' traces: %s: kept %s\n", rank,
		strerror(-why), path);
	if (buf)
		tfs_file_write(path, buf, len);
}

/* The merged trace's path: $TFS_MPI_OUTPUT, else $TFS_OUTPUT, else <program>.trace. */
static const char *output_path(char *dflt, size_t cap)
{
	const char *out = getenv("TFS_MPI_OUTPUT");

	if (!out || !*out)
		out = getenv("TFS_OUTPUT");
	if (!out || !*out) {
		snprintf(dflt, cap, "%s.trace", program_invocation_short_name);
		out = dflt;
	}
	return out;
}

void mpirt_save_at_abort(void)
{
	char dflt[300], path[4200];
	const char *out = output_path(dflt, sizeof(dflt));
	void *mine = NULL;
	size_t len = 0;
	int rank = (int)mpirt_world_rank(), rc;

	rc = cap_trace_now(&mine, &len, SAVE_TIMEOUT_MS);
	if (rc == -ENOTSUP)
		return;
	snprintf(path, sizeof(path), "%s.%d", out, rank);
	if (rc == 0)
		rc = tfs_file_write(path, mine, len);
	if (rc < 0)
		fprintf(stderr, "tracefs: rank %d called MPI_Abort: cannot save its trace as %s: "
			"%s\n", rank, path, strerror(-rc));
	else
		fprintf(stderr, "tracefs: rank %d called MPI_Abort: kept its trace as %s\n", rank,
			path);
	free(mine);
}

void mpirt_merge_at_finalize(void)
{
	void *mine = NULL, *theirs = NULL;
	size_t mine_len = 0, theirs_len = 0;
	int rank = 0, size = 1, rc, failed = 0;
	MPI_Comm comm;

	struct timespec t0, t1;
	char dflt[300];
	const char *out = output_path(dflt, sizeof(dflt));

	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = cap_trace_now(&mine, &mine_len, SAVE_TIMEOUT_MS);
	if (rc == -ENOTSUP)
		return; /* capture off: nothing to merge, nothing to wait for */
	PMPI_Comm_dup(MPI_COMM_WORLD, &comm);
	PMPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
	PMPI_Comm_rank(comm, &rank);
	PMPI_Comm_size(comm, &size);
	if (rc < 0)
		failed = 1;
	for (int step = 1; step < size; step *= 2) {
		if (rank & step) {
			/* a rank whose part failed sends nothing: the receiver keeps its own */
			send_trace(mine, failed ? 0 : mine_len, rank - step, comm);
			break;
		}
		if (rank + step >= size)
			continue;
		rc = recv_trace(&theirs, &theirs_len, rank + step, comm);
		if (rc == 0 && !failed)
			rc = merge2(&mine, &mine_len, theirs, theirs_len);
		free(theirs);
		theirs = NULL;
		if (rc < 0 && !failed) {
			keep_own(out, rank, mine, mine_len, rc);
			failed = 1;
		}
	}
	if (rank == 0 && !failed) {
		rc = tfs_file_write(out, mine, mine_len);
		if (rc < 0)
			fprintf(stderr, "tracefs: cannot write %s: %s\n", out, strerror(-rc));
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rc == 0 && getenv("TFS_MPI_VERBOSE"))
			fprintf(stderr, "tracefs: %d ranks merged into %s: %zu bytes in %.3f ms\n",
				size, out, mine_len,
				(double)(t1.tv_sec - t0.tv_sec) * 1e3 +
				    (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	}
	PMPI_Comm_free(&comm);
	free(mine);
}
