/* fft: a real signal of n samples is packed as n/2 complex values (even samples real, odd ones
 * imaginary), transformed by a recursive mixed-radix Cooley-Tukey FFT (radix-4, -2 and -5
 * butterflies written out, any other factor as a small DFT), and split back into the n/2 + 1
 * bins of the real signal. Everything in double: the spectrogram's quiet bins sit 8 decades
 * below its loud ones, and float rounding would show in them. */
#include "fft.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double re, im;
} cplx;

#define FFT_MAX_FACTORS 40 /* 2^19 complex values have at most 19 factors */
#define FFT_MAX_N (1 << 20)

struct fft_plan {
    int n, m; /* real length, complex length m = n / 2 */
    int nf, factor[FFT_MAX_FACTORS];
    cplx *tw;     /* e^(-2 pi i k / m), k < m */
    cplx *half;   /* e^(-2 pi i k / n), k <= m: splits the packed transform */
    cplx *z, *zf; /* the packed signal, its transform */
    cplx *t;      /* one generic butterfly's inputs */
};

static inline cplx cmul(cplx a, cplx b) { return (cplx){a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
static inline cplx cadd(cplx a, cplx b) { return (cplx){a.re + b.re, a.im + b.im}; }
static inline cplx csub(cplx a, cplx b) { return (cplx){a.re - b.re, a.im - b.im}; }
static inline cplx unit(double turns) { return (cplx){cos(2 * M_PI * turns), -sin(2 * M_PI * turns)}; }

/* m's factors, 4s first, then 2, then odd primes; their count. */
static int factorize(int m, int *f) {
    int nf = 0;
    while (m % 4 == 0) f[nf++] = 4, m /= 4;
    while (m % 2 == 0) f[nf++] = 2, m /= 2;
    for (int p = 3; p * p <= m; p += 2)
        while (m % p == 0) f[nf++] = p, m /= p;
    if (m > 1) f[nf++] = m;
    return nf;
}

fft_plan *fft_plan_new(int n) {
    if (n < 2 || n > FFT_MAX_N || n % 2) return NULL;
    fft_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n;
    p->m = n / 2;
    p->nf = factorize(p->m, p->factor);
    int big = 1;
    for (int i = 0; i < p->nf; i++) big = p->factor[i] > big ? p->factor[i] : big;
    p->tw = malloc(sizeof(cplx) * (size_t)p->m);
    p->half = malloc(sizeof(cplx) * (size_t)(p->m + 1));
    p->z = malloc(sizeof(cplx) * (size_t)p->m);
    p->zf = malloc(sizeof(cplx) * (size_t)p->m);
    p->t = malloc(sizeof(cplx) * (size_t)big);
    if (!p->tw || !p->half || !p->z || !p->zf || !p->t) {
        fft_plan_free(p);
        return NULL;
    }
    for (int k = 0; k < p->m; k++) p->tw[k] = unit((double)k / p->m);
    for (int k = 0; k <= p->m; k++) p->half[k] = unit((double)k / n);
    return p;
}

void fft_plan_free(fft_plan *p) {
    if (!p) return;
    free(p->tw);
    free(p->half);
    free(p->z);
    free(p->zf);
    free(p->t);
    free(p);
}

/* A DFT of size 5 in place on a[0..5) (forward: W = e^(-2 pi i / 5)). */
static inline void dft5(cplx *a) {
    static const double c1 = 0.30901699437494742410, c2 = -0.80901699437494742410; /* cos 2pi/5, 4pi/5 */
    static const double t1 = 0.95105651629515357212, t2 = 0.58778525229247312917; /* sin 2pi/5, 4pi/5 */
    const cplx s1 = cadd(a[1], a[4]), d1 = csub(a[1], a[4]), s2 = cadd(a[2], a[3]), d2 = csub(a[2], a[3]);
    const cplx e1 = {a[0].re + c1 * s1.re + c2 * s2.re, a[0].im + c1 * s1.im + c2 * s2.im};
    const cplx e2 = {a[0].re + c2 * s1.re + c1 * s2.re, a[0].im + c2 * s1.im + c1 * s2.im};
    const cplx o1 = {t1 * d1.re + t2 * d2.re, t1 * d1.im + t2 * d2.im}; /* X1 = e1 - i o1 */
    const cplx o2 = {t2 * d1.re - t1 * d2.re, t2 * d1.im - t1 * d2.im}; /* X2 = e2 - i o2 */
    a[0] = cadd(a[0], cadd(s1, s2));
    a[1] = (cplx){e1.re + o1.im, e1.im - o1.re};
    a[4] = (cplx){e1.re - o1.im, e1.im + o1.re};
    a[2] = (cplx){e2.re + o2.im, e2.im - o2.re};
    a[3] = (cplx){e2.re - o2.im, e2.im + o2.re};
}

/* The butterflies combining r transforms of length sub (out[j sub .. j sub + sub)) into one of
 * length len = r sub; W_len^x is tw[x * step]. */
static void combine(fft_plan *p, cplx *out, int r, int sub, int step) {
    const cplx *tw = p->tw;
    for (int k = 0; k < sub; k++) {
        if (r == 5) {
            cplx a[5];
            a[0] = out[k];
            for (int j = 1; j < 5; j++) a[j] = cmul(out[k + j * sub], tw[(size_t)j * k * step]);
            dft5(a);
            for (int j = 0; j < 5; j++) out[k + j * sub] = a[j];
        } else if (r == 2) {
            const cplx a = out[k], b = cmul(out[k + sub], tw[(size_t)k * step]);
            out[k] = cadd(a, b);
            out[k + sub] = csub(a, b);
        } else if (r == 4) {
            const cplx a0 = out[k], a1 = cmul(out[k + sub], tw[(size_t)k * step]);
            const cplx a2 = cmul(out[k + 2 * sub], tw[(size_t)2 * k * step]);
            const cplx a3 = cmul(out[k + 3 * sub], tw[(size_t)3 * k * step]);
            const cplx s02 = cadd(a0, a2), d02 = csub(a0, a2), s13 = cadd(a1, a3), d13 = csub(a1, a3);
            const cplx md13 = {d13.im, -d13.re}; /* -i (a1 - a3) */
            out[k] = cadd(s02, s13);
            out[k + sub] = cadd(d02, md13);
            out[k + 2 * sub] = csub(s02, s13);
            out[k + 3 * sub] = csub(d02, md13);
        } else { /* a DFT of size r; W_r^y = W_len^(y sub) */
            for (int j = 0; j < r; j++) p->t[j] = cmul(out[k + (size_t)j * sub], tw[(size_t)j * k * step]);
            const size_t unit = (size_t)sub * step; /* W_r in the table */
            for (int q = 0; q < r; q++) {
                cplx s = p->t[0];
                for (int j = 1, jq = q; j < r; j++, jq = jq + q >= r ? jq + q - r : jq + q) /* jq = j q mod r */
                    s = cadd(s, cmul(p->t[j], tw[jq * unit]));
                out[k + (size_t)q * sub] = s;
            }
        }
    }
}

/* out[0..len) = the DFT of in[0], in[s], in[2s], ... (len values); f: len's factors. */
static void transform(fft_plan *p, cplx *out, const cplx *in, size_t s, int len, const int *f) {
    const int r = f[0], sub = len / r;
    if (sub == 1)
        for (int k = 0; k < r; k++) out[k] = in[(size_t)k * s];
    else
        for (int j = 0; j < r; j++) transform(p, out + (size_t)j * sub, in + (size_t)j * s, s * r, sub, f + 1);
    combine(p, out, r, sub, p->m / len);
}

void fft_real(fft_plan *p, const double *x, double *out) {
    const int m = p->m;
    for (int j = 0; j < m; j++) p->z[j] = (cplx){x[2 * j], x[2 * j + 1]};
    if (p->nf) transform(p, p->zf, p->z, 1, m, p->factor);
    else p->zf[0] = p->z[0];
    /* Z = E + i O (E, O: the transforms of the even and odd samples); X[k] = E[k] + W_n^k O[k] */
    for (int k = 0; k <= m; k++) {
        const cplx a = p->zf[k < m ? k : 0], b = p->zf[k > 0 ? m - k : 0];
        const cplx e = {(a.re + b.re) / 2, (a.im - b.im) / 2};
        const cplx o = {(a.im + b.im) / 2, -(a.re - b.re) / 2};
        const cplx x_k = cadd(e, cmul(p->half[k], o));
        out[2 * k] = x_k.re;
        out[2 * k + 1] = x_k.im;
    }
}
