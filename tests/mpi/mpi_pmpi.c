/*
 * A program that calls the profiling interface itself: its PMPI_ calls go to the MPI library
 * untraced (libtfsmpi.so defines PMPI_ functions only to catch bindings that bypass MPI_,
 * see capture/mpi/mpi_f08.c), its MPI_ calls are traced. Each rank checks the results.
 */
#include <stdio.h>

#include <mpi.h>

int main(int argc, char **argv)
{
	int rank = -1, size = -1, sum = 0, one = 1;

	MPI_Init(&argc, &argv);
	PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
	PMPI_Comm_size(MPI_COMM_WORLD, &size);
	PMPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("pmpi size=%d sum=%d\n", size, sum);
	MPI_Finalize();
	return sum == size * size ? 0 : 1;
}
