/*
 * What every `tracefs` subcommand shares: the one form of its messages on stderr.
 */
#ifndef TFS_FS_CLI_I_H
#define TFS_FS_CLI_I_H

/*
 * Print "tracefs: <message>\n" on stderr (lowercase, what failed first, no trailing period).
 * @return 1, the exit status of a runtime error
 */
int fs_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
