/*
 * A recording's private directory (recdir.c): where `tracefs record` and the processes it
 * records keep their spools, under the names spool_i.h gives. Used by recording.c and
 * recprocs.c only; fs/ reaches it through tfs/recording.h.
 */
#ifndef TFS_RECDIR_I_H
#define TFS_RECDIR_I_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where recordings make their directories unless TFS_SPOOL says otherwise. */
#define RECDIR_DEFAULT_PREFIX "/dev/shm/tracefs"

struct cap_recdir {
	char *path;  /* absolute: `<prefix>.XXXXXX`, mode 0700, made by mkdtemp */
	char *first; /* `<path>/spool`: the first process's spool (spool_i.h names) */
	int lock_fd; /* the first spool, holding a read lock while a recorder lives; -1 */
};

/*
 * The prefix of recording directories: $TFS_SPOOL when set, else RECDIR_DEFAULT_PREFIX,
 * made absolute against the current directory now (a relative one would name another
 * place in a traced process that changed directory), into @buf.
 * @return 0, -ENAMETOOLONG or -errno of getcwd
 */
int cap_recdir_prefix(char *buf, size_t cap);

/*
 * Remove what recordings that were killed left in the directory of @prefix: each
 * `<anything>.XXXXXX` directory of this user, mode 0700, holding a first spool of this
 * user that nobody holds a lock on and that is older than a recorder takes to lock it; in
 * it only the regular files of this user named as spools are named (spool_i.h), then the
 * directory if that left it empty.
 * Files of other users, and files of other names, are never removed.
 * *@n_files and *@bytes count what was removed.
 */
void cap_recdir_sweep(const char *prefix, uint32_t *n_files, uint64_t *bytes);

/* Make a new private directory `<prefix>.XXXXXX`. @return 0, -ENOMEM or -errno of mkdtemp */
int cap_recdir_new(const char *prefix, struct cap_recdir **out);

/*
 * Hold a lock on the first spool (after it was made) for as long as this process, or a
 * process it forks, keeps the descriptor: a sweeping recorder leaves the directory alone.
 * @return 0 or -errno
 */
int cap_recdir_lock(struct cap_recdir *d);

/*
 * Free @d (accepts NULL). @remove: remove the first spool, the saved trace and the
 * directory (the processes' spools are removed by whoever took them in); otherwise leave
 * them to the process that goes on recording (the MPI saver, cmd_record.c).
 */
void cap_recdir_free(struct cap_recdir *d, bool remove);

#endif
