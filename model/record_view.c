/* attend_record_view: a copy of a model file whose metadata records the attention view its
 * word alignments use by default (align.h's ATTEND_ALIGNMENT_VIEW_KEY). The tensors and every
 * other key are copied byte for byte; the metadata CRC-32 is recomputed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../weights/gguf_write.h"
#include "align.h"
#include "attend.h"
#include "seq2seq.h"

int attend_record_view(const char *in_path, const char *out_path, const char *view, char *err, size_t errlen) {
    char inner[400], canonical[ATTEND_VIEW_TEXT_MAX];
    attend_view v;
    if (attend_view_parse(view ? view : "", &v, err, errlen)) return ATTEND_E_USAGE;
    attend_view_name(&v, canonical, sizeof canonical); /* "1:2,shift": spaces gone */
    /* a whole, valid model: a corrupted file is not re-written with fresh checksums */
    s2s_model *m = s2s_load_verified(in_path, inner, sizeof inner);
    if (!m) {
        snprintf(err, errlen, "%.200s: %s", in_path, inner);
        return ATTEND_E_MODEL;
    }
    int status = 0;
    if (attend_view_check(&v, m->c.dec_layers, m->c.dec_heads, err, errlen)) {
        s2s_free(m);
        return ATTEND_E_USAGE;
    }
    if (v.align && !m->c.align_head_width) {
        snprintf(err, errlen, "view '%s' names the alignment head (align), and %.200s has none", canonical, in_path);
        s2s_free(m);
        return ATTEND_E_USAGE;
    }
    const gguf_file *in = m->file;
    const int nt = (int)gguf_tensor_count(in);
    gguf_out_tensor *t = calloc((size_t)nt + 1, sizeof *t);
    for (int i = 0; t && i < nt; i++) { /* the mapped data as it is (not owned here) */
        const gguf_tensor *s = gguf_tensor_at(in, i);
        t[i] = (gguf_out_tensor){s->name, s->n_dims, s->type, {0}, (void *)s->data, s->nbytes};
        memcpy(t[i].ne, s->ne, sizeof t[i].ne);
    }
    const gguf_write_changes ch = {1, ATTEND_ALIGNMENT_VIEW_KEY, canonical};
    if (!t) {
        snprintf(err, errlen, "out of memory");
        status = ATTEND_E_MEMORY;
    } else if (gguf_write_with(out_path, in, t, nt, &ch, err, errlen)) {
        status = ATTEND_E_IO;
    }
    free(t);
    s2s_free(m);
    return status;
}
