/*
 * Collectives with roots other than 0 and per-rank count arrays: Bcast, Reduce, Allreduce,
 * Gather, Scatter, Allgather, Alltoall, Alltoallv, Scan, Reduce_scatter_block, Barrier.
 * Rank 0 prints what it received.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, v[4] = {0, 0, 0, 0}, r = 0, s;
	int *all, *all2, *cnt, *dsp;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	all = calloc((size_t)size, sizeof(int));
	all2 = calloc((size_t)size, sizeof(int));
	cnt = calloc((size_t)size, sizeof(int));
	dsp = calloc((size_t)size, sizeof(int));
	for (int i = 0; i < size; i++) {
		all[i] = rank * size + i;
		cnt[i] = 1;
		dsp[i] = i;
	}
	if (rank == 0)
		v[0] = v[1] = v[2] = v[3] = 42;
	MPI_Bcast(v, 4, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Reduce(&rank, &r, 1, MPI_INT, MPI_SUM, size - 1, MPI_COMM_WORLD);
	MPI_Allreduce(&rank, &s, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
	MPI_Gather(&rank, 1, MPI_INT, all2, 1, MPI_INT, 0, MPI_COMM_WORLD);
	MPI_Scatter(all, 1, MPI_INT, &r, 1, MPI_INT, 1 % size, MPI_COMM_WORLD);
	MPI_Allgather(&rank, 1, MPI_INT, all2, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Alltoall(all, 1, MPI_INT, all2, 1, MPI_INT, MPI_COMM_WORLD);
	MPI_Alltoallv(all, cnt, dsp, MPI_INT, all2, cnt, dsp, MPI_INT, MPI_COMM_WORLD);
	MPI_Scan(&rank, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Reduce_scatter_block(all, &r, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	if (rank == 0)
		printf("coll size=%d bcast=%d max=%d alltoallv0=%d rsb=%d\n", size, v[3], s,
		       all2[0], r);
	free(all);
	free(all2);
	free(cnt);
	free(dsp);
	MPI_Finalize();
	return 0;
}
