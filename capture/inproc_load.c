/*
 * Where the in-process consumer comes from. The static library links it (inproc.c). The
 * shared library, which `tracefs record` preloads into every process it traces, does not:
 * the consumer, the codec, the symboliser and their libraries (zstd, libdw and what libdw
 * loads) would cost each traced process their loading and relocation for nothing, since
 * under `tracefs record` the recorder consumes. A program linked with libtfscapture and run
 * on its own loads libtfsinproc.so here, once, from the directory libtfscapture.so was
 * loaded from (the build tree, or the install's libdir), else by the loader's own search.
 * It does not start or drive the consumer (capture.c, inproc.c do).
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "capture_i.h"

#ifdef TFS_CAP_SHARED
#define INPROC_LIB "libtfsinproc.so"

/* @INPROC_LIB beside the object that holds this function, in @buf; false if none is known. */
static bool beside_self(char *buf, size_t cap)
{
	Dl_info info;
	const char *slash;
	int len;

	if (!dladdr((void *)cap_inproc_load, &info) || !info.dli_fname)
		return false;
	slash = strrchr(info.dli_fname, '/');
	if (!slash)
		return false;
	len = snprintf(buf, cap, "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
		       INPROC_LIB);
	return len > 0 && (size_t)len < cap;
}

const struct cap_inproc_ops *cap_inproc_load(void)
{
	static const struct cap_inproc_ops *ops;
	char path[PATH_MAX];
	void *h = NULL;

	if (ops)
		return ops;
	if (beside_self(path, sizeof(path)))
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		h = dlopen(INPROC_LIB, RTLD_NOW | RTLD_LOCAL);
	if (h)
		ops = dlsym(h, "cap_inproc_ops");
	if (!ops) {
		const char *why = dlerror();

		fprintf(stderr, "tracefs: cannot load %s (%s): in-process capture is off\n",
			INPROC_LIB, why ? why : "no cap_inproc_ops in it");
	}
	return ops;
}
#else
const struct cap_inproc_ops *cap_inproc_load(void)
{
	return &cap_inproc_ops;
}
#endif
