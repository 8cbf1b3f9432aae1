/*
 * Ranks of a group the caller is not in: every rank makes the group of world ranks P-1 and
 * 0 (MPI_Group_incl), asks its rank there (MPI_UNDEFINED but at those two) and translates
 * that group's ranks 0 and 1 to world ranks (MPI_Group_translate_ranks). A member's ranks
 * are relative to its own rank in the group; a non-member has none to be relative to.
 * Rank 0 prints the translation.
 */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int rank, size, in_pair = -1, pair_ranks[2], both[2] = {0, 1}, world_of[2] = {-1, -1};
	MPI_Group world, pair;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	pair_ranks[0] = size - 1;
	pair_ranks[1] = 0;
	MPI_Comm_group(MPI_COMM_WORLD, &world);
	MPI_Group_incl(world, 2, pair_ranks, &pair);
	MPI_Group_rank(pair, &in_pair);
	MPI_Group_translate_ranks(pair, 2, both, world, world_of);
	if (rank == 0)
		printf("pair ranks 0,1 are world ranks %d,%d; rank 0 is %d there\n", world_of[0],
		       world_of[1], in_pair);
	MPI_Group_free(&pair);
	MPI_Group_free(&world);
	MPI_Finalize();
	return 0;
}
