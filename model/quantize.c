/* attend_quantize: an f32/f16 checkpoint rewritten with int8 matrices (one f32 scale per
 * row), the same bytes `export_marian.py --dtype int8` writes for the same weights. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/kernels.h"
#include "../weights/gguf_write.h"
#include "align.h"
#include "attend.h"
#include "seq2seq.h"

/* Element i of an f32/f16 tensor. */
static float element(const gguf_tensor *t, uint64_t i) {
    return t->type == GGUF_T_F16 ? at_f16_to_f32_1(((const uint16_t *)t->data)[i]) : ((const float *)t->data)[i];
}

/* Row r of a 2-D f32/f16 tensor (finite: the loader checked) -> int8 + scale, exactly as
 * export_marian.quantize_rows: scale = max|w| / 127, q = rint(w / scale) in f32, clipped
 * to ±127. */
static void quantize_matrix(const gguf_tensor *t, int8_t *q, float *scale) {
    const uint64_t cols = t->ne[0], rows = t->ne[1];
    float *row = malloc(sizeof(float) * cols);
    for (uint64_t r = 0; row && r < rows; r++) {
        for (uint64_t c = 0; c < cols; c++) row[c] = element(t, r * cols + c);
        float amax = 0;
        for (uint64_t c = 0; c < cols; c++) amax = fabsf(row[c]) > amax ? fabsf(row[c]) : amax;
        const float s = amax / 127.0f, safe = s > 0 ? s : 1.0f;
        scale[r] = s;
        for (uint64_t c = 0; c < cols; c++) {
            float v = nearbyintf(row[c] / safe);
            q[r * cols + c] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    free(row);
}

int attend_quantize(const char *in_path, const char *out_path, char *err, size_t errlen) {
    /* a whole, valid model, CRC-32s and finite weights included: a corrupted file is not
     * re-written with fresh checksums, and NaN is never converted to int8 (undefined) */
    char inner[400];
    s2s_model *m = s2s_load_verified(in_path, inner, sizeof inner);
    if (!m) {
        snprintf(err, errlen, "%.200s: %s", in_path, inner);
        return ATTEND_E_MODEL;
    }
    if (m->dtype == AT_I8) {
        snprintf(err, errlen, "%.400s is already int8", in_path);
        s2s_free(m);
        return ATTEND_E_USAGE;
    }
    const gguf_file *in = m->file;
    const int n_in = (int)gguf_tensor_count(in);
    gguf_out_tensor *t = calloc((size_t)n_in * 2, sizeof *t);
    int nt = 0, status = 0;
    for (int i = 0; t && i < n_in; i++) {
        const gguf_tensor *s = gguf_tensor_at(in, i);
        gguf_out_tensor *o = &t[nt++];
        o->name = strdup(s->name);
        o->n_dims = s->n_dims;
        memcpy(o->ne, s->ne, sizeof o->ne);
        /* every matrix: int8 + scales; vectors stay f32, and so does the alignment head (f32 only) */
        const int head = !strncmp(s->name, ATTEND_ALIGN_HEAD_TENSORS ".", strlen(ATTEND_ALIGN_HEAD_TENSORS) + 1);
        if (s->n_dims == 2 && !head) {
            o->type = GGUF_T_I8;
            o->nbytes = s->ne[0] * s->ne[1];
            o->data = malloc(o->nbytes);
            gguf_out_tensor *sc = &t[nt++];
            size_t nl = strlen(s->name) + 7;
            sc->name = malloc(nl);
            if (sc->name) snprintf(sc->name, nl, "%s.scale", s->name);
            sc->n_dims = 1;
            sc->ne[0] = s->ne[1];
            sc->type = GGUF_T_F32;
            sc->nbytes = 4 * s->ne[1];
            sc->data = malloc(sc->nbytes);
            if (!o->data || !sc->data || !sc->name) break;
            quantize_matrix(s, o->data, sc->data);
        } else {
            o->type = s->type;
            o->nbytes = s->nbytes;
            o->data = malloc(s->nbytes ? s->nbytes : 1);
            if (!o->data) break;
            memcpy(o->data, s->data, s->nbytes);
        }
        if (!o->name) break;
    }
    int complete = t && nt > 0 && t[nt - 1].data;
    for (int i = 0; complete && i < nt; i++) complete = t[i].data && t[i].name;
    if (!complete || (nt < n_in)) {
        snprintf(err, errlen, "out of memory");
        status = ATTEND_E_MEMORY;
    } else if (gguf_write_like(out_path, in, t, nt, err, errlen)) {
        status = ATTEND_E_IO;
    }
    for (int i = 0; t && i < nt; i++) {
        free(t[i].name);
        free(t[i].data);
    }
    free(t);
    s2s_free(m);
    return status;
}
