/*
 * Call frame information (cfi_i.h): the unwind rule of one code address, read from the
 * .eh_frame of the loaded object that holds it. The object is found with dl_iterate_phdr,
 * its FDE by a binary search of the .eh_frame_hdr table (PT_GNU_EH_FRAME), and the FDE's
 * CIE and FDE instructions are run up to the address (DWARF 5 §6.4, the LSB's .eh_frame
 * encodings). Every read stays inside the loaded segment that holds the record. The rule
 * keeps what an x86-64 frame walk needs: the CFA as rsp or rbp plus a constant (or the word
 * at rbp plus a constant), the return address at CFA - 8, rbp unchanged or saved at a
 * constant offset. Other forms, signal frames (augmentation 'S') and objects without a
 * sorted search table give CFI_OTHER. It neither caches rules nor walks stacks (unwind.c).
 */
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cfi_i.h"

#define MAX_REMEMBER 8 /* DW_CFA_remember_state nesting followed */

/* DWARF register numbers of x86-64 (System V psABI, figure 3.36). */
#define REG_RBP 6
#define REG_RSP 7
#define REG_RA 16

/* Pointer encodings (LSB, DW_EH_PE_*). */
#define PE_OMIT 0xff
#define PE_ULEB 0x01
#define PE_UDATA2 0x02
#define PE_UDATA4 0x03
#define PE_UDATA8 0x04
#define PE_SLEB 0x09
#define PE_SDATA2 0x0a
#define PE_SDATA4 0x0b
#define PE_SDATA8 0x0c
#define PE_PCREL 0x10
#define PE_DATAREL 0x30
#define PE_INDIRECT 0x80
#define PE_HDR_TABLE (PE_DATAREL | PE_SDATA4) /* the sorted table's only form read here */

#define OP_BREG6 0x76 /* DW_OP_breg6: rbp + sleb */
#define OP_DEREF 0x06

/* A register's rule while the instructions run. */
enum reg_how { R_SAME, R_UNDEF, R_AT_CFA, R_AT_BP, R_OTHER };

struct reg_rule {
	uint8_t how; /* enum reg_how */
	int64_t off;
};

/* The rows of the CFA table that matter here. */
struct row {
	uint8_t cfa;	 /* enum cfi_cfa: CFI_RSP, CFI_RBP, CFI_RBP_DEREF or CFI_OTHER */
	int64_t cfa_off;
	struct reg_rule bp, sp, ra;
};

/* A bounded reader over [p, end). */
struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static bool need(struct rd *r, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		return false;
	}
	return true;
}

