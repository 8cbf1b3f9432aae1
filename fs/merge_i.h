/*
 * `tracefs merge`: merge traces into one (cmd_merge.c). Declared for the CLI dispatch in
 * tracefs.c.
 */
#ifndef TFS_FS_MERGE_I_H
#define TFS_FS_MERGE_I_H

#include <stddef.h>

/*
 * Write @len bytes to @path through a temporary file in the same directory renamed into
 * place: readers see the old file or the whole new one. @return 0 or -errno
 */
int fs_save_atomic(const char *path, const void *data, size_t len);

/* @argv[0] is "merge". @return the exit status: 0, 1 runtime error, 2 usage error */
int fs_cmd_merge(int argc, char **argv);

#endif
