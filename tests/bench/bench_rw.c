/*
 * bench_rw: the I/O workload of tests/bench/run_real, a program with many small system calls
 * and few allocations: P preads of 4 KiB at offsets that stride through IN (wrapping at its
 * size), then W writes of 256 bytes of what was read to OUT, created or truncated: the
 * bytes the last pread left in the buffer, 256 at a time. Links nothing of tracefs.
 * Prints one line: preads, writes, a checksum of the bytes read (the same traced or not).
 * It measures nothing itself: the script times it from outside.
 *
 *   bench_rw IN OUT P W
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define READ_LEN 4096
#define WRITE_LEN 256

int main(int argc, char **argv)
{
	static unsigned char buf[READ_LEN];
	unsigned long sum = 0;
	long n_pread, n_write, blocks;
	struct stat st;
	int in, out;

	if (argc != 5 || (n_pread = atol(argv[3])) < 0 || (n_write = atol(argv[4])) < 0) {
		fprintf(stderr, "usage: bench_rw IN OUT PREADS WRITES\n");
		return 2;
	}
	in = open(argv[1], O_RDONLY);
	if (in < 0 || fstat(in, &st) < 0 || st.st_size < READ_LEN) {
		perror("bench_rw: input");
		return 1;
	}
	out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0) {
		perror("bench_rw: output");
		return 1;
	}
	blocks = st.st_size / READ_LEN;
	for (long i = 0; i < n_pread; i++) {
		/* a stride coprime with most block counts visits every block before repeating */
		off_t off = (off_t)((i * 7919) % blocks) * READ_LEN;

		if (pread(in, buf, READ_LEN, off) != READ_LEN) {
			perror("bench_rw: pread");
			return 1;
		}
		sum = sum * 31 + buf[i % READ_LEN];
	}
	for (long i = 0; i < n_write; i++) {
		if (write(out, buf + (i % (READ_LEN / WRITE_LEN)) * WRITE_LEN, WRITE_LEN) !=
		    WRITE_LEN) {
			perror("bench_rw: write");
			return 1;
		}
	}
	if (close(out) < 0 || close(in) < 0) {
		perror("bench_rw: close");
		return 1;
	}
	printf("%ld %ld %lx\n", n_pread, n_write, sum);
	return 0;
}