static uint64_t rd_u(struct rd *r, size_t n)
{
	uint64_t v = 0;

	if (!need(r, n))
		return 0;
	for (size_t i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

static uint64_t rd_uleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (!need(r, 1))
			return 0;
		b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	return v;
}

static int64_t rd_sleb(struct rd *r)
{
	uint64_t v = 0;
	unsigned int shift = 0;
	uint8_t b;

	do {
		if (!need(r, 1))
			return 0;
		b = *r->p++;
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while (b & 0x80);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

/*
 * A pointer in encoding @enc. pcrel counts from the field's own address, datarel from
 * @data; an indirect pointer is not followed (only personality routines use it: skipped).
 */
static uint64_t rd_ptr(struct rd *r, uint8_t enc, uintptr_t data)
{
	const uintptr_t at = (uintptr_t)r->p;
	uint64_t v;

	if (enc == PE_OMIT)
		return 0;
	switch (enc & 0x0f) {
	case 0x00: /* absptr */
	case PE_UDATA8:
	case PE_SDATA8:
		v = rd_u(r, 8);
		break;
	case PE_ULEB:
		v = rd_uleb(r);
		break;
	case PE_UDATA2:
		v = rd_u(r, 2);
		break;
	case PE_UDATA4:
		v = rd_u(r, 4);
		break;
	case PE_SLEB:
		v = (uint64_t)rd_sleb(r);
		break;
	case PE_SDATA2:
		v = (uint64_t)(int64_t)(int16_t)rd_u(r, 2);
		break;
	case PE_SDATA4:
		v = (uint64_t)(int64_t)(int32_t)rd_u(r, 4);
		break;
	default:
		r->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case 0x00:
		break;
	case PE_PCREL:
		v += at;
		break;
	case PE_DATAREL:
		v += data;
		break;
	default:
		r->bad = true;
	}
	return v;
}

/*
 * The extent of the CIE or FDE at @p: its content after the length field in *@body,
 * [body, return). NULL when malformed, a terminator, or past @hi.
 */
static const uint8_t *record(const uint8_t *p, const uint8_t *lo, const uint8_t *hi,
			     const uint8_t **body)
{
	struct rd r = {p, hi, p < lo || p > hi};
	uint64_t len = rd_u(&r, 4);

	if (len == 0xffffffffu)
		len = rd_u(&r, 8);
	if (r.bad || len == 0 || len > (uint64_t)(hi - r.p))
		return NULL;
	*body = r.p;
	return r.p + len;
}

/* What the CIE says for its FDEs. */
struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc; /* pointer encoding of the FDE's addresses */
	bool has_aug;	 /* 'z': augmentation data lengths are present */
	bool signal;	 /* 'S': a signal frame */
	const uint8_t *insns, *end;
};

static bool parse_cie(const uint8_t *body, const uint8_t *end, struct cie *c)
{
	struct rd r = {body, end, false};
	const char *aug;
	size_t aug_len;
	uint8_t version;

	memset(c, 0, sizeof(*c));
	if (rd_u(&r, 4) != 0) /* CIE id */
		return false;
	version = (uint8_t)rd_u(&r, 1);
	if (r.bad || (version != 1 && version != 3))
		return false;
	aug = (const char *)r.p;
	aug_len = strnlen(aug, (size_t)(end - r.p));
	if (!need(&r, aug_len + 1))
		return false;
	r.p += aug_len + 1;
	c->code_align = rd_uleb(&r);
	c->data_align = rd_sleb(&r);
	c->ra_reg = version == 1 ? rd_u(&r, 1) : rd_uleb(&r);
	c->fde_enc = 0; /* absptr */
	if (aug_len && aug[0] == 'z') {
		uint64_t n = rd_uleb(&r);
		const uint8_t *aug_end;

		if (r.bad || n > (uint64_t)(end - r.p))
			return false;
		aug_end = r.p + n; /* only once it is known to be inside */
		c->has_aug = true;
		for (size_t i = 1; i < aug_len && !r.bad; i++) {
			uint8_t enc;

			switch (aug[i]) {
			case 'R':
				c->fde_enc = (uint8_t)rd_u(&r, 1);
				break;
			case 'L':
				rd_u(&r, 1);
				break;
			case 'P':
				enc = (uint8_t)rd_u(&r, 1);
				rd_ptr(&r, enc & ~PE_INDIRECT, 0);
				break;
			case 'S':
				c->signal = true;
				break;
			default:
				return false; /* unknown: its data cannot be told apart */
			}
		}
		r.p = aug_end;
	} else if (aug_len) {
		return false; /* "eh" and other pre-'z' forms */
	}
	c->insns = r.p;
	c->end = end;
	return !r.bad && c->code_align != 0;
}

/* The rule of @reg in @row, or NULL for registers not followed. */
static struct reg_rule *reg_of(struct row *row, uint64_t reg, uint64_t ra_reg)
{
	if (reg == REG_RBP)
		return &row->bp;
	if (reg == REG_RSP)
		return &row->sp;
	if (reg == ra_reg)
		return &row->ra;
	return NULL;
}

/* DW_CFA_def_cfa_expression: only "DW_OP_breg6 off; DW_OP_deref" is followed. */
static void cfa_expr(struct row *row, const uint8_t *p, uint64_t len)
{
	struct rd e = {p, p + len, false};
	int64_t off;

	row->cfa = CFI_OTHER;
	if (rd_u(&e, 1) != OP_BREG6)
		return;
	off = rd_sleb(&e);
	if (rd_u(&e, 1) != OP_DEREF || e.bad || e.p != e.end)
		return;
	row->cfa = CFI_RBP_DEREF;
	row->cfa_off = off;
}

/* DW_CFA_expression: only "DW_OP_breg6 off" (saved at rbp + off) is followed. */
static void reg_expr(struct reg_rule *rr, const uint8_t *p, uint64_t len)
{
	struct rd e = {p, p + len, false};
	int64_t off;

	rr->how = R_OTHER;
	if (rd_u(&e, 1) != OP_BREG6)
		return;
	off = rd_sleb(&e);
	if (e.bad || e.p != e.end)
		return;
	rr->how = R_AT_BP;
	rr->off = off;
}

/*
 * @v factored by @align, wrapping: a hostile CIE must not overflow a signed product.
 * A well-formed one never wraps, and a wrapped offset only makes the walk stop early
 */
static int64_t scale(uint64_t v, int64_t align)
{
	return (int64_t)(v * (uint64_t)align);
}

static void set_cfa_reg(struct row *row, uint64_t reg)
{
	row->cfa = reg == REG_RSP ? CFI_RSP : reg == REG_RBP ? CFI_RBP : CFI_OTHER;
}

/*
 * Run the CFA instructions [@p, @end) from location @loc, stopping before the first row
 * that starts past @pc (@pc UINTPTR_MAX: all of them, the CIE's). @init: the rows after
 * the CIE's instructions, for DW_CFA_restore. @return false when malformed
 */
static bool run(const struct cie *c, const uint8_t *p, const uint8_t *end, uintptr_t loc,
		uintptr_t pc, struct row *row, const struct row *init)
{
	struct row saved[MAX_REMEMBER];
	unsigned int n_saved = 0;
	struct rd r = {p, end, false};

	while (r.p < r.end && !r.bad) {
		uint8_t op = (uint8_t)rd_u(&r, 1), low = op & 0x3f;
		uint64_t reg = 0, delta = 0, len;
		struct reg_rule *rr;
		int64_t off;

		switch (op >> 6) {
		case 1: /* DW_CFA_advance_loc */
			delta = low;
			goto advance;
		case 2: /* DW_CFA_offset */
			off = scale(rd_uleb(&r), c->data_align);
			rr = reg_of(row, low, c->ra_reg);
			if (rr)
				*rr = (struct reg_rule){R_AT_CFA, off};
			continue;
		case 3: /* DW_CFA_restore */
			rr = reg_of(row, low, c->ra_reg);
			if (rr)
				*rr = init ? *reg_of((struct row *)init, low, c->ra_reg)
					   : (struct reg_rule){R_SAME, 0};
			continue;
		}
		switch (op) {
		case 0x00: /* DW_CFA_nop */
			break;
		case 0x01: /* DW_CFA_set_loc */
			loc = (uintptr_t)rd_ptr(&r, c->fde_enc, 0);
			if (loc > pc)
				return !r.bad;
			break;
		case 0x02: /* DW_CFA_advance_loc1 */
			delta = rd_u(&r, 1);
			goto advance;
		case 0x03: /* DW_CFA_advance_loc2 */
			delta = rd_u(&r, 2);
			goto advance;
		case 0x04: /* DW_CFA_advance_loc4 */
			delta = rd_u(&r, 4);
			goto advance;
		case 0x05: /* DW_CFA_offset_extended */
		case 0x11: /* DW_CFA_offset_extended_sf */
		case 0x2f: /* DW_CFA_GNU_negative_offset_extended */
			reg = rd_uleb(&r);
			off = op == 0x11 ? scale((uint64_t)rd_sleb(&r), c->data_align)
					 : scale(rd_uleb(&r), c->data_align);
			if (op == 0x2f)
				off = -off;
			rr = reg_of(row, reg, c->ra_reg);
			if (rr)
				*rr = (struct reg_rule){R_AT_CFA, off};
			break;
		case 0x06: /* DW_CFA_restore_extended */
			reg = rd_uleb(&r);
			rr = reg_of(row, reg, c->ra_reg);
			if (rr)
				*rr = init ? *reg_of((struct row *)init, reg, c->ra_reg)
					   : (struct reg_rule){R_SAME, 0};
			break;
		case 0x07: /* DW_CFA_undefined */
		case 0x08: /* DW_CFA_same_value */
			rr = reg_of(row, rd_uleb(&r), c->ra_reg);
			if (rr)
				*rr = (struct reg_rule){op == 0x07 ? R_UNDEF : R_SAME, 0};
			break;
		case 0x09: /* DW_CFA_register */
		case 0x14: /* DW_CFA_val_offset */
		case 0x15: /* DW_CFA_val_offset_sf */
			rr = reg_of(row, rd_uleb(&r), c->ra_reg);
			rd_uleb(&r);
			if (rr)
				rr->how = R_OTHER;
			break;
		case 0x0a: /* DW_CFA_remember_state */
			if (n_saved == MAX_REMEMBER)
				return false;
			saved[n_saved++] = *row;
			break;
		case 0x0b: /* DW_CFA_restore_state */
			if (n_saved == 0)
				return false;
			*row = saved[--n_saved];
			break;
		case 0x0c: /* DW_CFA_def_cfa */
			set_cfa_reg(row, rd_uleb(&r));
			row->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case 0x12: /* DW_CFA_def_cfa_sf */
			set_cfa_reg(row, rd_uleb(&r));
			row->cfa_off = scale((uint64_t)rd_sleb(&r), c->data_align);
			break;
		case 0x0d: /* DW_CFA_def_cfa_register */
			set_cfa_reg(row, rd_uleb(&r));
			break;
		case 0x0e: /* DW_CFA_def_cfa_offset */
			row->cfa_off = (int64_t)rd_uleb(&r);
			break;
		case 0x13: /* DW_CFA_def_cfa_offset_sf */
			row->cfa_off = scale((uint64_t)rd_sleb(&r), c->data_align);
			break;
		case 0x0f: /* DW_CFA_def_cfa_expression */
			len = rd_uleb(&r);
			if (!need(&r, len))
				return false;
			cfa_expr(row, r.p, len);
			r.p += len;
			break;
		case 0x10: /* DW_CFA_expression */
		case 0x16: /* DW_CFA_val_expression */
			rr = reg_of(row, rd_uleb(&r), c->ra_reg);
			len = rd_uleb(&r);
			if (!need(&r, len))
				return false;
			if (rr && op == 0x10)
				reg_expr(rr, r.p, len);
			else if (rr)
				rr->how = R_OTHER;
			r.p += len;
			break;
		case 0x2e: /* DW_CFA_GNU_args_size */
			rd_uleb(&r);
			break;
		default:
			return false;
		}
		continue;
advance:
		if (r.bad)
			return false;
		loc += delta * c->code_align;
		if (loc > pc)
			return true;
	}
	return !r.bad;
}

/* The rule of the row found, as a frame walk reads it. */
static struct cfi_rule to_rule(const struct row *row)
{
	struct cfi_rule rule = {0, 0, CFI_OTHER, CFI_BP_SAME};

	if (row->ra.how == R_UNDEF) {
		rule.cfa = CFI_END;
		return rule;
	}
	if (row->ra.how != R_AT_CFA || row->ra.off != -8 || row->sp.how != R_SAME ||
	    row->cfa == CFI_OTHER || row->cfa_off < INT32_MIN || row->cfa_off > INT32_MAX)
		return rule;
	switch (row->bp.how) {
	case R_SAME:
		break;
	case R_AT_CFA:
	case R_AT_BP:
		if (row->bp.off < INT16_MIN || row->bp.off > INT16_MAX)
			return rule;
		rule.bp = row->bp.how == R_AT_CFA ? CFI_BP_AT_CFA : CFI_BP_AT_BP;
		rule.bp_off = (int16_t)row->bp.off;
		break;
	default:
		return rule;
	}
	rule.cfa_off = (int32_t)row->cfa_off;
	rule.cfa = row->cfa;
	return rule;
}

struct cfi_rule cap_cfi_rule_fde(const uint8_t *fde, const uint8_t *lo, const uint8_t *hi,
				 uintptr_t pc)
{
	const struct cfi_rule other = {0, 0, CFI_OTHER, CFI_BP_SAME};
	const uint8_t *body, *end, *cie_body, *cie_end, *insns;
	struct row row = {CFI_OTHER, 0, {R_SAME, 0}, {R_SAME, 0}, {R_SAME, 0}}, init;
	uint64_t begin, range, cie_ptr;
	struct cie c;
	struct rd r;

	end = record(fde, lo, hi, &body);
	if (!end)
		return other;
	r = (struct rd){body, end, false};
	cie_ptr = rd_u(&r, 4);
	/* the CIE pointer counts back from its own field */
	if (r.bad || cie_ptr == 0 || cie_ptr > (uint64_t)(body - lo))
		return other;
	cie_end = record(body - cie_ptr, lo, hi, &cie_body);
	if (!cie_end || !parse_cie(cie_body, cie_end, &c) || c.signal)
		return other;
	begin = rd_ptr(&r, c.fde_enc, 0);
	range = rd_ptr(&r, c.fde_enc & 0x0f, 0);
	if (c.has_aug) {
		uint64_t n = rd_uleb(&r);

		if (!need(&r, n))
			return other;
		r.p += n;
	}
	if (r.bad || pc < begin || pc - begin >= range)
		return other;
	insns = r.p;
	if (!run(&c, c.insns, c.end, 0, UINTPTR_MAX, &row, NULL))
		return other;
	init = row;
	if (!run(&c, insns, end, (uintptr_t)begin, pc, &row, &init))
		return other;
	return to_rule(&row);
}

/* ---- finding the FDE ---- */

struct find {
	uintptr_t pc;
	struct cfi_rule rule;
	unsigned long long subs;
};

/* The loaded segment of @info holding [@p, @p + 1), as [*lo, *hi). */
static bool segment_of(const struct dl_phdr_info *info, const uint8_t *p, const uint8_t **lo,
		       const uint8_t **hi)
{
	for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		const uint8_t *s = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);

		if (ph->p_type == PT_LOAD && p >= s && p < s + ph->p_memsz) {
			*lo = s;
			*hi = s + ph->p_memsz;
			return true;
		}
	}
	return false;
}

