/*
 * What a status holds: rank 1 receives 3 of 8 posted ints (12 bytes; MPI_Get_count says 3
 * ints), cancels an Irecv that
 * nothing matches (MPI_Test_cancelled says so), then, with MPI_ERRORS_RETURN on the
 * communicator, completes with one MPI_Waitall a receive of 2 ints into 1 (truncated, an
 * error) and a receive that fits: MPI_Waitall returns MPI_ERR_IN_STATUS and each status its
 * MPI_ERROR (the second may be left pending: then an MPI_Wait completes it). Needs 2 ranks. Rank 1 prints the outcome and this MPI's error constants.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, buf[8] = {0}, two[2] = {1, 2}, one = 3, a = 0, b = 0, flag = -1, cls = -1;
	MPI_Status st, sts[2];
	MPI_Request rq, rqs[2];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size != 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_status: needs 2 ranks, got %d\n", size);
		MPI_Finalize();
		return 2;
	}
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (rank == 0) {
		MPI_Send(buf, 3, MPI_INT, 1, 5, MPI_COMM_WORLD);
		MPI_Send(two, 2, MPI_INT, 1, 6, MPI_COMM_WORLD);
		MPI_Send(&one, 1, MPI_INT, 1, 7, MPI_COMM_WORLD);
	} else {
		int rc, n = -1;

		MPI_Recv(buf, 8, MPI_INT, 0, 5, MPI_COMM_WORLD, &st);
		MPI_Get_count(&st, MPI_INT, &n);
		MPI_Irecv(&a, 1, MPI_INT, 0, 99, MPI_COMM_WORLD, &rq);
		MPI_Cancel(&rq);
		MPI_Wait(&rq, &st);
		MPI_Test_cancelled(&st, &flag);
		MPI_Irecv(&a, 1, MPI_INT, 0, 6, MPI_COMM_WORLD, &rqs[0]);
		MPI_Irecv(&b, 1, MPI_INT, 0, 7, MPI_COMM_WORLD, &rqs[1]);
		rc = MPI_Waitall(2, rqs, sts);
		if (rc == MPI_ERR_IN_STATUS)
			MPI_Error_class(sts[0].MPI_ERROR, &cls);
		/* an MPI may stop at the failed request and leave the other pending */
		if (rc == MPI_ERR_IN_STATUS && sts[1].MPI_ERROR == MPI_ERR_PENDING)
			MPI_Wait(&rqs[1], &sts[1]);
		printf("status count=%d cancelled=%d waitall=%d truncated=%d b=%d "
		       "MPI_ERR_IN_STATUS=%d MPI_ERR_TRUNCATE=%d\n",
		       n, flag, rc, cls, b, MPI_ERR_IN_STATUS, MPI_ERR_TRUNCATE);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
