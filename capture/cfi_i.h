/*
 * Call frame information for the allocation backtraces (cfi.c, used by unwind.c): the rule
 * that finds the caller's frame from a frame stopped at one code address, read from the
 * .eh_frame of the loaded object holding it. Only the forms compilers emit for ordinary
 * x86-64 frames are rules here; anything else is CFI_OTHER, and the caller then unwinds
 * with libunwind. Internal to libtfscapture.
 */
#ifndef TFS_CFI_I_H
#define TFS_CFI_I_H

#include <stddef.h>
#include <stdint.h>

/* Where the frame's CFA (the caller's rsp after the return) is. */
enum cfi_cfa {
	CFI_OTHER = 0,	   /* not a form below, or no unwind information: ask libunwind */
	CFI_RSP = 1,	   /* rsp + cfa_off */
	CFI_RBP = 2,	   /* rbp + cfa_off */
	CFI_RBP_DEREF = 3, /* the word at rbp + cfa_off (a function that realigns its stack) */
	CFI_END = 4,	   /* the outermost frame: its return address is undefined */
};

/* Where the caller's rbp is. */
enum cfi_bp {
	CFI_BP_SAME = 0,   /* unchanged: rbp itself */
	CFI_BP_AT_CFA = 1, /* the word at CFA + bp_off */
	CFI_BP_AT_BP = 2,  /* the word at rbp + bp_off */
};

/*
 * One frame's rule. The return address is always the word at CFA - 8 and the caller's rsp
 * is the CFA: a frame whose CFI says otherwise is CFI_OTHER.
 */
struct cfi_rule {
	int32_t cfa_off;
	int16_t bp_off;
	uint8_t cfa; /* enum cfi_cfa */
	uint8_t bp;  /* enum cfi_bp */
};

/*
 * The rule at code address @pc (an instruction's own address: a return address minus 1)
 * of the loaded objects. Takes the dynamic loader's lock (dl_iterate_phdr), so the object
 * cannot go meanwhile; allocates nothing. @subs gets the loader's count of objects
 * unloaded so far (0 when the loader does not say).
 * @return the rule, cfa CFI_OTHER when @pc is in no object with an .eh_frame_hdr search
 * table or its CFI is not of the forms above
 */
struct cfi_rule cap_cfi_rule(uintptr_t pc, unsigned long long *subs);

/*
 * The rule of @pc in the FDE at @fde (the first byte of its length field) of an .eh_frame
 * section whose bytes lie in [@lo, @hi), a CIE found through the FDE's pointer included.
 * Every read is checked against that range: for FDEs in memory and for the fuzzer alike.
 * @return the rule, cfa CFI_OTHER when @pc is outside the FDE or its CFI is malformed or
 * not of the forms above
 */
struct cfi_rule cap_cfi_rule_fde(const uint8_t *fde, const uint8_t *lo, const uint8_t *hi,
				 uintptr_t pc);

#endif
