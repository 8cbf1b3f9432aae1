/*
 * Tags derived from ranks: a ring where each message is tagged with its sender's rank
 * (Sendrecv with sendtag = rank and recvtag = the source, then Irecv/Isend/Waitall the
 * same way, statuses kept), ITERS times. Usage: mpi_tagring ITERS. Rank 0 prints a
 * checksum.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, iters = argc > 1 ? atoi(argv[1]) : 4;
	long sum = 0;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	for (int i = 0; i < iters; i++) {
		int out = rank + i, in = -1, nxt = (rank + 1) % size, prv = (rank + size - 1) % size;
		MPI_Request rq[2];
		MPI_Status st[2];

		MPI_Sendrecv(&out, 1, MPI_INT, nxt, rank, &in, 1, MPI_INT, prv, prv, MPI_COMM_WORLD,
			     &st[0]);
		sum += in;
		MPI_Irecv(&in, 1, MPI_INT, prv, prv, MPI_COMM_WORLD, &rq[0]);
		MPI_Isend(&out, 1, MPI_INT, nxt, rank, MPI_COMM_WORLD, &rq[1]);
		MPI_Waitall(2, rq, st);
		sum += in + st[0].MPI_TAG;
	}
	MPI_Allreduce(MPI_IN_PLACE, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	if (rank == 0)
		printf("tagring size=%d iters=%d sum=%ld\n", size, iters, sum);
	MPI_Finalize();
	return 0;
}
