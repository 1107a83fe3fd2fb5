/* Greedy choice (model/search.c) against a plain reference: the processors applied to a copy
 * of the row, then the argmax loop (first of equals, NaN never wins); without processors
 * release 1's rule (argmax between the <pad> ids). greedy_choose edits the row in place, so
 * the row must come back bit for bit, and the argmax it reports must be the raw row's. On
 * every kernel set, with ties, NaN, infinities, small vocabularies (the copying path) and
 * every processor. Prints "N passed, M failed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/isa.h"
#include "../engine/kernels.h"
#include "../model/search.h"
#include "check.h"

static unsigned rng_state = 2024;

static unsigned rnd(unsigned n) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (rng_state >> 8) % n;
}

static int loop_argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* HF's processors in their order, on a copy (what search.c's process does to a work row) */
static void reference_process(const step_ctx *x, float *sc, const prefix *p) {
    const s2s_search *s = x->s;
    const s2s_config *c = x->c;
    const int V = c->decoder_vocab_size, cur_len = x->t + 1, last_step = cur_len == x->max_length - 1;
    if (s->repetition_penalty != 1.0f)
        for (int i = 0; i < p->n; i++) {
            int seen = 0;
            for (int j = 0; j < i; j++) seen |= p->ids[j] == p->ids[i];
            float *v = &sc[p->ids[i]];
            if (!seen) *v = *v < 0 ? *v * s->repetition_penalty : *v / s->repetition_penalty;
        }
    const int ng = s->no_repeat_ngram;
    if (ng > 0 && cur_len + 1 >= ng)
        for (int st = 0; st + ng <= p->n; st++) {
            int same = 1;
            for (int k = 0; k < ng - 1; k++) same &= p->ids[st + k] == p->ids[p->n - (ng - 1) + k];
            if (same) sc[p->ids[st + ng - 1]] = -INFINITY;
        }
    if (c->family->ban_pad) sc[c->pad_id] = -INFINITY;
    if ((cur_len < s->min_length || (x->ignore_eos && !last_step)) && isfinite(sc[c->eos_id])) sc[c->eos_id] = -INFINITY;
    if (s->forced_bos >= 0 && cur_len == 1) {
        for (int j = 0; j < V; j++) sc[j] = -INFINITY;
        sc[s->forced_bos] = 0;
    }
    if (last_step && c->forced_eos) {
        for (int j = 0; j < V; j++) sc[j] = -INFINITY;
        sc[c->eos_id] = 0;
    }
}

/* release 1: the best of each stretch between <pad>s, an earlier stretch winning ties */
static int reference_plain(const step_ctx *x, const float *lg) {
    const s2s_config *c = x->c;
    const int V = c->decoder_vocab_size, pad = c->pad_id;
    if (x->t + 1 == x->max_length - 1 && c->forced_eos) return c->eos_id;
    if (!c->family->ban_pad) return loop_argmax(lg, V);
    int best = -1;
    if (pad > 0) best = loop_argmax(lg, pad);
    if (pad + 1 < V) {
        const int i = pad + 1 + loop_argmax(lg + pad + 1, V - pad - 1);
        if (best < 0 || lg[i] > lg[best]) best = i;
    }
    return best;
}

/* a row: kind 0 random, 1 few values (ties), 2 NaN and infinities sprinkled, 3 the maximum
 * on an id the processors touch (a prefix id, </s> or <pad>), 4 NaN first or after <pad> */
static void make_row(float *lg, int V, int kind, const prefix *p, const s2s_config *c) {
    for (int j = 0; j < V; j++) {
        const int r = (int)rnd(1000);
        lg[j] = kind == 1 ? (float)(r % 4) - 2.0f : (float)(r - 500) / 100.0f;
        if (kind == 2) lg[j] = r < 30 ? NAN : r < 60 ? -INFINITY : r < 65 ? INFINITY : lg[j];
    }
    if (kind == 3) {
        const int pick = (int)rnd(3), id = pick == 0 ? p->ids[rnd((unsigned)p->n)] : pick == 1 ? c->eos_id : c->pad_id;
        lg[id] = 9.0f;
        if (rnd(2)) lg[rnd((unsigned)V)] = 9.0f; /* a tie elsewhere */
        if (rnd(3) == 0) lg[id] = -9.0f;         /* negative: the penalty pushes it down */
    }
    if (kind == 4) {
        lg[0] = NAN;
        if (c->pad_id + 1 < V && rnd(2)) lg[c->pad_id + 1] = NAN, lg[0] = 1.0f;
    }
}

