/* The vocabularies through the public API (attend.h): sizes, id -> piece, piece -> id. */
#include "attend_model.h"

static const vocab *side_vocab(const attend_model *m, int side) {
    if (!m || !m->m) return NULL;
    return side == ATTEND_SOURCE ? m->m->src_vocab : side == ATTEND_TARGET ? m->m->tgt_vocab : NULL;
}

int attend_vocab_size(const attend_model *m, int side) {
    const vocab *v = side_vocab(m, side);
    return v ? vocab_size(v) : -1;
}

const char *attend_id_to_piece(const attend_model *m, int side, int id) {
    const vocab *v = side_vocab(m, side);
    return v && id >= 0 ? vocab_piece(v, id) : NULL;
}

int attend_piece_to_id(const attend_model *m, int side, const char *piece, size_t len) {
    const vocab *v = side_vocab(m, side);
    return v && piece ? vocab_id(v, piece, len) : -1;
}
