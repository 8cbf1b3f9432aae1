/*
 * `tracefs merge`: merge traces into one (cmd_merge.c). Declared for the CLI dispatch in
 * tracefs.c.
 */
#ifndef TFS_FS_MERGE_I_H
#define TFS_FS_MERGE_I_H

/* @argv[0] is "merge". @return the exit status: 0, 1 runtime error, 2 usage error */
int fs_cmd_merge(int argc, char **argv);

#endif
