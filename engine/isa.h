/* isa: which kernel sets this build has and this CPU can run (CPUID, checked at run time). */
#ifndef ATTEND_ISA_H
#define ATTEND_ISA_H

#include "kernels.h"

/* The fastest kernel set the CPU supports. */
const at_kernels *at_isa_best(void);
/* A kernel set by name ("generic", "avx2", "avx512") if the CPU supports it, else NULL. */
const at_kernels *at_isa_by_name(const char *name);
/* Names of the kernel sets this CPU supports, e.g. "generic avx2 avx512". */
const char *at_isa_list(void);
/* 1 if the CPU (and OS) support a feature: "avx2" (with FMA, F16C), "avx512" (F, BW, VL,
 * DQ), "avx512vnni", "avxvnni", "amx" (tiles and int8, with the OS's permission; off when
 * $ATTEND_AMX is 0); else 0. */
int at_cpu_has(const char *feature);
/* 1 if int8 matrices are packed as VNNI panels (kernels.h) for the active kernel set: the
 * avx512 set on a CPU with AVX-512 VNNI. */
int at_isa_vnni_panels(void);
/* What the active kernel set's int8 linear layers run on: "amx" (tiles, from a few rows on),
 * "avx512vnni", "avx2" (vpmaddubsw) or "generic". */
const char *at_isa_int8_path(void);
/* Pretend the CPU lacks a feature ("avx512vnni", "avxvnni" or "amx"), so the tests run the paths
 * older CPUs take on this one. */
void at_cpu_mask(const char *feature);

#endif
