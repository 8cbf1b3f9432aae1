/*
 * MPI_Abort: after a barrier, rank 1 aborts the job with error code 3 (the launcher kills
 * every other rank); the others wait in a second barrier, never completed. Rank 1 prints a
 * line first.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 1 % size) {
		printf("rank %d aborts\n", rank);
		fflush(stdout);
		MPI_Abort(MPI_COMM_WORLD, 3);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
