/*
 * Allocation backtraces, consumer side: the backtraces of one process interned into stack
 * ids (stacks.c), the objects it had loaded, and the symbolisation of every distinct code
 * address once the process is gone (symbolize.c). Not thread-safe: one consumer owns a
 * cap_stacks. It does not parse spool records (consumer.c).
 */
#ifndef TFS_STACKS_I_H
#define TFS_STACKS_I_H

#include <stdbool.h>
#include <stdint.h>

struct tfs_writer;
struct cap_stacks;

/* A load of an object of the traced process, as REC_MODULE announced it. */
struct cap_module {
	uint64_t bias;	 /* load bias: run-time address - address in the file */
	uint64_t lo, hi; /* its PT_LOAD span, run-time addresses */
	uint32_t tag;	 /* the tag its frames carry (spool_i.h frame tags) */
	char *path;
};

/* @return 0 or -ENOMEM */
int cap_stacks_new(struct cap_stacks **out);
/* Accepts NULL. */
void cap_stacks_free(struct cap_stacks *s);

/*
 * The hash of a backtrace, frame by frame from CAP_STACKS_HASH_SEED (the state after its
 * first k frames), then ended with its length: a caller whose backtraces share a prefix
 * with the previous one (spool_i.h) hashes only the frames that differ.
 */
#define CAP_STACKS_HASH_SEED UINT64_C(0x9e3779b97f4a7c15)

static inline uint64_t cap_stacks_hash_step(uint64_t h, uint64_t frame)
{
	h ^= frame;
	h ^= h >> 33;
	h *= UINT64_C(0xff51afd7ed558ccd);
	h ^= h >> 33;
	return h + UINT64_C(0x9e3779b97f4a7c15);
}

static inline uint64_t cap_stacks_hash_end(uint64_t h, uint32_t n)
{
	h ^= n;
	h ^= h >> 33;
	h *= UINT64_C(0xc4ceb9fe1a85ec53);
	return h ^ (h >> 33);
}

static inline uint64_t cap_stacks_hash(const uint64_t *frames, uint32_t n)
{
	uint64_t h = CAP_STACKS_HASH_SEED;

	for (uint32_t i = 0; i < n; i++)
		h = cap_stacks_hash_step(h, frames[i]);
	return cap_stacks_hash_end(h, n);
}

/*
 * The stack id of backtrace @frames (@n return addresses, outermost first, n < 2^24, tagged
 * as spool_i.h says): 0, 1, 2... in order of first appearance; a new one is added to @w
 * (tfs_writer_add_backtrace, @rank). @return 0, -ENOMEM or a writer error
 */
int cap_stacks_intern(struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
		      const uint64_t *frames, uint32_t n, uint64_t *id);
/* cap_stacks_intern() of a backtrace whose cap_stacks_hash() is @hash. */
int cap_stacks_intern_hashed(struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
			     const uint64_t *frames, uint32_t n, uint64_t hash, uint64_t *id);

/* Remember a load of an object (@path copied). @return 0 or -ENOMEM */
int cap_stacks_add_module(struct cap_stacks *s, uint64_t bias, uint64_t lo, uint64_t hi,
			  uint32_t tag, const char *path);

/*
 * The load a frame @key (a tagged return address, spool_i.h) was recorded in: the latest
 * announced of its tag holding its address, else (its announcement lost) the latest holding
 * its address at all (where an exec'd image's objects overlap its predecessor's, the later
 * image's): its index in *@index. @return false when none does
 */
bool cap_stacks_module_index(const struct cap_stacks *s, uint64_t key, uint32_t *index);

/* Distinct code addresses so far, in order of first appearance (@i < the count). */
uint64_t cap_stacks_n_addrs(const struct cap_stacks *s);
uint64_t cap_stacks_addr(const struct cap_stacks *s, uint64_t i);
uint64_t cap_stacks_n_stacks(const struct cap_stacks *s);
uint32_t cap_stacks_n_modules(const struct cap_stacks *s);
const struct cap_module *cap_stacks_module(const struct cap_stacks *s, uint32_t i);

/*
 * Keep symbolised addresses in directory @dir between recordings (symdisk.c), created when
 * first written; NULL or "" keeps none (the default). Thread-safe.
 */
void cap_symbols_keep_in(const char *dir);

/*
 * Symbolise every distinct code address once into @w (tfs_writer_add_symbol, @rank, the
 * frame's tagged value as the address): function, file and line, inlined functions as
 * frames of their own, from the load the frame was recorded in; a return address is
 * looked up at addr - 1 (the call). C++ and Rust names are demangled. What has no symbol
 * becomes "<object file name>+0x<return address in the file>" (or "0x<addr>" outside
 * every object). Lookups are shared with every earlier call for the same object file
 * (symbolize.c). *@n_named counts the addresses that got a function name. Thread-safe
 * against other calls (one lock).
 * @return 0, -ENOMEM or a writer error
 */
int cap_stacks_symbolize(const struct cap_stacks *s, struct tfs_writer *w, uint32_t rank,
			 uint64_t *n_named);

#endif
