/*
 * The CFI reader of the allocation backtraces (capture/cfi.c): rules read from hand-built
 * .eh_frame records (a CIE and an FDE in a buffer, their bytes written here from the
 * LSB/DWARF encodings, not from the reader), every truncation and every single-bit flip of
 * them read without a read outside the buffer (run under ASan), and the rules of live code
 * found through the loader (dl_iterate_phdr, .eh_frame_hdr).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "cfi_i.h"

#define BEGIN 0x10000u /* the FDE's function, absolute (CIE 'R': DW_EH_PE_udata8) */
#define RANGE 0x40u

/* A CIE and an FDE: bytes, and where the FDE starts. */
struct rec {
	uint8_t b[256];
	size_t len, fde;
};

static void put(struct rec *r, const void *p, size_t n)
{
	assert_true(r->len + n <= sizeof(r->b));
	memcpy(r->b + r->len, p, n);
	r->len += n;
}

static void put_u8(struct rec *r, uint8_t v)
{
	put(r, &v, 1);
}

static void put_u32(struct rec *r, uint32_t v)
{
	put(r, &v, 4);
}

static void put_u64(struct rec *r, uint64_t v)
{
	put(r, &v, 8);
}

/* Pad the record begun at @start (its length field) to 8 bytes and set its length. */
static void close_rec(struct rec *r, size_t start)
{
	uint32_t len;

	while ((r->len - start) % 8)
		put_u8(r, 0); /* DW_CFA_nop */
	len = (uint32_t)(r->len - start - 4);
	memcpy(r->b + start, &len, 4);
}

/*
 * CIE "zR" (or "zRS" when @signal): code align 1, data align -8, return address column 16,
 * FDE pointers absolute 8-byte; CFA = rsp + 8, return address at CFA - 8. Then an FDE for
 * [BEGIN, BEGIN + RANGE) with the instructions @insns.
 */
static void build(struct rec *r, const uint8_t *insns, size_t n, int signal)
{
	const char *aug = signal ? "zRS" : "zR";
	static const uint8_t cie_insns[] = {0x0c, 7, 8, 0x90, 1}; /* def_cfa r7 8; offset r16 1 */
	size_t start;

	memset(r, 0, sizeof(*r));
	start = r->len;
	put_u32(r, 0);
	put_u32(r, 0); /* CIE id */
	put_u8(r, 1);  /* version */
	put(r, aug, strlen(aug) + 1);
	put_u8(r, 1);	 /* code alignment */
	put_u8(r, 0x78); /* data alignment: sleb128 -8 */
	put_u8(r, 16);	 /* return address column */
	put_u8(r, 1);	 /* augmentation data: 1 byte */
	put_u8(r, 0x04); /* 'R': DW_EH_PE_udata8 */
	put(r, cie_insns, sizeof(cie_insns));
	close_rec(r, start);
	r->fde = start = r->len;
	put_u32(r, 0);
	put_u32(r, (uint32_t)(r->len - 0)); /* CIE pointer: back to offset 0 from this field */
	put_u64(r, BEGIN);
	put_u64(r, RANGE);
	put_u8(r, 0); /* augmentation data: none */
	put(r, insns, n);
	close_rec(r, start);
}

static struct cfi_rule rule_at(const struct rec *r, uintptr_t pc)
{
	return cap_cfi_rule_fde(r->b + r->fde, r->b, r->b + r->len, pc);
}

static void check(struct cfi_rule got, int cfa, int32_t cfa_off, int bp, int16_t bp_off)
{
	assert_int_equal(got.cfa, cfa);
	if (cfa == CFI_OTHER || cfa == CFI_END)
		return;
	assert_int_equal(got.cfa_off, cfa_off);
	assert_int_equal(got.bp, bp);
	if (bp != CFI_BP_SAME)
		assert_int_equal(got.bp_off, bp_off);
}

/* push rbp; mov rsp, rbp; ...; leave; ret, as GCC describes it */
static const uint8_t frame_pointer[] = {
	0x41,	     /* advance_loc 1 */
	0x0e, 16,    /* def_cfa_offset 16 */
	0x86, 2,     /* offset r6 at cfa-16 */
	0x43,	     /* advance_loc 3 */
	0x0d, 6,     /* def_cfa_register r6 */
	0x02, 0x30,  /* advance_loc1 0x30 */
	0x0c, 7, 8,  /* def_cfa r7 8 */
};

static void test_cfi_frame_pointer_rows(void **state)
{
	struct rec r;

	(void)state;
	build(&r, frame_pointer, sizeof(frame_pointer), 0);
	check(rule_at(&r, BEGIN), CFI_RSP, 8, CFI_BP_SAME, 0);
	check(rule_at(&r, BEGIN + 1), CFI_RSP, 16, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 3), CFI_RSP, 16, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 4), CFI_RBP, 16, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 0x33), CFI_RBP, 16, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 0x34), CFI_RSP, 8, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + RANGE - 1), CFI_RSP, 8, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + RANGE), CFI_OTHER, 0, 0, 0);
	check(rule_at(&r, BEGIN - 1), CFI_OTHER, 0, 0, 0);
}

