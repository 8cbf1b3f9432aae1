/*
 * Computations run at most once successfully, by whichever thread needs them first: a
 * profile's text, a composite file's generated tail, a scope's merge index. It knows
 * nothing of what is computed.
 */
#ifndef TFS_FS_ONCE_I_H
#define TFS_FS_ONCE_I_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/*
 * A computation run at most once successfully, by whichever thread needs it first; others
 * wait on @lock. A failed run (ENOMEM, a corrupt block) is retried by the next caller.
 */
struct fs_once {
	pthread_mutex_t lock;
	atomic_bool done; /* set (release) after a successful run; read (acquire) lock-free */
};

void fs_once_init(struct fs_once *o);
void fs_once_fini(struct fs_once *o);
/** Run @fn(@arg) unless it already succeeded. @return 0 or @fn's negative errno */
int fs_once_run(struct fs_once *o, int (*fn)(void *arg), void *arg);

#endif
