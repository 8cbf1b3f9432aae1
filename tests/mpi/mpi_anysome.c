/*
 * Completion in any order: rank 0 posts an Irecv from every other rank and completes them
 * with MPI_Waitany, then again with a MPI_Testsome loop, the second round inside a phase
 * begun by MPI_Info_set("tracefs_phase") and ended by deleting the key; the other ranks end it
with the empty value under MPICH (Open MPI refuses it: there they delete the key). Others send their rank (tag rank, then
 * 100 + rank). Rank 0 prints the sum it received.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rank, size, sum = 0;
	MPI_Info info;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	MPI_Info_create(&info);
	if (rank == 0) {
		int *buf = calloc((size_t)size, sizeof(int)),
		    *idx = calloc((size_t)size, sizeof(int));
		MPI_Request *rq = calloc((size_t)size, sizeof(MPI_Request));
		MPI_Status *st = calloc((size_t)size, sizeof(MPI_Status));

		for (int i = 1; i < size; i++)
			MPI_Irecv(&buf[i], 1, MPI_INT, i, i, MPI_COMM_WORLD, &rq[i - 1]);
		for (int i = 1; i < size; i++) {
			int k;

			MPI_Waitany(size - 1, rq, &k, &st[0]);
			sum += buf[k + 1];
		}
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Info_set(info, "tracefs_phase", "testsome");
		for (int i = 1; i < size; i++)
			MPI_Irecv(&buf[i], 1, MPI_INT, i, 100 + i, MPI_COMM_WORLD, &rq[i - 1]);
		for (int done = 0; done < size - 1;) {
			int n = 0;

			MPI_Testsome(size - 1, rq, &n, idx, st);
			for (int j = 0; j < n; j++)
				sum += buf[idx[j] + 1];
			done += n > 0 ? n : 0;
		}
		MPI_Info_delete(info, "tracefs_phase");
		free(buf);
		free(idx);
		free(rq);
		free(st);
	} else {
		int v = rank;

		MPI_Send(&v, 1, MPI_INT, 0, rank, MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		MPI_Info_set(info, "tracefs_phase", "testsome");
		MPI_Send(&v, 1, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
#ifdef OPEN_MPI
		MPI_Info_delete(info, "tracefs_phase");
#else
		MPI_Info_set(info, "tracefs_phase", "");
#endif
	}
	MPI_Info_free(&info);
	if (rank == 0)
		printf("anysome size=%d sum=%d\n", size, sum);
	MPI_Finalize();
	return 0;
}
