/*
 * Derived datatypes: a vector, a contiguous type and a struct of predefined types,
 * committed, used in a Send, a Recv and a Bcast, freed; a struct of the derived contiguous
 * type and a predefined one, made and freed; then a second vector (which takes the first
 * one's freed id). Rank 1 prints what it received.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, a[16], b[4] = {0, 0, 0, 0}, bl[2] = {1, 2};
	double d[3] = {0, 0, 0};
	MPI_Aint disp[2] = {0, 8};
	MPI_Datatype vec, con, st, mixed, vec2, types[2] = {MPI_INT, MPI_DOUBLE}, both[2];

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	for (int i = 0; i < 16; i++)
		a[i] = i;
	MPI_Type_vector(4, 1, 4, MPI_INT, &vec);
	MPI_Type_commit(&vec);
	MPI_Type_contiguous(3, MPI_DOUBLE, &con);
	MPI_Type_commit(&con);
	MPI_Type_create_struct(2, bl, disp, types, &st);
	MPI_Type_commit(&st);
	both[0] = con;
	both[1] = MPI_INT;
	MPI_Type_create_struct(2, bl, disp, both, &mixed);
	MPI_Type_free(&mixed);
	if (rank == 0) {
		d[0] = 1.5, d[1] = 2.5, d[2] = 3.5;
		MPI_Send(a, 1, vec, 1, 5, MPI_COMM_WORLD);
	} else if (rank == 1) {
		MPI_Status s;

		MPI_Recv(b, 4, MPI_INT, 0, 5, MPI_COMM_WORLD, &s);
	}
	MPI_Bcast(d, 1, con, 0, MPI_COMM_WORLD);
	MPI_Type_free(&st);
	MPI_Type_free(&con);
	MPI_Type_free(&vec);
	MPI_Type_vector(2, 2, 3, MPI_INT, &vec2);
	MPI_Type_free(&vec2);
	if (rank == 1)
		printf("dtype got %d %d %d %d and %.1f %.1f %.1f\n", b[0], b[1], b[2], b[3], d[0],
		       d[1], d[2]);
	MPI_Finalize();
	return 0;
}
