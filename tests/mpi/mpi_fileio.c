/*
 * MPI-IO statuses: every rank writes 4 ints at its own offset of one shared file, sets a
 * view of ints, reads the next rank's block back with MPI_File_read_at and 2 ints with
 * MPI_File_iread_at completed by MPI_Wait. Each status is filled with all-ones bytes
 * before the call, as a stack status holds garbage: a file access defines only the bytes
 * it moved (ROMIO writes nothing else, so source, tag and the cancelled bit stay whatever
 * they were; Open MPI's MPI_Wait on a file request leaves them too). Rank 0 prints what it
 * read. The file is argv[1].
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int rank, size, out[4], in[4] = {0}, two[2] = {0}, n = -1;
	MPI_File fh;
	MPI_Status st;
	MPI_Request rq;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (argc < 2) {
		if (rank == 0)
			fprintf(stderr, "mpi_fileio: usage: mpi_fileio FILE\n");
		MPI_Finalize();
		return 2;
	}
	for (int i = 0; i < 4; i++)
		out[i] = 100 * rank + i;
	MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL,
		      &fh);
	memset(&st, 0xff, sizeof(st));
	MPI_File_write_at(fh, (MPI_Offset)rank * (MPI_Offset)sizeof(out), out, 4, MPI_INT, &st);
	MPI_File_set_view(fh, 0, MPI_INT, MPI_INT, "native", MPI_INFO_NULL);
	MPI_Barrier(MPI_COMM_WORLD);
	memset(&st, 0xff, sizeof(st));
	MPI_File_read_at(fh, (MPI_Offset)((rank + 1) % size) * 4, in, 4, MPI_INT, &st);
	MPI_Get_count(&st, MPI_INT, &n);
	MPI_File_iread_at(fh, 2, two, 2, MPI_INT, &rq);
	memset(&st, 0xff, sizeof(st));
	MPI_Wait(&rq, &st);
	MPI_File_close(&fh);
	if (rank == 0)
		printf("rank %d read %d %d %d %d (%d ints) then %d %d\n", rank, in[0], in[1], in[2], in[3],
		       n, two[0], two[1]);
	MPI_Finalize();
	return 0;
}
