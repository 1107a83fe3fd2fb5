/* bench_peak: register-only loops that time the CPU's multiply-add throughput. Each loop keeps
 * 12 independent accumulators (more than latency x ports on current cores), touches no
 * memory, and returns a value derived from every accumulator so the compiler keeps all the
 * work. Each function carries its own target attribute; the caller only runs the loops of
 * the kernel set attend selected (attend_isa(): the CPU and the OS support it), and VNNI
 * where __builtin_cpu_supports finds it. */
#include "bench_peak.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>


#if defined(__x86_64__) && !defined(__clang__)
#include <immintrin.h>
#define PEAK_X86 1
#endif

#define ACCS 12         /* accumulators per loop */
#define ITERS (1 << 18) /* loop trips per call: ACCS * ITERS instructions, about 1 ms */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

#ifdef PEAK_X86
/* The accumulators stay in registers because the loop body is fully unrolled over them. */
#define PEAK_LOOP(T, ZERO, STEP, FOLD, RESULT)                              \
    T acc[ACCS];                                                           \
    for (int j = 0; j < ACCS; j++) acc[j] = ZERO;                          \
    for (long i = 0; i < ITERS; i++) {                                     \
        _Pragma("GCC unroll 12") for (int j = 0; j < ACCS; j++) STEP;      \
    }                                                                      \
    T s = acc[0];                                                          \
    for (int j = 1; j < ACCS; j++) s = FOLD(s, acc[j]);                    \
    return RESULT(s);

/* 16 lanes x 2 flops per vfmadd zmm */
__attribute__((target("avx512f"))) static float fma_zmm(float seed) {
    const __m512 a = _mm512_set1_ps(seed), b = _mm512_set1_ps(1.0f - seed);
    PEAK_LOOP(__m512, _mm512_set1_ps(seed), acc[j] = _mm512_fmadd_ps(acc[j], a, b), _mm512_add_ps,
              _mm512_reduce_add_ps)
}

/* 8 lanes x 2 flops per vfmadd ymm */
__attribute__((target("avx2,fma"))) static float fma_ymm(float seed) {
    const __m256 a = _mm256_set1_ps(seed), b = _mm256_set1_ps(1.0f - seed);
#define YMM_LOW(v) _mm_cvtss_f32(_mm256_castps256_ps128(v))
    PEAK_LOOP(__m256, _mm256_set1_ps(seed), acc[j] = _mm256_fmadd_ps(acc[j], a, b), _mm256_add_ps, YMM_LOW)
#undef YMM_LOW
}

/* 64 byte products x 2 ops per vpdpbusd zmm */
__attribute__((target("avx512f,avx512vnni"))) static float vnni_zmm(float seed) {
    const __m512i a = _mm512_set1_epi8((char)(int)seed), b = _mm512_set1_epi8(3);
#define ZMM_LOW(v) (float)_mm_cvtsi128_si32(_mm512_castsi512_si128(v))
    PEAK_LOOP(__m512i, _mm512_setzero_si512(), acc[j] = _mm512_dpbusd_epi32(acc[j], a, b), _mm512_add_epi32,
              ZMM_LOW)
#undef ZMM_LOW
}

/* 32 bf16 products (16 pairs) x 2 flops per vdpbf16ps zmm */
__attribute__((target("avx512f,avx512bf16"))) static float dpbf16_zmm(float seed) {
    const __m512bh a = (__m512bh)_mm512_set1_epi16((short)0x3f80), b = (__m512bh)_mm512_set1_epi16((short)0x3c00);
    PEAK_LOOP(__m512, _mm512_set1_ps(seed), acc[j] = _mm512_dpbf16_ps(acc[j], a, b), _mm512_add_ps,
              _mm512_reduce_add_ps)
}

/* 16 x 16 outputs x 64 byte products x 2 ops per tdpbusd: four accumulator tiles (the
 * kernel's blocking), two input and two weight tiles; tile configuration is per thread */
