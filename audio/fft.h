/* fft: the discrete Fourier transform of a real signal, in double precision, for the log-mel
 * spectrogram (mel.c). Mixed radix (any even length; lengths of small factors are fast: 400 =
 * 2^4 * 5^2 for Whisper).
 *
 *   fft_plan *p = fft_plan_new(400);
 *   double x[400], spec[2 * 201];     // spec: re, im of bins 0..200
 *   fft_real(p, x, spec);
 *   fft_plan_free(p);
 *
 * A plan holds its own working memory: one thread uses it at a time. */
#ifndef ATTEND_FFT_H
#define ATTEND_FFT_H

typedef struct fft_plan fft_plan;

/* A plan for real signals of n samples (n even, 2 <= n <= 1 << 20); NULL if n is not such a
 * length or memory runs out. */
fft_plan *fft_plan_new(int n);
void fft_plan_free(fft_plan *p);

/* X[k] = sum_j x[j] e^(-2 pi i j k / n) for k = 0..n/2: out[2k] = Re X[k], out[2k+1] = Im X[k]
 * (n + 2 doubles). x: n samples. */
void fft_real(fft_plan *p, const double *x, double *out);

#endif
