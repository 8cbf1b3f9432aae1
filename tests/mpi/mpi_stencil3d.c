/*
 * 3D 7-point stencil on a periodic Cartesian grid (MPI_Dims_create, MPI_Cart_create,
 * MPI_Cart_shift): each iteration an Irecv from both neighbours of each dimension, an Isend
 * to each, one Waitall with statuses, then WORK sweeps of a local relaxation (the
 * computation a replay stands in for; 0 by default). Usage: mpi_stencil3d ITERS [WORK].
 * Rank 0 prints a checksum.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 32

/* @n sweeps of a 1-D relaxation over a local array: computation, no MPI. */
static double sweeps(int n)
{
	static double a[4096];
	double s = 0;

	for (int k = 0; k < n; k++)
		for (int i = 1; i < 4095; i++)
			a[i] = 0.5 * a[i] + 0.25 * (a[i - 1] + a[i + 1]) + 1e-9;
	for (int i = 0; i < 4096; i += 512)
		s += a[i];
	return s;
}

int main(int argc, char **argv)
{
	int rank, size, dims[3] = {0, 0, 0}, periods[3] = {1, 1, 1}, nb[6];
	int iters = argc > 1 ? atoi(argv[1]) : 10, work = argc > 2 ? atoi(argv[2]) : 0;
	static int in[6][N], out[6][N];
	long local = 0, global = 0;
	MPI_Comm cart;

	MPI_Init(&argc, &argv);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Dims_create(size, 3, dims);
	MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
	MPI_Comm_rank(cart, &rank);
	for (int d = 0; d < 3; d++)
		MPI_Cart_shift(cart, d, 1, &nb[2 * d], &nb[2 * d + 1]);
	for (int it = 0; it < iters; it++) {
		MPI_Request rq[12];
		MPI_Status st[12];

		for (int k = 0; k < 6; k++)
			MPI_Irecv(in[k], N, MPI_INT, nb[k], k ^ 1, cart, &rq[k]);
		for (int k = 0; k < 6; k++) {
			for (int i = 0; i < N; i++)
				out[k][i] = rank * 100 + k + it;
			MPI_Isend(out[k], N, MPI_INT, nb[k], k, cart, &rq[6 + k]);
		}
		MPI_Waitall(12, rq, st);
		for (int k = 0; k < 6; k++)
			local += in[k][0] + (st[k].MPI_SOURCE == nb[k]);
		local += (long)sweeps(work);
	}
	MPI_Reduce(&local, &global, 1, MPI_LONG, MPI_SUM, 0, cart);
	if (rank == 0)
		printf("stencil3d size=%d dims=%dx%dx%d iters=%d sum=%ld\n", size, dims[0], dims[1],
		       dims[2], iters, global);
	MPI_Comm_free(&cart);
	MPI_Finalize();
	return 0;
}
