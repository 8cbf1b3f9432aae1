/*
 * Clock ticks of a lossless values block (FORMAT.md §7.4.1): a clock scales a hardware
 * counter to nanoseconds, so over short stretches its readings lie on a lattice floor(phase
 * + n q). A block stores tick counts; each time is predicted from the previous one and the
 * phase interval its readings so far allow, and the few misses are corrected. Used by
 * values_enc.c and values_dec.c only.
 */
#ifndef TFS_VTICKS_I_H
#define TFS_VTICKS_I_H

#include <stdbool.h>
#include <stdint.h>

__extension__ typedef __int128 i128;

#define VTICK_Q_MIN (UINT64_C(1) << 33) /* ticks of at least 2 ns */
#define VTICK_Q_LIMIT (UINT64_C(1) << 62)
#define VTICK_ONE ((i128)1 << 32)
/* Ticks below this have their steps counted in 64 bits (vtick_step()): a short step's count
 * is guessed within two, so its shift stays under 3 q */
#define VTICK_Q_FAST (UINT64_C(1) << 60)

/* What is known of a time's phase: [lo, hi) in units of 2^-32 ns, 0 <= lo < hi <= 2^32. */
struct vphase {
	int64_t lo, hi;
};

#define VPHASE_UNKNOWN ((struct vphase){0, INT64_C(1) << 32})

static inline i128 vtick_floor_div(i128 num, i128 den)
{
	return num >= 0 ? num / den : -((-num + den - 1) / den);
}

/* The nanoseconds @k ticks (an i64 modulo 2^64) are predicted to take from phase @ph. */
static inline i128 vtick_predict(uint64_t q, struct vphase ph, uint64_t k)
{
	return vtick_floor_div((ph.lo + ph.hi) / 2 + (i128)(int64_t)k * (i128)q, VTICK_ONE);
}

/* The phase after a step of @k ticks that took @delta ns, from phase @ph. */
static inline struct vphase vtick_learn(uint64_t q, struct vphase ph, uint64_t k, i128 delta)
{
	const i128 shift = (i128)(int64_t)k * (i128)q - delta * VTICK_ONE;
	const i128 lo = ph.lo + shift, hi = ph.hi + shift;
	struct vphase out;

	out.lo = lo > 0 ? (int64_t)(lo < VTICK_ONE ? lo : VTICK_ONE) : 0;
	out.hi = hi < VTICK_ONE ? (int64_t)(hi > 0 ? hi : 0) : (int64_t)VTICK_ONE;
	return out.lo < out.hi ? out : VPHASE_UNKNOWN;
}

/*
 * A writer's step of @delta ns from phase *@ph: its tick count in *@k, the phase after it in
 * *@ph. @return the correction the step needs (0 when the prediction holds).
 *
 * The count is the nearest integer k to delta / q, the largest with k q <= delta 2^32 + q / 2:
 * a double guesses it (within one or two for |delta| < 2^52) and shift = k q - delta 2^32
 * settles it, which that count keeps in (-q/2, q/2]. The correction, delta - vtick_predict(),
 * and the phase, vtick_learn()'s, follow from shift alone in 64 bits: floor(((lo + hi) / 2 +
 * k q) / 2^32) is delta + floor(((lo + hi) / 2 + shift) / 2^32).
 */
static inline int64_t vtick_step(uint64_t q, struct vphase *ph, int64_t delta, uint64_t *k)
{
	const bool short_step = delta < (INT64_C(1) << 52) && delta > -(INT64_C(1) << 52);
	int64_t n, shift, mid, lo, hi;

	if (short_step && q < VTICK_Q_FAST) {
		/* shift stays within a few q < 2^62: 64 bits modulo 2^64 hold it exactly */
		const int64_t half = (int64_t)(q / 2), iq = (int64_t)q;

		n = (int64_t)((double)delta * 4294967296.0 / (double)q + 0.5);
		shift = (int64_t)((uint64_t)n * q - ((uint64_t)delta << 32));
		for (; shift > half; shift -= iq)
			n--;
		for (; shift + iq <= half; shift += iq)
			n++;
	} else {
		const i128 t = (i128)delta * VTICK_ONE, half = (i128)(q / 2);
		i128 s;

		if (!short_step)
			n = (int64_t)vtick_floor_div(t + half, (i128)q);
		else
			n = (int64_t)((double)delta * 4294967296.0 / (double)q + 0.5);
		s = (i128)n * (i128)q - t;
		for (; s > half; s -= q)
			n--;
		for (; s + q <= half; s += q)
			n++;
		shift = (int64_t)s;
	}
	*k = (uint64_t)n;
	mid = (ph->lo + ph->hi) / 2 + shift;
	lo = ph->lo + shift;
	hi = ph->hi + shift;
	lo = lo > 0 ? (lo < (int64_t)VTICK_ONE ? lo : (int64_t)VTICK_ONE) : 0;
	hi = hi < (int64_t)VTICK_ONE ? (hi > 0 ? hi : 0) : (int64_t)VTICK_ONE;
	*ph = lo < hi ? (struct vphase){lo, hi} : VPHASE_UNKNOWN;
	return mid >= 0 ? -(mid >> 32) : (-mid + (int64_t)VTICK_ONE - 1) >> 32;
}

/*
 * Estimate the tick length of the @n events' start times @ts and durations @dur (in
 * @scratch of 2 @n i64), in units of 2^-32 ns, from a guess below *@guess (0: any), which
 * it stores there (0: none), to try again below when the estimate proves wrong.
 * @return the estimate, or 0: no ticks of at least 2 ns
 */
uint64_t vtick_estimate(const uint64_t *ts, const uint64_t *dur, uint32_t n, int64_t *scratch,
			double *guess);

#endif
