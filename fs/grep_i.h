/*
 * `tracefs grep`: GNU grep's answer over a file of the virtual tree, from the call
 * signatures where it can be (cmd_grep.c). Declared for the CLI dispatch in tracefs.c.
 */
#ifndef TFS_FS_GREP_I_H
#define TFS_FS_GREP_I_H

/*
 * @argv[0] is "grep". Prints what `tracefs cat TRACE PATH | LC_ALL=C grep OPTIONS PATTERN`
 * prints.
 * @return the exit status as grep's: 0 some line selected, 1 none, 2 usage or runtime error
 */
int fs_cmd_grep(int argc, char **argv);

#endif
