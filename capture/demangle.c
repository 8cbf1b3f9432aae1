/*
 * Demangling of the function names symbolize.c finds, by libstdc++'s __cxa_demangle (the
 * demangler of c++filt and gdb), looked up once with dlopen so that tracefs links no C++
 * runtime. `tracefs record` (TFS_CAP_RECORDER: the consumer library) loads libstdc++.so.6;
 * a traced program consuming its own spool only uses one it has already loaded (a C++
 * program has), since loading a library into somebody else's program while it exits runs
 * that library's constructors there. Rust's legacy mangling is Itanium's with a hash and
 * escapes: the hash is cut and the escapes undone here; Rust's v0 names ("_R...") are left
 * as they are. This file does not demangle anything itself.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "symbols_i.h"

#define RUST_HASH_DIGITS 16

typedef char *cxa_demangle_fn(const char *mangled, char *buf, size_t *len, int *status);

static cxa_demangle_fn *g_cxa_demangle;
static pthread_once_t g_load_once = PTHREAD_ONCE_INIT;

static void load_demangler(void)
{
#ifdef TFS_CAP_RECORDER
	const int flags = RTLD_NOW | RTLD_LOCAL;
#else
	const int flags = RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD;
#endif
	void *h = dlopen("libstdc++.so.6", flags);

	/* kept open for the life of the process, like the names it gives */
	if (h)
		*(void **)&g_cxa_demangle = dlsym(h, "__cxa_demangle");
}

static bool is_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* Whether @name is a Rust legacy name: "_ZN...17h<16 hex digits>E". */
static bool rust_legacy(const char *name)
{
	size_t len = strlen(name);
	const char *h;

	if (strncmp(name, "_ZN", 3) != 0 || len < 3 + 3 + RUST_HASH_DIGITS + 1 ||
	    name[len - 1] != 'E')
		return false;
	h = name + len - 1 - RUST_HASH_DIGITS;
	if (strncmp(h - 3, "17h", 3) != 0)
		return false;
	for (int i = 0; i < RUST_HASH_DIGITS; i++)
		if (!is_hex(h[i]))
			return false;
	return true;
}

/* Rust's escapes of characters a symbol cannot hold, besides $u<hex>$. */
static const struct {
	const char *esc;
	char c;
} rust_escapes[] = {
    {"$SP$", '@'}, {"$BP$", '*'}, {"$RF$", '&'}, {"$LT$", '<'},
    {"$GT$", '>'}, {"$LP$", '('}, {"$RP$", ')'}, {"$C$", ','},
};

/* The character escape @s starts with, and its length in *@len; 0 when none. */
static char rust_escape(const char *s, size_t *len)
{
	for (size_t i = 0; i < sizeof(rust_escapes) / sizeof(rust_escapes[0]); i++) {
		*len = strlen(rust_escapes[i].esc);
		if (strncmp(s, rust_escapes[i].esc, *len) == 0)
			return rust_escapes[i].c;
	}
	if (s[0] == '$' && s[1] == 'u' && is_hex(s[2]) && is_hex(s[3]) && s[4] == '$') {
		const char hex[3] = {s[2], s[3], 0};
		char c = (char)strtoul(hex, NULL, 16);

		*len = 5;
		return c >= 0x20 && c < 0x7f ? c : 0;
	}
	return 0;
}

/*
 * @d, the demangled form of a Rust legacy name, without its hash and escapes, in place (no
 * replacement is longer than what it replaces).
 */
static void rust_tidy(char *d)
{
	size_t len = strlen(d), n;
	char *out = d, c;

	if (len > 3 + RUST_HASH_DIGITS && strncmp(d + len - 3 - RUST_HASH_DIGITS, "::h", 3) == 0)
		d[len - 3 - RUST_HASH_DIGITS] = 0;
	for (const char *s = d; *s;) {
		bool start = out == d || (out - d >= 2 && out[-1] == ':' && out[-2] == ':');

		if (start && s[0] == '_' && s[1] == '$') { /* "_$": an escape opens the name */
			s++;
		} else if (s[0] == '.' && s[1] == '.') {
			*out++ = ':';
			*out++ = ':';
			s += 2;
		} else if (s[0] == '$' && (c = rust_escape(s, &n)) != 0) {
			*out++ = c;
			s += n;
		} else {
			*out++ = *s++;
		}
	}
	*out = 0;
}

char *cap_demangle_new(const char *name)
{
	char *d;
	int status = -1;

	if (name[0] != '_' || name[1] != 'Z')
		return NULL;
	pthread_once(&g_load_once, load_demangler);
	if (!g_cxa_demangle)
		return NULL;
	d = g_cxa_demangle(name, NULL, NULL, &status);
	if (status != 0 || !d) {
		free(d);
		return NULL;
	}
	if (rust_legacy(name))
		rust_tidy(d);
	return d;
}