#define AMX_TRIPS (ITERS / 16) /* a tdpbusd takes about 16 cycles */
__attribute__((target("amx-tile,amx-int8"))) static float amx_tiles(float seed) {
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    static _Thread_local int8_t src[16 * 64] __attribute__((aligned(64)));
    static _Thread_local int32_t out[16 * 16] __attribute__((aligned(64)));
    memset(src, (int)seed, sizeof src);
    _tile_loadconfig(&cfg);
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    _tile_loadd(4, src, 64);
    _tile_loadd(5, src, 64);
    _tile_loadd(6, src, 64);
    _tile_loadd(7, src, 64);
    for (long i = 0; i < AMX_TRIPS; i++) {
        _tile_dpbusd(0, 4, 6);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(2, 5, 6);
        _tile_dpbusd(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return (float)out[0];
}

/* AVX2's int8 step (as kernels_avx2.c runs it): vpmaddubsw forms 16-bit pair sums of 32
 * byte products, vpmaddwd widens them, vpaddd accumulates: 32 products x 2 ops a step. The
 * bytes change every trip and each accumulator has its own weights, so no product can be
 * hoisted out of the loop or shared. */
__attribute__((target("avx2"))) static float maddubs_ymm(float seed) {
    const __m256i one16 = _mm256_set1_epi16(1), one8 = _mm256_set1_epi8(1);
    __m256i x = _mm256_set1_epi8((char)(int)seed), acc[ACCS];
    for (int j = 0; j < ACCS; j++) acc[j] = _mm256_setzero_si256();
    for (long i = 0; i < ITERS; i++) {
        x = _mm256_and_si256(_mm256_add_epi8(x, one8), _mm256_set1_epi8(0x3f));
        _Pragma("GCC unroll 12") for (int j = 0; j < ACCS; j++)
            acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(_mm256_maddubs_epi16(x, _mm256_set1_epi8((char)(j + 1))), one16));
    }
    __m256i s = acc[0];
    for (int j = 1; j < ACCS; j++) s = _mm256_add_epi32(s, acc[j]);
    return (float)_mm_cvtsi128_si32(_mm256_castsi256_si128(s));
}
#endif

/* Ops per second of loop(seed) run by `threads` threads at once, best of 15 (other jobs on
 * the machine only ever make a run slower, and on a shared machine a short run is the likelier
 * one to find every core free). ops_per_call counts one call's work. */
typedef struct {
    float (*loop)(float);
    float seed, result;
    const int *go; /* the threads start together, when the caller sets it */
} probe_thread;

static void *run_probe(void *arg) {
    probe_thread *p = arg;
    while (!__atomic_load_n(p->go, __ATOMIC_ACQUIRE)) {
    }
    p->result = p->loop(p->seed);
    return NULL;
}

static double time_loop(float (*loop)(float), double ops_per_call, int threads) {
    enum { MAX_PROBE_THREADS = 256 };
    if (threads > MAX_PROBE_THREADS) threads = MAX_PROBE_THREADS;
    double best = 0;
    volatile float sink = 0;
    probe_thread pt[MAX_PROBE_THREADS];
    pthread_t tid[MAX_PROBE_THREADS];
    for (int rep = 0; rep < 16; rep++) { /* the first run warms up the vector units' clocks */
        int go = 0, running = 1;
        for (int k = 0; k < threads; k++) pt[k] = (probe_thread){loop, 2.0f + (float)k, 0, &go};
        while (running < threads && pthread_create(&tid[running], NULL, run_probe, &pt[running]) == 0) running++;
        const double t0 = now();
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        pt[0].result = loop(pt[0].seed);
        for (int k = 1; k < running; k++) pthread_join(tid[k], NULL);
        const double dt = now() - t0;
        for (int k = 0; k < running; k++) sink = sink + pt[k].result;
        if (rep > 0 && dt > 0 && ops_per_call * running / dt > best) best = ops_per_call * running / dt;
    }
    (void)sink;
    return best;
}

compute_peak measure_compute_peak(const char *isa, int amx, int bf16, int threads) {
    compute_peak p;
    memset(&p, 0, sizeof p);
    p.f32_how = p.i8_how = "none";
    if (threads < 1) threads = 1;
#ifdef PEAK_X86
    const double steps = (double)ACCS * ITERS;
    if (!strcmp(isa, "avx512")) {
        p.f32_gflops = time_loop(fma_zmm, steps * 16 * 2, threads) / 1e9;
        p.f32_how = "vfmadd zmm";
    } else if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2"))) {
        p.f32_gflops = time_loop(fma_ymm, steps * 8 * 2, threads) / 1e9;
        p.f32_how = "vfmadd ymm";
    }
    /* the same choice as simd_linear_i8: VNNI inside the avx512 set when the CPU has it */
    if (!strcmp(isa, "avx512") && __builtin_cpu_supports("avx512vnni")) {
        p.i8_gops = time_loop(vnni_zmm, steps * 64 * 2, threads) / 1e9;
        p.i8_how = "vpdpbusd zmm";
    } else if ((!strcmp(isa, "avx512") || !strcmp(isa, "avx2"))) {
        p.i8_gops = time_loop(maddubs_ymm, steps * 32 * 2, threads) / 1e9;
        p.i8_how = "vpmaddubsw+vpmaddwd ymm";
    }
    if (amx) p.amx_gops = time_loop(amx_tiles, (double)AMX_TRIPS * 4 * 16 * 16 * 64 * 2, threads) / 1e9;
    if (bf16 && !strcmp(isa, "avx512") && __builtin_cpu_supports("avx512bf16"))
        p.bf16_gflops = time_loop(dpbf16_zmm, steps * 32 * 2, threads) / 1e9;
#else
    (void)isa, (void)amx, (void)bf16;
#endif
    return p;
}
