/*
 * Estimating a block's clock tick (FORMAT.md §7.4.1, writers) from the steps between
 * neighbouring times (gaps and durations): the tick is first guessed from the small steps,
 * then refined on ever longer steps, each pass's estimate being good enough to count the
 * ticks of steps 32 times longer. The estimate only needs to be close: the coding corrects
 * whatever it does not explain.
 */
#include <math.h>

#include "vticks_i.h"

#define FAR_LIMIT 4.5e15     /* about 2^52: beyond this a double cannot count ticks */
#define GUESS_SAMPLES 512    /* small differences scored per candidate tick */
#define GUESS_MIN 16	     /* fewer small differences: no guess */
#define GUESS_CHANCE 0.6 /* at most this share of differences may fit by chance */

static uint64_t absdiff(int64_t a, int64_t b)
{
	return a > b ? (uint64_t)a - (uint64_t)b : (uint64_t)b - (uint64_t)a;
}

/* Share of the differences @x[@n] within a nanosecond of a multiple of @c (plus the 1/256
 * a candidate may be off by). */
static double guess_score(const double *x, uint32_t n, double c)
{
	uint32_t fit = 0;

	for (uint32_t j = 0; j < n; j++) {
		double k = nearbyint(x[j] / c);

		fit += fabs(x[j] - k * c) <= 1 + x[j] / 256;
	}
	return (double)fit / n;
}

/*
 * The coarsest tick explaining 90% of the small differences between neighbouring times
 * (those up to twice the smallest of them, *@small_out), searched from the smallest
 * difference, or from just below @below when that is not 0, down in steps of 1/128.
 * @return it, or 0
 */
static double guess_tick(const int64_t *d, uint32_t m, double below, uint64_t *small_out)
{
	double sample[GUESS_SAMPLES];
	uint64_t small = UINT64_MAX;
	uint32_t count[65] = {0}, octave = 0, n_small = 0, n = 0;

	/* the smallest difference of the first octave holding GUESS_MIN of them, so that a
	 * stray few (a time computed, not read) do not count */
	for (uint32_t j = 1; j < m; j++)
		count[64 - __builtin_clzll(absdiff(d[j], d[j - 1]) | 1)]++;
	while (octave < 64 && count[octave] < GUESS_MIN)
		octave++;
	for (uint32_t j = 1; j < m; j++) {
		uint64_t x = absdiff(d[j], d[j - 1]);

		if (x && x < small && 64 - __builtin_clzll(x) >= (int)octave)
			small = x;
	}
	if (small < 2 || small > (UINT64_C(1) << 40))
		return 0;
	/* every difference in [small, 2 small], or an even spread of GUESS_SAMPLES of them */
	for (uint32_t j = 1; j < m; j++) {
		uint64_t x = absdiff(d[j], d[j - 1]);

		n_small += x >= small && x <= 2 * small;
	}
	if (n_small < GUESS_MIN)
		return 0;
	*small_out = small;
	for (uint32_t j = 1, seen = 0; j < m && n < GUESS_SAMPLES; j++) {
		uint64_t x = absdiff(d[j], d[j - 1]);

		if (x < small || x > 2 * small)
			continue;
		if ((uint64_t)seen++ * GUESS_SAMPLES % n_small < GUESS_SAMPLES)
			sample[n++] = (double)x;
	}
	for (double c = below > 0 ? below * (1 - 1.0 / 128) : (double)small + 0.5; c >= 2;
	     c *= 1 - 1.0 / 128) {
		/* below, a nanosecond each side covers most of a tick: chance fits */
		if (2 * (1 + 2.0 * (double)small / 256) > GUESS_CHANCE * c)
			return 0;
		if (guess_score(sample, n, c) >= 0.9)
			return c;
	}
	return 0;
}

/*
 * Refine the tick @q on the steps between neighbouring times: the nanoseconds of the steps
 * of at most K ticks, summed, over their ticks summed. A step's phase error is under a
 * nanosecond, so after a pass the tick is known to within about 0.6 sqrt(steps) / (ticks
 * summed) ns; K grows, up to eightfold per pass, as far as that still counts every step's
 * ticks right (a quarter of a tick of error at most).
 */
static double refine_tick(const int64_t *d, uint32_t m, double q, uint64_t small)
{
	/* the guess may be 2% off: twice the guess's short steps still count right */
	double most = 2 * fmax(1, nearbyint((double)small / q)), longest = 0;

	for (uint32_t j = 1; j < m; j++) {
		double x = (double)absdiff(d[j], d[j - 1]);

		if (x > longest && x < FAR_LIMIT)
			longest = x;
	}
	for (;;) {
		double sx = 0, sk = 0, cnt = 0, next;

		for (uint32_t j = 1; j < m; j++) {
			double x = (double)absdiff(d[j], d[j - 1]), k = nearbyint(x / q);

			if (k < 1 || k > most || x >= FAR_LIMIT)
				continue;
			sx += x;
			sk += k;
			cnt++;
		}
		if (sk == 0)
			return q;
		q = sx / sk;
		/* the tick is off by about 0.6 sqrt(cnt) / sk ns (a step's floor noise has a
		 * deviation under 0.6 ns); k ticks then miscount by k times that, over q */
		next = 0.25 * q * sk / (0.6 * sqrt(cnt));
		if (next > 8 * most)
			next = 8 * most;
		if (next <= most || longest <= most * q)
			return q;
		most = next;
	}
}

uint64_t vtick_estimate(const uint64_t *ts, const uint64_t *dur, uint32_t n, int64_t *scratch,
			double *guess)
{
	const uint64_t ref = n ? ts[n / 2] : 0;
	uint64_t small = 0;
	double q;

	if (n < 4)
		return 0;
	for (uint32_t i = 0; i < n; i++) {
		scratch[2 * i] = (int64_t)(ts[i] - ref);
		scratch[2 * i + 1] = (int64_t)(ts[i] + dur[i] - ref);
	}
	q = guess_tick(scratch, 2 * n, *guess, &small);
	*guess = q;
	if (q == 0)
		return 0;
	q = refine_tick(scratch, 2 * n, q, small) * 4294967296.0;
	if (!(q >= (double)VTICK_Q_MIN && q < (double)VTICK_Q_LIMIT))
		return 0;
	return (uint64_t)llround(q);
}
