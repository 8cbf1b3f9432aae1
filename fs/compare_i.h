/*
 * `tracefs compare`: whether two traces make the same calls (cmd_compare.c). Declared for
 * the CLI dispatch in tracefs.c.
 */
#ifndef TFS_FS_COMPARE_I_H
#define TFS_FS_COMPARE_I_H

/*
 * @argv[0] is "compare". Prints, rank by rank, whether the traces make the same calls and
 * where each thread first differs.
 * @return the exit status: 0 the same calls, 1 they differ (or a runtime error, said on
 *         stderr), 2 usage error
 */
int fs_cmd_compare(int argc, char **argv);

#endif
