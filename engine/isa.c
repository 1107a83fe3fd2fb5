/* Kernel-set selection from CPUID, checked at run time: a set is offered only if the CPU has
 * its instructions and the OS saves the registers they use (XGETBV), so one binary runs on
 * any x86-64 and picks the fastest path it can. */
#include "isa.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define AT_X86 1
extern const at_kernels at_kernels_avx2, at_kernels_avx512;
#endif

typedef struct {
    int avx2;       /* AVX2 + FMA + F16C, YMM state enabled */
    int avx512;     /* AVX-512 F/BW/VL/DQ, ZMM and mask state enabled */
    int avx512vnni; /* vpdpbusd on zmm */
    int avxvnni;    /* vpdpbusd on ymm (VEX) */
    int avx512bf16; /* vdpbf16ps on zmm (bf16 compute) */
    int amx;        /* AMX tiles with tdpbusd, tile state enabled, and this process allowed */
} cpu_features;

static cpu_features cpu;
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;

/* Linux hands out AMX's 8 KiB of tile state only to processes that ask (arch_prctl
 * ARCH_REQ_XCOMP_PERM for XTILEDATA, once, for all threads); a tile instruction without it
 * is a fatal signal. */
static int amx_permitted(void) {
#if defined(__linux__) && defined(SYS_arch_prctl)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}

/* CPUID once per process, before any thread reads the result */
static void probe_cpu(void) {
#ifdef AT_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    const int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return;
    unsigned xlo, xhi;
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const int ymm_os = (xlo & 0x6) == 0x6, zmm_os = (xlo & 0xe6) == 0xe6;
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    const int avx2 = (b >> 5) & 1, f = (b >> 16) & 1, dq = (b >> 17) & 1, bw = (b >> 30) & 1,
              vl = (b >> 31) & 1, vnni = (c >> 11) & 1;
    unsigned a1, b1, c1, d1;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    cpu.avx2 = ymm_os && avx2 && fma && f16c;
    cpu.avx512 = cpu.avx2 && zmm_os && f && dq && bw && vl;
    cpu.avx512vnni = cpu.avx512 && vnni;
    cpu.avxvnni = cpu.avx2 && ((a1 >> 4) & 1);
    cpu.avx512bf16 = cpu.avx512 && ((a1 >> 5) & 1);
    const int amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1, tile_os = (xlo & 0x60000) == 0x60000;
    const char *no_amx = getenv("ATTEND_AMX");
    cpu.amx = cpu.avx512vnni && amx_tile && amx_int8 && tile_os && !(no_amx && !strcmp(no_amx, "0")) &&
              amx_permitted();
#endif
}

static void probe(void) { pthread_once(&probe_once, probe_cpu); }

int at_cpu_has(const char *feature) {
    probe();
    if (strcmp(feature, "avx2") == 0) return cpu.avx2;
    if (strcmp(feature, "avx512") == 0) return cpu.avx512;
    if (strcmp(feature, "avx512vnni") == 0) return cpu.avx512vnni;
    if (strcmp(feature, "avxvnni") == 0) return cpu.avxvnni;
    if (strcmp(feature, "amx") == 0) return cpu.amx;
    if (strcmp(feature, "avx512bf16") == 0) return cpu.avx512bf16;
    return 0;
}

void at_cpu_mask(const char *feature) {
    probe();
    if (strcmp(feature, "avx512vnni") == 0) cpu.avx512vnni = 0;
    if (strcmp(feature, "avxvnni") == 0) cpu.avxvnni = 0;
    if (strcmp(feature, "amx") == 0) cpu.amx = 0;
    if (strcmp(feature, "avx512bf16") == 0) cpu.avx512bf16 = 0;
}

int at_isa_vnni_panels(void) {
    probe();
#ifdef AT_X86
    return at_k() == &at_kernels_avx512 && cpu.avx512vnni;
#else
    return 0;
#endif
}

const char *at_isa_int8_path(void) {
    probe();
#ifdef AT_X86
    const at_kernels *k = at_k();
    if (k == &at_kernels_avx512) return cpu.amx ? "amx" : cpu.avx512vnni ? "avx512vnni" : "avx2";
    if (k == &at_kernels_avx2) return "avx2";
#endif
    return "generic";
}

const at_kernels *at_isa_best(void) {
    probe();
#ifdef AT_X86
    if (cpu.avx512) return &at_kernels_avx512;
    if (cpu.avx2) return &at_kernels_avx2;
#endif
    return &at_kernels_generic;
}

const at_kernels *at_isa_by_name(const char *name) {
    probe();
    if (strcmp(name, "generic") == 0) return &at_kernels_generic;
#ifdef AT_X86
    if (strcmp(name, "avx2") == 0 && cpu.avx2) return &at_kernels_avx2;
    if (strcmp(name, "avx512") == 0 && cpu.avx512) return &at_kernels_avx512;
#endif
    return NULL;
}

const char *at_isa_list(void) {
    probe();
    if (cpu.avx512) return "generic avx2 avx512";
    if (cpu.avx2) return "generic avx2";
    return "generic";
}