static int trial(const at_kernels *K, int V, int kind, int ban_pad) {
    (void)K;
    static float lg[5000], keep[5000], ref[5000], work[10000];
    static int ids[40];
    s2s_family fam = {0};
    fam.ban_pad = ban_pad;
    s2s_config c = {0};
    c.family = &fam;
    c.decoder_vocab_size = V;
    c.pad_id = (int)rnd((unsigned)V);
    c.eos_id = (int)rnd((unsigned)V);
    c.forced_eos = (int)rnd(2);
    s2s_search s = {0};
    s.beams = 1;
    const float pens[] = {1.0f, 1.0f, 1.3f, 0.7f};
    s.repetition_penalty = pens[rnd(4)];
    s.no_repeat_ngram = (int)rnd(4);
    s.min_length = rnd(2) ? 0 : (int)rnd(8);
    s.forced_bos = rnd(4) ? -1 : (int)rnd((unsigned)V);
    const int ignore_eos = rnd(5) == 0, len = 1 + (int)rnd(30);
    /* prefix ids from a few values, so n-grams repeat and penalties hit */
    const int spread = 2 + (int)rnd(6);
    for (int i = 0; i < len; i++) ids[i] = (int)rnd((unsigned)(spread < V ? spread : V));
    const prefix p = {ids, len};
    const int t = len - 1, max_length = t + 2 + (int)rnd(3); /* the last step sometimes */
    const step_ctx x = {&c, &s, t, max_length, ignore_eos};
    make_row(lg, V, kind, &p, &c);
    memcpy(keep, lg, sizeof(float) * V);
    memcpy(ref, lg, sizeof(float) * V);
    int want;
    if (search_has_processors(&s, ignore_eos)) {
        reference_process(&x, ref, &p);
        want = loop_argmax(ref, V);
    } else {
        want = reference_plain(&x, lg);
    }
    int best = -2;
    const int got = greedy_choose(&x, lg, &p, work, &best);
    int bad = 0;
    if (got != want) bad |= 1;
    if (memcmp(lg, keep, sizeof(float) * V)) bad |= 2;
    if (best != -1 && best != loop_argmax(keep, V)) bad |= 4;
    const int id = (int)rnd((unsigned)V);
    const float a = log_softmax_at(keep, V, id, best), b = log_softmax_at(keep, V, id, -1);
    if (memcmp(&a, &b, sizeof a)) bad |= 8;
    if (bad)
        fprintf(stderr, "[%s] V=%d kind %d ban_pad %d pen %g ngram %d min %d bos %d eos %d t %d/%d: got %d want %d (bad %d)\n",
                K->name, V, kind, ban_pad, s.repetition_penalty, s.no_repeat_ngram, s.min_length, s.forced_bos,
                c.forced_eos, t, max_length, got, want, bad);
    return bad;
}

int main(void) {
    const char *names[] = {"generic", "avx2", "avx512"};
    char err[256];
    int ran = 0;
    for (size_t n = 0; n < sizeof names / sizeof *names; n++) {
        if (!at_isa_by_name(names[n])) {
            printf("skip %s: not supported by this CPU or build\n", names[n]);
            continue;
        }
        setenv("ATTEND_ISA", names[n], 1);
        if (at_kernels_init(err, sizeof err)) {
            printf("FAIL %s\n", err);
            failed++;
            continue;
        }
        const int sizes[] = {5, 37, 64, 300, 4099};
        int bad = 0, trials = 0, copying = 0;
        for (int r = 0; r < 400; r++)
            for (size_t v = 0; v < sizeof sizes / sizeof *sizes; v++)
                for (int kind = 0; kind < 5; kind++) {
                    bad += trial(at_k(), sizes[v], kind, r & 1) != 0;
                    trials++;
                    copying += sizes[v] == 5;
                }
        CHECKF(bad == 0 && copying > 1000, "[%s] greedy_choose: %d of %d rows differ from the reference", names[n], bad, trials);
        printf("%s %s\n", bad ? "FAIL" : "ok  ", names[n]);
        ran++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed || !ran ? 1 : 0;
}
