/*
 * The parts symbolize.c builds on, each reusable on its own: a module's function symbols
 * sorted by address (symtab.c), a store of symbolised addresses of one object file with the
 * strings they name (symcache.c), and C++/Rust demangling (demangle.c). None of them is
 * thread-safe; symbolize.c serialises their use. They know nothing of processes or traces.
 */
#ifndef TFS_SYMBOLS_I_H
#define TFS_SYMBOLS_I_H

#include <elfutils/libdwfl.h>
#include <stdint.h>

#include "tfs/writer.h"

/* ---- symtab.c ---- */

struct cap_symtab;

/*
 * The function symbols of @mod sorted by address, built once: the table libdwfl picks for
 * it (the file's .symtab, else its separate debug file's, else .dynsym; plus a
 * .gnu_debugdata one), only symbols in executable sections. A module without symbols gives
 * an empty table. Names are borrowed from @mod's Dwfl, which must outlive the table.
 * @return 0 or -ENOMEM
 */
int cap_symtab_new(Dwfl_Module *mod, struct cap_symtab **out);
/* Accepts NULL. */
void cap_symtab_free(struct cap_symtab *t);
/*
 * The function holding address @pc (in @mod's addresses): the symbol whose [value,
 * value + size) holds it, or a symbol of size 0 below it up to the next symbol or the end
 * of its section. Where several symbols start at one address, a global one is preferred to
 * a weak one to a local one, then a function to an untyped symbol, then the name with the
 * fewest leading underscores, then the first in the table. @return the name, or NULL
 */
const char *cap_symtab_lookup(const struct cap_symtab *t, uint64_t pc);
/* Symbols in the table (one per start address). */
size_t cap_symtab_n(const struct cap_symtab *t);

/* ---- symcache.c ---- */

struct cap_symcache;

/* @return 0 or -ENOMEM */
int cap_symcache_new(struct cap_symcache **out);
/* Accepts NULL. */
void cap_symcache_free(struct cap_symcache *c);
/*
 * The source frames stored for address @pc, outermost first; a NULL function in
 * (*@frames)[0] means no symbol names @pc, and 0 frames that nothing at all is known of it.
 * @return true when @pc is stored; *@frames is borrowed until the cache is freed
 */
bool cap_symcache_get(const struct cap_symcache *c, uint64_t pc,
		      const struct tfs_src_frame **frames, uint32_t *n);
/*
 * Store @n (0 to 64) source frames for @pc (not stored yet), as cap_symcache_get gives them:
 * the strings are copied into the cache (each distinct one once), and *@stored is the
 * cache's copy (borrowed). @return 0 or -ENOMEM
 */
int cap_symcache_put(struct cap_symcache *c, uint64_t pc, const struct tfs_src_frame *frames,
		     uint32_t n, const struct tfs_src_frame **stored);
/*
 * @name demangled (cap_demangle_new) and kept in the cache: each distinct name is demangled
 * once. @return the demangled name, @name itself when it does not demangle, NULL when out
 * of memory; borrowed until the cache is freed
 */
const char *cap_symcache_demangle(struct cap_symcache *c, const char *name);
/* Addresses stored, and the @i-th of them (0 <= @i < n, in the order they were put). */
size_t cap_symcache_n(const struct cap_symcache *c);
void cap_symcache_entry(const struct cap_symcache *c, size_t i, uint64_t *pc,
			const struct tfs_src_frame **frames, uint32_t *n);

/* ---- symdisk.c ---- */

#define SYMDISK_MAX_BYTES (64 << 20) /* a larger file is neither read nor written */
#define SYMDISK_MAX_FILES 256	     /* files a directory keeps, the least recently used go */
#define SYMDISK_LOCK_TRIES 100	     /* 2 ms apart: a save waits 0.2 s at most for another */

/*
 * Put the entries of a cache file's bytes @buf[0..@len) into @c (those it holds already
 * are skipped), if the file is whole and of identity @id; with @c NULL only check it.
 * @return entries added (@c NULL: the file's entries), -TFS_ECORRUPT (damaged: nothing
 * added), -ESTALE (whole, of another identity: nothing added) or -ENOMEM
 */
long cap_symdisk_parse(const uint8_t *buf, size_t len, const char *id, struct cap_symcache *c);
/* The bytes of a cache file of identity @id holding @c's entries, in a new *@out. */
int cap_symdisk_build(const struct cap_symcache *c, const char *id, uint8_t **out, size_t *len);
/*
 * cap_symdisk_parse() of @dir's file for @id, if it is a regular file of the user's that
 * nobody else may write (else -EPERM, a symbolic link too), at most SYMDISK_MAX_BYTES
 * (else -TFS_ECORRUPT). @return as it, or -errno (-ENOENT: none)
 */
long cap_symdisk_load(const char *dir, const char *id, struct cap_symcache *c);
/*
 * Write @c's entries as @dir's file for @id (creating @dir, mode 0700), in place of any
 * earlier one, holding @dir's flock meanwhile: the file's entries as they are now are
 * first read into @c, so that recordings saving at the same time keep each other's. With
 * @trim_dir, then trim @dir to SYMDISK_MAX_FILES. @return 0 or -errno (-EBUSY: the lock
 * stayed held for SYMDISK_LOCK_TRIES tries)
 */
int cap_symdisk_save(const char *dir, const char *id, struct cap_symcache *c, bool trim_dir);

/* ---- demangle.c ---- */

/*
 * @name as a person reads it: a C++ (Itanium ABI, "_Z...") name as `c++filt` prints it
 * (libstdc++'s __cxa_demangle, loaded on first use), a Rust legacy name ("_ZN...17h<16 hex
 * digits>E") the same but without its hash and with Rust's escapes ($LT$, $u20$, ..)
 * undone. Where libstdc++ cannot be loaded (see demangle.c) names stay as they are.
 * Thread-safe.
 * @return a new malloc'ed string, or NULL when @name is not a mangled name, does not
 *         demangle, no demangler is available or memory is short
 */
char *cap_demangle_new(const char *name);

#endif
