/*
 * matmul: C = A x B on N x N doubles with T threads, reporting every element load and store
 * of the multiply through tfs_mem_access() (the EPRSD workload: the paper traces 8x8 and
 * 16x16 products with 1 to 32 threads). Thread t computes the elements t*N*N/T up to
 * (t+1)*N*N/T - 1 in row-major order; each element is N loads of A and of B, interleaved,
 * then one store of C: N*N*(2N+1) accesses in all. Prints the checksum of C.
 *
 *   matmul [N [T]]      N 1..256 (default 16), T 1..64 (default 4)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "tfs/capture.h"

struct job {
	int n, t, n_threads;
	const double *a, *b;
	double *c;
};

static void *worker(void *arg)
{
	const struct job *j = arg;
	const int n = j->n, total = n * n;
	const int lo = (int)((long)total * j->t / j->n_threads);
	const int hi = (int)((long)total * (j->t + 1) / j->n_threads);

	tfs_zone_begin("multiply");
	for (int e = lo; e < hi; e++) {
		const int row = e / n, col = e % n;
		double sum = 0;

		for (int k = 0; k < n; k++) {
			const double *pa = &j->a[row * n + k], *pb = &j->b[k * n + col];

			tfs_mem_access(pa, sizeof(*pa), 0);
			tfs_mem_access(pb, sizeof(*pb), 0);
			sum += *pa * *pb;
		}
		tfs_mem_access(&j->c[e], sizeof(j->c[e]), 1);
		j->c[e] = sum;
	}
	tfs_zone_end();
	return NULL;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 16, n_threads = argc > 2 ? atoi(argv[2]) : 4;
	pthread_t tid[64];
	struct job jobs[64];
	double *a, *b, *c, sum = 0;

	if (n < 1 || n > 256 || n_threads < 1 || n_threads > 64) {
		fprintf(stderr, "usage: matmul [N (1..256) [THREADS (1..64)]]\n");
		return 2;
	}
	a = malloc(sizeof(double) * n * n);
	b = malloc(sizeof(double) * n * n);
	c = calloc((size_t)n * n, sizeof(double));
	if (!a || !b || !c) {
		fprintf(stderr, "matmul: out of memory\n");
		return 1;
	}
	for (int i = 0; i < n * n; i++) {
		a[i] = (double)(i % 7) - 3;
		b[i] = (double)(i % 5) * 0.5;
	}
	for (int t = 0; t < n_threads; t++) {
		jobs[t] = (struct job){n, t, n_threads, a, b, c};
		if (pthread_create(&tid[t], NULL, worker, &jobs[t]) != 0) {
			fprintf(stderr, "matmul: cannot create thread %d\n", t);
			return 1;
		}
	}
	for (int t = 0; t < n_threads; t++)
		pthread_join(tid[t], NULL);
	for (int i = 0; i < n * n; i++)
		sum += c[i] * (double)(i % 3 + 1);
	printf("matmul %dx%d threads=%d checksum=%.1f\n", n, n, n_threads, sum);
	free(a);
	free(b);
	free(c);
	return 0;
}