static void test_cfi_remember_restore(void **state)
{
	static const uint8_t insns[] = {
		0x41, 0x0e, 16, 0x86, 2, /* push rbp */
		0x41, 0x0e, 24,		 /* push rbx */
		0x4a,			 /* advance 10 */
		0x0a,			 /* remember_state */
		0x41, 0x0e, 8, 0xc6,	 /* pops: cfa rsp+8, restore rbp */
		0x41, 0x0b,		 /* advance 1; restore_state */
		0x42, 0x0e, 32,		 /* advance 2; cfa rsp+32 */
	};
	struct rec r;

	(void)state;
	build(&r, insns, sizeof(insns), 0);
	check(rule_at(&r, BEGIN + 2), CFI_RSP, 24, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 12), CFI_RSP, 24, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 13), CFI_RSP, 8, CFI_BP_SAME, 0);
	check(rule_at(&r, BEGIN + 14), CFI_RSP, 24, CFI_BP_AT_CFA, -16);
	check(rule_at(&r, BEGIN + 16), CFI_RSP, 32, CFI_BP_AT_CFA, -16);
}

/* GCC's stack realignment through a saved pointer (DRAP): CFA read from rbp - 8 */
static void test_cfi_realigned_stack(void **state)
{
	static const uint8_t insns[] = {
		0x48, 0x0c, 10, 0,		     /* advance 8; def_cfa r10 0 */
		0x48, 0x10, 6, 2, 0x76, 0,	     /* advance 8; expression r6: breg6 0 */
		0x42, 0x0f, 3, 0x76, 0x78, 0x06,     /* advance 2; cfa: breg6 -8; deref */
	};
	struct rec r;

	(void)state;
	build(&r, insns, sizeof(insns), 0);
	check(rule_at(&r, BEGIN + 8), CFI_OTHER, 0, 0, 0); /* CFA in r10: not followed */
	check(rule_at(&r, BEGIN + 17), CFI_OTHER, 0, 0, 0);
	check(rule_at(&r, BEGIN + 18), CFI_RBP_DEREF, -8, CFI_BP_AT_BP, 0);
}

static void test_cfi_end_signal_and_others(void **state)
{
	static const uint8_t undefined_ra[] = {0x41, 0x07, 16}; /* advance 1; undefined r16 */
	static const uint8_t ra_elsewhere[] = {0x41, 0x90, 2};	/* r16 at cfa-16 */
	static const uint8_t rsp_saved[] = {0x41, 0x87, 2};	/* r7 at cfa-16 */
	static const uint8_t bad_op[] = {0x41, 0x3f};		/* an unknown instruction */
	static const uint8_t unbalanced[] = {0x41, 0x0b};	/* restore_state, none saved */
	struct rec r;

	(void)state;
	build(&r, undefined_ra, sizeof(undefined_ra), 0);
	check(rule_at(&r, BEGIN), CFI_RSP, 8, CFI_BP_SAME, 0);
	check(rule_at(&r, BEGIN + 1), CFI_END, 0, 0, 0);
	build(&r, frame_pointer, sizeof(frame_pointer), 1);
	check(rule_at(&r, BEGIN + 4), CFI_OTHER, 0, 0, 0); /* a signal frame: libunwind's */
	build(&r, ra_elsewhere, sizeof(ra_elsewhere), 0);
	check(rule_at(&r, BEGIN + 1), CFI_OTHER, 0, 0, 0);
	build(&r, rsp_saved, sizeof(rsp_saved), 0);
	check(rule_at(&r, BEGIN + 1), CFI_OTHER, 0, 0, 0);
	build(&r, bad_op, sizeof(bad_op), 0);
	check(rule_at(&r, BEGIN + 1), CFI_OTHER, 0, 0, 0);
	build(&r, unbalanced, sizeof(unbalanced), 0);
	check(rule_at(&r, BEGIN + 1), CFI_OTHER, 0, 0, 0);
}

/* Every truncation and every single-bit flip: no read outside [lo, hi) (ASan), no hang. */
static void test_cfi_truncated_and_flipped(void **state)
{
	struct rec r;

	(void)state;
	build(&r, frame_pointer, sizeof(frame_pointer), 0);
	for (size_t len = 0; len < r.len; len++) {
		uint8_t *copy = malloc(len ? len : 1);

		assert_non_null(copy);
		memcpy(copy, r.b, len);
		for (uintptr_t pc = BEGIN; pc < BEGIN + 8; pc++)
			if (r.fde <= len)
				(void)cap_cfi_rule_fde(copy + r.fde, copy, copy + len, pc);
		free(copy);
	}
	for (size_t bit = 0; bit < r.len * 8; bit++) {
		uint8_t *copy = malloc(r.len);

		assert_non_null(copy);
		memcpy(copy, r.b, r.len);
		copy[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		for (uintptr_t pc = BEGIN; pc < BEGIN + RANGE; pc += 7)
			(void)cap_cfi_rule_fde(copy + r.fde, copy, copy + r.len, pc);
		free(copy);
	}
}

__attribute__((noinline)) int cfi_probe(int x);

__attribute__((noinline)) int cfi_probe(int x)
{
	return x * 3 + 1;
}

/* Live code: at a function's first instruction the CFA is rsp + 8 and rbp untouched. */
static void test_cfi_live_code(void **state)
{
	unsigned long long subs = 1;
	struct cfi_rule r;

	(void)state;
	r = cap_cfi_rule((uintptr_t)cfi_probe, &subs);
	check(r, CFI_RSP, 8, CFI_BP_SAME, 0);
	r = cap_cfi_rule((uintptr_t)strlen, &subs);
	check(r, CFI_RSP, 8, CFI_BP_SAME, 0);
	r = cap_cfi_rule(0x1000, &subs); /* no object there */
	check(r, CFI_OTHER, 0, 0, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cfi_frame_pointer_rows),
		cmocka_unit_test(test_cfi_remember_restore),
		cmocka_unit_test(test_cfi_realigned_stack),
		cmocka_unit_test(test_cfi_end_signal_and_others),
		cmocka_unit_test(test_cfi_truncated_and_flipped),
		cmocka_unit_test(test_cfi_live_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
