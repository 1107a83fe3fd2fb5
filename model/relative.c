/* T5's relative position bias (pos_kind POS_RELATIVE): each distance key - query falls in a
 * bucket, exact for short distances and logarithmic up to max_distance, and each bucket has
 * a learned bias per head, added to that head's attention scores in every layer of the
 * stack. The encoder's buckets are bidirectional (half of them for keys after the query),
 * the decoder's causal. */
#include "layers.h"

#include <math.h>

/* The bucket of distance rel = key position - query position, computed in float32 as HF's
 * T5Attention._relative_position_bucket does (the log, the division by the log of
 * max_distance / max_exact and the truncation toward zero). */
int s2s_relative_bucket(int rel, int bidirectional, int buckets, int max_distance) {
    int base = 0;
    if (bidirectional) {
        buckets /= 2;
        if (rel > 0) base = buckets;
        rel = rel < 0 ? -rel : rel;
    } else {
        rel = rel < 0 ? -rel : 0;
    }
    const int max_exact = buckets / 2;
    if (rel < max_exact) return base + rel;
    const float ratio = (float)rel / (float)max_exact;
    const float span = (float)log((double)max_distance / max_exact);
    const float v = logf(ratio) / span * (float)(buckets - max_exact);
    const long large = max_exact + (long)v;
    return base + (int)(large < buckets - 1 ? large : buckets - 1);
}

void s2s_relative_bias(const s2s_model *m, int dec, int rel_lo, int n, float *out, ptrdiff_t stride_h) {
    const s2s_config *c = &m->c;
    const int H = dec ? c->dec_heads : c->enc_heads;
    const float *w = dec ? m->dec_rel_bias : m->enc_rel_bias;
    for (int k = 0; k < n; k++) {
        const int b = s2s_relative_bucket(rel_lo + k, !dec, c->rel_buckets, c->rel_max_distance);
        for (int h = 0; h < H; h++) out[h * stride_h + k] = w[(size_t)b * H + h];
    }
}
