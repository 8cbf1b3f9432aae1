/*
 * What every `tracefs` subcommand shares: the one form of its messages on stderr, usage
 * errors included, and the one way it opens a trace named on its command line.
 */
#ifndef TFS_FS_CLI_I_H
#define TFS_FS_CLI_I_H

/*
 * Print "tracefs: <message>\n" on stderr (lowercase, what failed first, no trailing period).
 * The message form: "cannot <verb> <what>: <detail>", each detail lowercase (fs_strerror).
 * @return 1, the exit status of a runtime error
 */
int fs_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * A usage error of command @cmd (NULL: of tracefs itself): "tracefs: [<cmd>: ]<message>
 * (try 'tracefs [<cmd> ]--help')" on stderr.
 * @return 2, the exit status of a usage error
 */
int fs_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * strerror(err) in the message form: "no such file or directory" (an acronym such as "ENOENT"
 * would keep its case). Thread safe.
 * @return a borrowed string, valid in this thread until the next call
 */
const char *fs_strerror(int err);

struct tfs_trace;

/*
 * Open the trace @path (tfs_trace_open()) for a command: a trace still being saved (-EBUSY,
 * an MPI rank's whose recorder saves it after the launcher returned) is waited for, up to
 * TFS_SAVE_WAIT seconds (600 by default, 0: not at all), with one line on stderr saying so;
 * a failure is reported as "cannot open <path>: <detail>" (cli_open.c).
 * @return 0 (*@t: the trace, the caller closes it), or 1, the exit status of a runtime error
 */
int fs_trace_open(const char *path, struct tfs_trace **t);

#endif
