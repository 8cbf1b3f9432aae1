/*
 * A rank that exits mid-run, without MPI_Finalize: after a barrier, an allreduce and a
 * broadcast of its own (MPI_COMM_SELF), rank 1 prints a line and calls exit(3); the others
 * wait in a receive from it that never completes, until the launcher kills the job. Every
 * rank's calls up to then are what a traced run must keep (check_mpi.py check_exit).
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, one = 1, sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Bcast(&sum, 1, MPI_INT, 0, MPI_COMM_SELF);
	if (rank == 1 % size) {
		printf("rank %d exits\n", rank);
		fflush(stdout);
		exit(3);
	}
	MPI_Recv(&one, 1, MPI_INT, 1 % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	MPI_Finalize();
	return 0;
}
