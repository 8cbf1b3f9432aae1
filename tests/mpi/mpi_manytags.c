/*
 * More requests in flight than one request pool holds, told apart by their tags only:
 * each odd rank posts NT receives (tags 1..NT, count 0, one buffer) from the rank before
 * it, which sends them in reverse tag order, then MPI_Waitall; ITERS times, a barrier
 * between. With a third argument "isend", the sender posts them all with MPI_Isend, then
 * MPI_Waitall (eager sends complete at once, and MPICH may give completed requests one
 * handle value). Usage: mpi_manytags NT ITERS [isend]. Rank 0 prints the sizes.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rank, size, nt = argc > 1 ? atoi(argv[1]) : 100, iters = argc > 2 ? atoi(argv[2]) : 3;
	int b = 0, isend = argc > 3 && strcmp(argv[3], "isend") == 0;
	MPI_Request *rq;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	rq = malloc((size_t)(nt > 0 ? nt : 1) * sizeof(*rq));
	if (!rq || size % 2)
		MPI_Abort(MPI_COMM_WORLD, 1);
	for (int i = 0; i < iters; i++) {
		if (rank % 2 == 0 && isend) {
			for (int t = nt; t >= 1; t--)
				MPI_Isend(&b, 0, MPI_INT, rank + 1, t, MPI_COMM_WORLD, &rq[nt - t]);
			MPI_Waitall(nt, rq, MPI_STATUSES_IGNORE);
		} else if (rank % 2 == 0) {
			for (int t = nt; t >= 1; t--)
				MPI_Send(&b, 0, MPI_INT, rank + 1, t, MPI_COMM_WORLD);
		} else {
			for (int t = 1; t <= nt; t++)
				MPI_Irecv(&b, 0, MPI_INT, rank - 1, t, MPI_COMM_WORLD, &rq[t - 1]);
			MPI_Waitall(nt, rq, MPI_STATUSES_IGNORE);
		}
		MPI_Barrier(MPI_COMM_WORLD);
	}
	if (rank == 0)
		printf("manytags size=%d nt=%d iters=%d\n", size, nt, iters);
	free(rq);
	MPI_Finalize();
	return 0;
}
