/*
 * Symbols with known shapes for test_capture_symtab, assembled into a shared object whose
 * .symtab the test reads: a sized function, an untyped label of no size, a function nested
 * in another, four names of one address (global, global with underscores, weak, local), a
 * function followed by bytes no symbol covers, data symbols, and a label at the end. The
 * code is nops: nothing runs it.
 */
	.text
	.globl	fx_sized
	.type	fx_sized, @function
fx_sized:
	.fill	16, 1, 0x90
	.size	fx_sized, 16

fx_label:
	.fill	16, 1, 0x90

	.globl	fx_outer
	.type	fx_outer, @function
fx_outer:
	.fill	8, 1, 0x90
	.type	fx_inner, @function
fx_inner:
	.fill	4, 1, 0x90
	.size	fx_inner, 4
	.fill	20, 1, 0x90
	.size	fx_outer, 32

	.globl	__fx_alias
	.type	__fx_alias, @function
	.globl	fx_alias
	.type	fx_alias, @function
	.weak	fx_weak
	.type	fx_weak, @function
	.type	fx_local, @function
fx_local:
__fx_alias:
fx_weak:
fx_alias:
	.fill	16, 1, 0x90
	.size	fx_local, 16
	.size	__fx_alias, 16
	.size	fx_weak, 16
	.size	fx_alias, 16

	.globl	fx_gapped
	.type	fx_gapped, @function
fx_gapped:
	.fill	4, 1, 0x90
	.size	fx_gapped, 4
	.fill	12, 1, 0x90

	.globl	fx_after_gap
	.type	fx_after_gap, @function
fx_after_gap:
	.fill	16, 1, 0x90
	.size	fx_after_gap, 16

fx_tail:
	.fill	8, 1, 0x90

	.data
	.globl	fx_data
	.type	fx_data, @object
fx_data:
	.quad	0
	.size	fx_data, 8
fx_data_label:
	.quad	0

	.section .note.GNU-stack, "", @progbits
