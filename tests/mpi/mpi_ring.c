/*
 * Ring: each rank sends its rank to the next and receives from the previous, ITERS times,
 * blocking Sendrecv then Isend/Irecv/Waitall. Prints one line (rank 0) so the test can check
 * the program's output is unchanged when traced.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, iters = argc > 1 ? atoi(argv[1]) : 4;
	long sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 0; i < iters; i++) {
		int out = rank + i, in = -1;
		MPI_Request rq[2];

		MPI_Sendrecv(&out, 1, MPI_INT, (rank + 1) % size, 7, &in, 1, MPI_INT,
			     (rank + size - 1) % size, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
		sum += in;
		MPI_Irecv(&in, 1, MPI_INT, (rank + size - 1) % size, 8, MPI_COMM_WORLD, &rq[0]);
		MPI_Isend(&out, 1, MPI_INT, (rank + 1) % size, 8, MPI_COMM_WORLD, &rq[1]);
		MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
		sum += in;
	}
	MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("ring size=%d iters=%d sum=%ld\n", size, iters, sum);
	MPI_Finalize();
	return 0;
}
