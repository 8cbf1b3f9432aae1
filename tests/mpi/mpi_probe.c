/*
 * Probes and matched receives in a subcommunicator: the ranks split into even and odd
 * halves, and each sends its half's next rank messages of tags 1 to 3. Tag 1 is found by
 * MPI_Mprobe and received by MPI_Mrecv; after two MPI_Improbe for a tag never sent (no
 * message), tag 2 is polled for with MPI_Improbe and received by MPI_Imrecv; tag 3 is
 * found by MPI_Probe and received by MPI_Recv. Each probe's status is filled with all-ones
 * bytes first, as a stack status holds garbage (MPICH sets all but its cancelled bit).
 * Rank 0 prints what it received.
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rank, size, hr, hs, v[3], got[3] = {-1, -1, -1}, flag = 0;
	MPI_Comm half;
	MPI_Message msg;
	MPI_Status st;
	MPI_Request rq;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	MPI_Comm_rank(half, &hr);
	MPI_Comm_size(half, &hs);
	for (int i = 0; i < 3; i++) {
		v[i] = 10 * rank + i;
		MPI_Send(&v[i], 1, MPI_INT, (hr + 1) % hs, i + 1, half);
	}
	memset(&st, 0xff, sizeof(st));
	MPI_Mprobe((hr + hs - 1) % hs, 1, half, &msg, &st);
	MPI_Mrecv(&got[0], 1, MPI_INT, &msg, &st);
	for (int i = 0; i < 2; i++)
		MPI_Improbe(MPI_ANY_SOURCE, 99, half, &flag, &msg, MPI_STATUS_IGNORE);
	flag = 0;
	while (!flag) {
		memset(&st, 0xff, sizeof(st));
		MPI_Improbe(MPI_ANY_SOURCE, 2, half, &flag, &msg, &st);
	}
	MPI_Imrecv(&got[1], 1, MPI_INT, &msg, &rq);
	MPI_Wait(&rq, &st);
	memset(&st, 0xff, sizeof(st));
	MPI_Probe((hr + hs - 1) % hs, 3, half, &st);
	MPI_Recv(&got[2], 1, MPI_INT, (hr + hs - 1) % hs, 3, half, MPI_STATUS_IGNORE);
	if (rank == 0)
		printf("rank 0 received %d %d %d\n", got[0], got[1], got[2]);
	MPI_Comm_free(&half);
	MPI_Finalize();
	return 0;
}
