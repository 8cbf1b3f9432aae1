/*
 * Neighbourhood collectives, whose count and displacement arrays have one element per
 * neighbour, not per rank: a periodic 1D Cartesian ring (2 neighbours) exchanges with
 * MPI_Neighbor_allgatherv, MPI_Neighbor_alltoallv and MPI_Ineighbor_alltoallv, then a
 * distributed graph where each rank receives from the previous one and sends to the next
 * (1 neighbour each way, weight 1) with MPI_Neighbor_alltoallv, made again with
 * MPI_Dist_graph_create. Arrays are allocated to their exact lengths. Rank 0 prints what it
 * received.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, dims[1], periods[1] = {1}, mine, two[2] = {-1, -1}, back[2], one = -1;
	int weight = 1;
	MPI_Comm ring, graph;
	MPI_Request rq;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	dims[0] = size;
	mine = rank;
	MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &ring);

	int *counts = malloc(2 * sizeof(int)), *displs = malloc(2 * sizeof(int));

	if (!counts || !displs)
		MPI_Abort(MPI_COMM_WORLD, 2);
	counts[0] = counts[1] = 1;
	displs[0] = 0;
	displs[1] = 1;
	MPI_Neighbor_allgatherv(&mine, 1, MPI_INT, two, counts, displs, MPI_INT, ring);
	MPI_Neighbor_alltoallv(two, counts, displs, MPI_INT, back, counts, displs, MPI_INT, ring);
	MPI_Ineighbor_alltoallv(back, counts, displs, MPI_INT, two, counts, displs, MPI_INT, ring,
				&rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	free(counts);
	free(displs);

	int src = (rank + size - 1) % size, dst = (rank + 1) % size;
	int *c1 = malloc(sizeof(int)), *d1 = malloc(sizeof(int));

	if (!c1 || !d1)
		MPI_Abort(MPI_COMM_WORLD, 2);
	*c1 = 1;
	*d1 = 0;
	MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 1, &src, &weight, 1, &dst, &weight,
				       MPI_INFO_NULL, 0, &graph);
	MPI_Neighbor_alltoallv(&mine, c1, d1, MPI_INT, &one, c1, d1, MPI_INT, graph);
	/* the same graph, each rank giving its own outgoing edge */
	MPI_Comm_free(&graph);
	MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &rank, c1, &dst, &weight, MPI_INFO_NULL, 0,
			      &graph);
	free(c1);
	free(d1);
	if (rank == 0)
		printf("rank 0 got %d %d from its ring neighbours, %d from the graph\n", two[0],
		       two[1], one);
	MPI_Comm_free(&graph);
	MPI_Comm_free(&ring);
	MPI_Finalize();
	return 0;
}
