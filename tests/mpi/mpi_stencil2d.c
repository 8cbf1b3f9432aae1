/*
 * 2D 5-point stencil on a non-periodic sqrt(P) x sqrt(P) grid of ranks: each iteration posts
 * an Irecv from every neighbour (left, right, down, up, those that exist), then an Isend to
 * each, then one Waitall, then WORK sweeps of a local relaxation (the computation between
 * communications a replay stands in for; 0 by default). Usage: mpi_stencil2d ITERS [WORK].
 * Rank 0 prints a checksum.
 */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#define N 64

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
	int rank, size, side, x, y, nb[4], n_nb = 0, iters = argc > 1 ? atoi(argv[1]) : 10;
	int work = argc > 2 ? atoi(argv[2]) : 0;
	static double in[4][N], out[4][N];
	double local = 0, global = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	side = (int)lround(sqrt(size));
	if (side * side != size) {
		/* every rank ends cleanly with status 2: under MPI_Abort, mpiexec may kill the job
		 * before it has forwarded rank 0's message */
		if (rank == 0)
			fprintf(stderr, "mpi_stencil2d: %d ranks is not a square number\n", size);
		MPI_Finalize();
		return 2;
	}
	x = rank % side;
	y = rank / side;
	if (x > 0)
		nb[n_nb++] = rank - 1;
	if (x < side - 1)
		nb[n_nb++] = rank + 1;
	if (y > 0)
		nb[n_nb++] = rank - side;
	if (y < side - 1)
		nb[n_nb++] = rank + side;
	for (int it = 0; it < iters; it++) {
		MPI_Request rq[8];
		int n = 0;

		for (int k = 0; k < n_nb; k++)
			MPI_Irecv(in[k], N, MPI_DOUBLE, nb[k], 0, MPI_COMM_WORLD, &rq[n++]);
		for (int k = 0; k < n_nb; k++) {
			for (int i = 0; i < N; i++)
				out[k][i] = rank + it + i;
			MPI_Isend(out[k], N, MPI_DOUBLE, nb[k], 0, MPI_COMM_WORLD, &rq[n++]);
		}
		MPI_Waitall(n, rq, MPI_STATUSES_IGNORE);
		for (int k = 0; k < n_nb; k++)
			local += in[k][N - 1];
		local += sweeps(work);
	}
	MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("stencil2d size=%d iters=%d sum=%.1f\n", size, iters, global);
	MPI_Finalize();
	return 0;
}
