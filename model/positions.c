/* Token positions as vectors, by the family's pos_kind: Marian's and fairseq's sinusoids
 * (the first rows cached at load, the rest computed identically on demand) and mBART's
 * learned tables; and how each family numbers a token's position. */
#include "load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void position_row_marian(float *row, int pos, int d) {
    const int half = d / 2;
    for (int j = 0; j < d; j++) {
        /* column j has angle pos / 10000^(2*(j//2)/d); even columns' sines fill the
         * first half, odd columns' cosines the second half (HF Marian) */
        double angle = pos / pow(10000.0, 2.0 * (j / 2) / d);
        if (j % 2 == 0) row[j / 2] = (float)sin(angle);
        else row[half + j / 2] = (float)cos(angle);
    }
}

/* fairseq's table (HF M2M100SinusoidalPositionalEmbedding.get_embedding), in float32 as
 * torch computes it: frequencies exp(j * -log(10000)/(half-1)), angles pos * frequency. */
static void position_row_fairseq(float *row, int pos, int d, int pad) {
    const int half = d / 2;
    const float step = (float)(log(10000.0) / (half - 1));
    for (int j = 0; j < half; j++) {
        const float angle = (float)pos * expf((float)j * -step);
        row[j] = pos == pad ? 0.0f : sinf(angle);
        row[half + j] = pos == pad ? 0.0f : cosf(angle);
    }
    if (d % 2) row[d - 1] = 0.0f;
}

static void position_row(const s2s_config *c, float *row, int pos) {
    if (c->family->positions == POS_FAIRSEQ) position_row_fairseq(row, pos, c->d_model, c->pad_id);
    else position_row_marian(row, pos, c->d_model);
}

/* The first rows of the table, computed once at load: a file may declare up to 65,536
 * positions, and a table that size would be out of proportion to a small model. */
int s2s_positions_init(s2s_model *m) {
    const s2s_config *c = &m->c;
    /* fairseq numbers positions from pad_id + 1; learned positions are stored, not computed */
    const int used = c->family->positions == POS_LEARNED || c->family->positions == POS_RELATIVE ? 1
                     : c->max_pos + (c->family->positions == POS_FAIRSEQ ? c->pad_id + 1 : 0);
    m->n_positions = used < S2S_POSITIONS_CACHED ? used : S2S_POSITIONS_CACHED;
    m->positions = malloc(sizeof(float) * (size_t)m->n_positions * c->d_model);
    if (!m->positions) return -1;
    for (int pos = 0; pos < m->n_positions; pos++) position_row(c, m->positions + (size_t)pos * c->d_model, pos);
    return 0;
}

const float *s2s_position(const s2s_model *m, int dec, int pos, float *buf) {
    if (m->c.family->positions == POS_RELATIVE) { /* T5: positions enter as attention biases */
        memset(buf, 0, sizeof(float) * (size_t)m->c.d_model);
        return buf;
    }
    if (m->c.family->positions == POS_LEARNED) { /* mBART's offset of 2 rows, Whisper's 0 */
        const at_matrix *table = dec ? &m->dec_pos : &m->enc_pos;
        const int row = pos + m->c.family->pos_offset;
        if (pos < 0 || row >= table->rows) memset(buf, 0, sizeof(float) * (size_t)m->c.d_model);
        else at_matrix_row(buf, table, row);
        return buf;
    }
    if (pos < m->n_positions) return m->positions + (size_t)pos * m->c.d_model;
    position_row(&m->c, buf, pos);
    return buf;
}

int s2s_position_of(const s2s_config *c, int id, int i, int pads_before) {
    if (c->family->positions != POS_FAIRSEQ) return i;
    return id == c->pad_id ? c->pad_id : i - pads_before + c->pad_id + 1;
}
