/*
 * Topology arrays: a 2D Cartesian grid (periodic in its first dimension) whose
 * coordinates (MPI_Cart_coords), rank of those coordinates (MPI_Cart_rank), shape
 * (MPI_Cart_get) and row communicator (MPI_Cart_sub) are asked for, then a ring as a graph
 * (MPI_Graph_create with its index array, MPI_Graph_get). Every array argument is the
 * program's data, not an address. Rank 0 prints what it was told.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, dims[2] = {0, 0}, periods[2] = {1, 0}, coords[2], same = -1;
	int gdims[2], gperiods[2], gcoords[2], remain[2] = {0, 1};
	MPI_Comm cart, row, ring;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Dims_create(size, 2, dims);
	MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
	MPI_Cart_coords(cart, rank, 2, coords);
	MPI_Cart_rank(cart, coords, &same);
	MPI_Cart_get(cart, 2, gdims, gperiods, gcoords);
	MPI_Cart_sub(cart, remain, &row);
	if (rank == 0)
		printf("rank %d at %d,%d (rank %d) of %dx%d periods %d,%d\n", rank, coords[0], coords[1],
		       same, gdims[0], gdims[1], gperiods[0], gperiods[1]);

	/* a ring: node i's neighbours are i-1 and i+1 */
	int *indx = malloc((size_t)size * sizeof(int)), *edges = malloc(2 * (size_t)size *
									 sizeof(int));
	int gi[64], ge[128];

	if (!indx || !edges || size > 64)
		MPI_Abort(MPI_COMM_WORLD, 2);
	for (int i = 0; i < size; i++) {
		indx[i] = 2 * (i + 1);
		edges[2 * i] = (i + size - 1) % size;
		edges[2 * i + 1] = (i + 1) % size;
	}
	MPI_Graph_create(MPI_COMM_WORLD, size, indx, edges, 0, &ring);
	MPI_Graph_get(ring, size, 2 * size, gi, ge);
	if (rank == 0)
		printf("rank %d graph index ends at %d\n", rank, gi[size - 1]);
	free(indx);
	free(edges);
	MPI_Comm_free(&ring);
	MPI_Comm_free(&row);
	MPI_Comm_free(&cart);
	MPI_Finalize();
	return 0;
}
