/* bench_bandwidth: the memory bandwidth of this machine, measured so that bench can say what
 * fraction of it a decoder step reaches. a[i] = b[i] + s * c[i] over three arrays far larger
 * than any cache, counted as STREAM counts it (3 x 4 bytes per element), and a pass that only
 * reads them (a decoder step only reads its weights; the triad's writes add bandwidth a
 * read-only stream may not get). */
#ifndef ATTEND_BENCH_BANDWIDTH_H
#define ATTEND_BENCH_BANDWIDTH_H

typedef struct {
    double triad, read; /* GB/s, best of 5 each; 0 if not measured */
} bandwidth;

/* Both passes on `threads` threads over 3 x 640 MiB, in a child process so that its 1.9 GiB
 * never shows in the benchmark's peak RSS. Zeros if it could not run. */
bandwidth measure_bandwidth(int threads);

#endif
