/*
 * Once-only computations (once_i.h): a mutex for the first run, an atomic flag read
 * lock-free afterwards. It does not retry by itself: a failed run is retried by the next
 * caller.
 */
#include "once_i.h"

void fs_once_init(struct fs_once *o)
{
	pthread_mutex_init(&o->lock, NULL);
	atomic_init(&o->done, false);
}

void fs_once_fini(struct fs_once *o)
{
	pthread_mutex_destroy(&o->lock);
}

int fs_once_run(struct fs_once *o, int (*fn)(void *arg), void *arg)
{
	int rc = 0;

	if (atomic_load_explicit(&o->done, memory_order_acquire))
		return 0;
	pthread_mutex_lock(&o->lock);
	if (!atomic_load_explicit(&o->done, memory_order_relaxed)) {
		rc = fn(arg);
		if (rc == 0)
			atomic_store_explicit(&o->done, true, memory_order_release);
	}
	pthread_mutex_unlock(&o->lock);
	return rc;
}