/* In @hdr's sorted table (@n entries), the FDE of the last function starting at or below @pc. */
static const uint8_t *table_find(const uint8_t *hdr, const uint8_t *table, uint64_t n,
				 uintptr_t pc)
{
	uint64_t lo = 0, hi = n;
	int32_t e[2];

	/* entries: (start, FDE), each a 4-byte offset from the header */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		memcpy(e, table + mid * 8, 8);
		if ((uintptr_t)(hdr + e[0]) <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	memcpy(e, table + (lo - 1) * 8, 8);
	return hdr + e[1];
}

static bool in_code(const struct dl_phdr_info *info, uintptr_t pc)
{
	for (uint32_t i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && pc >= s &&
		    pc - s < ph->p_memsz)
			return true;
	}
	return false;
}

static int find_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	const uint8_t *hdr = NULL, *lo, *hi, *fde;
	uint8_t fp_enc, count_enc;
	uint64_t n;
	struct rd r;

	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof(info->dlpi_subs))
		f->subs = info->dlpi_subs;
	if (!in_code(info, f->pc))
		return 0;
	for (uint32_t i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_GNU_EH_FRAME)
			hdr = (const uint8_t *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
	if (!hdr || !segment_of(info, hdr, &lo, &hi))
		return 1;
	r = (struct rd){hdr, hi, false};
	if (rd_u(&r, 1) != 1) /* version */
		return 1;
	fp_enc = (uint8_t)rd_u(&r, 1);
	count_enc = (uint8_t)rd_u(&r, 1);
	if (rd_u(&r, 1) != PE_HDR_TABLE)
		return 1;
	rd_ptr(&r, fp_enc, (uintptr_t)hdr);
	n = rd_ptr(&r, count_enc, (uintptr_t)hdr);
	if (r.bad || n > (uint64_t)(hi - r.p) / 8)
		return 1;
	fde = table_find(hdr, r.p, n, f->pc);
	if (fde && segment_of(info, fde, &lo, &hi))
		f->rule = cap_cfi_rule_fde(fde, lo, hi, f->pc);
	return 1;
}

struct cfi_rule cap_cfi_rule(uintptr_t pc, unsigned long long *subs)
{
	struct find f = {pc, {0, 0, CFI_OTHER, CFI_BP_SAME}, 0};

	dl_iterate_phdr(find_cb, &f);
	*subs = f.subs;
	return f.rule;
}
