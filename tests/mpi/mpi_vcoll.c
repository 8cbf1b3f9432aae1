/*
 * The count and displacement arrays of MPI_Gatherv and MPI_Scatterv are significant only
 * at the root: rank 0 passes whole arrays (one element from each rank, in reverse order),
 * the others a one-element array (as Fortran programs pass a dummy), then, for
 * MPI_Igatherv, an address no array lives at, which MPI never reads there either. Rank 0
 * prints what it gathered and the value rank 1 got back.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, dummy[1] = {-7}, x = -1;
	int *counts, *displs, *all;
	const int *nowhere = (const int *)(uintptr_t)16;
	MPI_Request rq;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	counts = malloc((size_t)size * sizeof(int));
	displs = malloc((size_t)size * sizeof(int));
	all = malloc((size_t)size * sizeof(int));
	if (!counts || !displs || !all)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int i = 0; i < size; i++) {
		counts[i] = 1;
		displs[i] = size - 1 - i;
	}
	MPI_Gatherv(&rank, 1, MPI_INT, all, rank == 0 ? counts : dummy,
		    rank == 0 ? displs : dummy, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Scatterv(all, rank == 0 ? counts : dummy, rank == 0 ? displs : dummy, MPI_INT, &x, 1,
		     MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Igatherv(&x, 1, MPI_INT, all, rank == 0 ? counts : nowhere,
		     rank == 0 ? displs : nowhere, MPI_INT, 0, MPI_COMM_WORLD, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	if (rank == 0) {
		printf("gathered");
		for (int i = 0; i < size; i++)
			printf(" %d", all[i]);
		printf("\n");
	}
	free(counts);
	free(displs);
	free(all);
	MPI_Finalize();
	return 0;
}
