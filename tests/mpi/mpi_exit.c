/*
 * Ranks that exit mid-run, without MPI_Finalize. Every rank first makes a barrier, an
 * allreduce and a broadcast of its own (MPI_COMM_SELF). Then:
 * - with no argument, rank 1 prints a line and calls exit(3); the others wait in a receive
 *   from it that never completes, until the launcher kills the job;
 * - with `stagger N`, rank r makes N * (r + 1) more broadcasts of its own, of counts 1 to 64
 *   in turn, waits r * 100 ms, prints "rank r exits after K broadcasts" and calls exit(3):
 *   the ranks end at different times, with traces of different sizes, and the launcher kills
 *   those still running once the first has gone.
 * Every rank's calls up to its end are what a traced run must keep (check_mpi.py check_exit).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void stagger(int rank, long n)
{
	const struct timespec wait = {rank / 10, (rank % 10) * 100000000L};
	long k = n * (rank + 1);
	int buf[64] = {0};

	for (long i = 0; i < k; i++)
		MPI_Bcast(buf, (int)(i % 64) + 1, MPI_INT, 0, MPI_COMM_SELF);
	nanosleep(&wait, NULL);
	printf("rank %d exits after %ld broadcasts\n", rank, k);
	fflush(stdout);
	exit(3);
}

int main(int argc, char **argv)
{
	int rank, size, one = 1, sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Bcast(&sum, 1, MPI_INT, 0, MPI_COMM_SELF);
	if (argc == 3 && !strcmp(argv[1], "stagger"))
		stagger(rank, atol(argv[2]));
	if (rank == 1 % size) {
		printf("rank %d exits\n", rank);
		fflush(stdout);
		exit(3);
	}
	MPI_Recv(&one, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Finalize();
	return 0;
}
