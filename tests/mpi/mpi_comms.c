/*
 * Communicators: Comm_split into even and odd ranks with a ring Sendrecv in each half,
 * Comm_dup and Comm_idup of MPI_COMM_WORLD with a Barrier on each, an intercommunicator
 * between the halves (Intercomm_create) with a Sendrecv between ranks of the same index,
 * then every communicator freed. Needs an even number of ranks, at least 4. Rank 0 prints.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, hr, hs, out, in = -1, rs, in2 = -1;
	MPI_Comm half, dup, idc, inter;
	MPI_Request rq;
	MPI_Status st;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
	MPI_Comm_rank(half, &hr);
	MPI_Comm_size(half, &hs);
	out = rank;
	MPI_Sendrecv(&out, 1, MPI_INT, (hr + 1) % hs, 3, &in, 1, MPI_INT, (hr + hs - 1) % hs, 3,
		     half, &st);
	MPI_Comm_dup(MPI_COMM_WORLD, &dup);
	MPI_Barrier(dup);
	MPI_Comm_idup(MPI_COMM_WORLD, &idc, &rq);
	MPI_Wait(&rq, MPI_STATUS_IGNORE);
	MPI_Barrier(idc);
	MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter);
	MPI_Comm_remote_size(inter, &rs);
	MPI_Sendrecv(&out, 1, MPI_INT, hr, 4, &in2, 1, MPI_INT, hr, 4, inter, &st);
	MPI_Comm_free(&inter);
	MPI_Comm_free(&idc);
	MPI_Comm_free(&dup);
	MPI_Comm_free(&half);
	if (rank == 0)
		printf("comms size=%d half=%d ring_in=%d inter_in=%d remote=%d\n", size, hs, in,
		       in2, rs);
	MPI_Finalize();
	return 0;
}
