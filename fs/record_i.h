/*
 * `tracefs record`: run a program under the capture library and save its trace
 * (cmd_record.c). Declared for the CLI dispatch in tracefs.c.
 */
#ifndef TFS_RECORD_I_H
#define TFS_RECORD_I_H

/* @argv[0] is "record". @return the exit status of tracefs: the program's own status */
int fs_cmd_record(int argc, char **argv);

#endif
