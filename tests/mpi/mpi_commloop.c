/*
 * Communicators made and freed in a loop: each of argv[1] iterations duplicates
 * MPI_COMM_WORLD, synchronises on the copy, splits it into even and odd ranks, and frees
 * both. A trace of this loop should not grow with the iterations. Rank 0 prints the count.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, iters = argc > 1 ? atoi(argv[1]) : 10;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 0; i < iters; i++) {
		MPI_Comm dup, half;

		MPI_Comm_dup(MPI_COMM_WORLD, &dup);
		MPI_Barrier(dup);
		MPI_Comm_split(dup, rank % 2, 0, &half);
		MPI_Comm_free(&half);
		MPI_Comm_free(&dup);
	}
	if (rank == 0)
		printf("%d iterations\n", iters);
	MPI_Finalize();
	return 0;
}
