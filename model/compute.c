/* Compute types (attend_load_params.compute_type, `--compute`): the file's own matrices with
 * f32 arithmetic (the default), or bf16 (issue 37): f32 / f16 matrices converted to bf16 at
 * load and run on AVX-512 BF16. Names as CTranslate2's compute_type spells them too. */
#include "compute.h"
#include "load.h"
#include "../engine/bf16.h"
#include "../engine/isa.h"

#include <stdio.h>
#include <string.h>

int s2s_compute_parse(const char *name, char *err, size_t errlen) {
    if (!name || !*name || !strcmp(name, "auto") || !strcmp(name, "default") || !strcmp(name, "f32") ||
        !strcmp(name, "float32") || !strcmp(name, "float"))
        return S2S_COMPUTE_FILE;
    if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16")) return S2S_COMPUTE_BF16;
    snprintf(err, errlen, "compute type '%.40s': must be f32, bf16 or auto (bfloat16, float32, default too)", name);
    return -1;
}

const char *s2s_bf16_missing(void) {
    if (!at_cpu_has("avx512bf16")) return "this CPU lacks AVX-512 BF16 (avx512_bf16 in /proc/cpuinfo)";
    if (!at_bf16_available()) return "it needs the avx512 kernel set, and $ATTEND_ISA chose a lower one";
    return NULL;
}

s2s_model *s2s_load_compute(const char *path, int compute, char *err, size_t errlen) {
    if (compute == S2S_COMPUTE_FILE) return s2s_load_for_inference(path, err, errlen);
    const char *missing = s2s_bf16_missing();
    if (missing) {
        snprintf(err, errlen, "compute type bf16: %s; use f32", missing);
        return NULL;
    }
    s2s_model *m = s2s_load_verified(path, err, errlen);
    if (m && m->dtype == AT_I8) {
        snprintf(err, errlen, "compute type bf16: the file's matrices are int8 (bf16 converts f32 or f16 files)");
        s2s_free(m);
        return NULL;
    }
    if (m) m->bf16 = 1;
    if (m && s2s_pack(m, err, errlen)) {
        s2s_free(m);
        return NULL;
    }
    return m;
}
