/*
 * Failing calls: with MPI_ERRORS_RETURN on MPI_COMM_WORLD, every rank sends to a rank that
 * does not exist and sends a negative count; both calls return error codes, whose classes
 * MPI_Error_class gives. Rank 0 prints this MPI's two classes and what it got.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, x = 1, bad_rank, bad_count, class_rank = -1, class_count = -1;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	bad_rank = MPI_Send(&x, 1, MPI_INT, size + 5, 0, MPI_COMM_WORLD);
	bad_count = MPI_Send(&x, -1, MPI_INT, (rank + 1) % size, 0, MPI_COMM_WORLD);
	MPI_Error_class(bad_rank, &class_rank);
	MPI_Error_class(bad_count, &class_count);
	if (rank == 0)
		printf("MPI_ERR_RANK=%d MPI_ERR_COUNT=%d got %d %d\n", MPI_ERR_RANK, MPI_ERR_COUNT,
		       class_rank, class_count);
	MPI_Finalize();
	return 0;
}
