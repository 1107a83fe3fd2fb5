/* bench_peak: the arithmetic peak of this CPU, measured by register-only loops, so bench can
 * say what fraction of it the linear layers reach. */
#ifndef ATTEND_BENCH_PEAK_H
#define ATTEND_BENCH_PEAK_H

typedef struct {
    double f32_gflops; /* f32 fused multiply-adds, 2 flops each; 0 if not measured */
    double i8_gops;    /* int8 multiply-adds (u8 x s8 summed into int32), 2 ops each; 0 if not measured */
    const char *f32_how, *i8_how; /* the instructions timed, e.g. "vfmadd zmm", "vpdpbusd zmm" */
    double amx_gops;   /* int8 multiply-adds with AMX tiles (tdpbusd); 0 if not measured */
    double bf16_gflops; /* bf16 pair products summed in f32 (vdpbf16ps zmm), 2 flops each; 0 if not measured */
} compute_peak;

/* Best of a few runs of each loop on `threads` threads at once, with the widest instructions
 * the kernel set `isa` ("generic", "avx2", "avx512") uses and the CPU has: AVX-512 FMA and
 * VNNI vpdpbusd, or AVX2 FMA and vpmaddubsw + vpmaddwd + vpaddd (what the int8 kernels run
 * without VNNI). The generic set gets no probe (all zero). With amx set (the int8 layers run
 * on AMX; the process already has the OS's permission) also tdpbusd on tiles; with bf16 set
 * (the bf16 compute type runs) also AVX-512 BF16's vdpbf16ps. Takes about a tenth of a second. */
compute_peak measure_compute_peak(const char *isa, int amx, int bf16, int threads);

#endif
