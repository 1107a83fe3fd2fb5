/* Next-token choice: the search's settings, HF's logits processors, greedy, sampling, beam
 * candidates and the beam heap (transformers 4.36-4.44 generate(), BeamSearchScorer, decoder_prompt_len 1). */
#include "search.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------
 * The search's settings: the model's recorded defaults, and their checks */

int s2s_max_length(const s2s_model *m, const s2s_opts *opts) {
    int ml = opts && opts->max_length > 0 ? opts->max_length : m->c.max_length;
    /* decoder inputs take positions 0 .. ml-2, which must exist */
    if (ml > m->c.max_pos + 1) ml = m->c.max_pos + 1;
    return ml < 2 ? 2 : ml;
}

s2s_search s2s_search_defaults(const s2s_model *m) {
    const s2s_generation *g = &m->c.gen;
    s2s_search s = {0};
    s.beams = g->recorded ? g->num_beams : 1;
    s.n_best = 1;
    s.length_penalty = g->length_penalty;
    s.early_stopping = g->early_stopping;
    s.min_length = g->min_length;
    s.no_repeat_ngram = g->no_repeat_ngram;
    s.repetition_penalty = g->repetition_penalty;
    s.renormalize = g->renormalize;
    s.top_p = 1.0f;
    s.temperature = 1.0f;
    s.forced_bos = -1;
    return s;
}

int s2s_search_check(const s2s_search *s, char *err, size_t errlen) {
    if (s->beams < 1 || s->beams > 1024)
        snprintf(err, errlen, "num_beams %d: must be 1..1024", s->beams);
    else if (s->sample && s->beams != 1)
        snprintf(err, errlen, "sampling draws one token at a time: num_beams must be 1, not %d", s->beams);
    else if (s->n_best < 1 || (!s->sample && s->n_best > s->beams) || s->n_best > 1024)
        snprintf(err, errlen, "n-best %d: must be 1..num_beams (%d)%s", s->n_best, s->beams,
                 s->sample ? "" : ", or any count up to 1024 when sampling");
    else if (!isfinite(s->length_penalty))
        snprintf(err, errlen, "length_penalty must be finite");
    else if (s->early_stopping < 0 || s->early_stopping > 2)
        snprintf(err, errlen, "early_stopping %d: must be false, true or never", s->early_stopping);
    else if (s->min_length < 0 || s->no_repeat_ngram < 0)
        snprintf(err, errlen, "min_length and no_repeat_ngram_size must be >= 0");
    else if (!(s->repetition_penalty > 0) || !isfinite(s->repetition_penalty))
        snprintf(err, errlen, "repetition_penalty %g: must be > 0", s->repetition_penalty);
    else if (s->sample && (!(s->temperature > 0) || !isfinite(s->temperature)))
        snprintf(err, errlen, "temperature %g: must be > 0", s->temperature);
    else if (s->sample && (s->top_k < 0 || !(s->top_p > 0 && s->top_p <= 1)))
        snprintf(err, errlen, "top_k must be >= 0 and top_p in (0, 1]");
    else if (s->forced_bos < -1)
        snprintf(err, errlen, "forced_bos %d: must be a token id or -1", s->forced_bos);
    else
        return 0;
    return -1;
}

/* ---------------------------------------------------------------------------------------
 * Logits processors: is any on? */

int search_has_processors(const s2s_search *s, int ignore_eos) {
    return s->min_length > 0 || s->no_repeat_ngram > 0 || s->repetition_penalty != 1.0f || ignore_eos ||
           s->forced_bos >= 0 || s->n_suppress > 0 || s->disable_unk || s->n_suppress_tokens > 0 ||
           s->n_begin_suppress > 0 || s->timestamps;
}

float log_softmax_at(const float *x, int n, int i, int best) {
    /* at_argmax's lanes and the kernels' vector e^x, as beam search's log-softmax: a scalar
     * max and a double exp per vocabulary entry took 8-12% of a batch-64 greedy run (58k
     * entries); greedy passes the argmax it found on the way */
    const float mx = x[best >= 0 ? best : at_argmax(x, n)];
    return x[i] - (mx + logf(at_k()->sum_exp(x, n, mx)));
}

/* ---------------------------------------------------------------------------------------
 * Logits processors, in the order HF applies them: repetition penalty, no-repeat n-gram,
 * bad words (<pad>, for the families that ban it), min length, forced BOS (the first token
 * after the start token: a target language), forced EOS. `sc` holds logits (greedy, sampling) or
 * log-probabilities (beams); HF applies the same processors to either. Returns whether a
 * finite value changed (a renormalization then matters). */

/* A list of logit edits (where, and the value replaced), so greedy can edit a row of raw
 * logits in place and put it back; e NULL: no list (the edits go to a work copy). */
typedef struct {
    int id;
    float old;
} logit_edit;
typedef struct {
    logit_edit *e;
    int n;
} edit_log;

static void set_logit(float *sc, int id, float v, edit_log *log) {
    if (log->e) log->e[log->n++] = (logit_edit){id, sc[id]};
    sc[id] = v;
}

/* The edits a row's processors may make at most: each prefix id penalized once and banned
 * once, <pad> and </s>, each suppressed sequence and <unk>. */
static int max_edits(const s2s_search *s, const prefix *p) {
    return 2 * p->n + 2 + s->n_suppress + 1 + s->n_suppress_tokens + s->n_begin_suppress;
}

/* Whisper's token lists: the begin list where the input holds begin_index ids, then the
 * list banned everywhere. Whether a finite value changed. */
static int suppress_speech(const step_ctx *x, float *sc, const prefix *p, edit_log *log) {
    const s2s_search *s = x->s;
    int changed = 0;
    for (int k = 0; p->n == s->begin_index && k < s->n_begin_suppress; k++) {
        changed |= isfinite(sc[s->begin_suppress[k]]) != 0;
        set_logit(sc, s->begin_suppress[k], -INFINITY, log);
    }
    for (int k = 0; k < s->n_suppress_tokens; k++) {
        changed |= isfinite(sc[s->suppress_tokens[k]]) != 0;
        set_logit(sc, s->suppress_tokens[k], -INFINITY, log);
    }
    return changed;
}

static void ban_range(float *sc, int lo, int hi) {
    for (int j = lo; j < hi; j++) sc[j] = -INFINITY;
}

/* HF's WhisperTimeStampLogitsProcessor on one row (its ids after the prompt): timestamps come
 * in pairs and never decrease, the first token is a timestamp no later than
 * max_initial_timestamp, and when the timestamps together are likelier than every text
 * token, one of them is chosen. */
static void timestamp_rules(const step_ctx *x, float *sc, const prefix *p) {
    const s2s_speech *sp = &x->c->speech;
    const int V = x->c->decoder_vocab_size, tb = sp->timestamp_begin_id, b = x->s->begin_index;
    const int *seq = p->ids + b, n = p->n - b;
    sc[sp->no_timestamps_id] = -INFINITY;
    const int last = n >= 1 && seq[n - 1] >= tb, penult = n < 2 || seq[n - 2] >= tb;
    if (last) {
        if (penult) ban_range(sc, tb, V); /* a pair closed: text next */
        else ban_range(sc, 0, x->c->eos_id); /* a pair opened: its end (or the end) next */
    }
    int latest = -1;
    for (int i = 0; i < n; i++) latest = seq[i] >= tb ? seq[i] : latest;
    if (latest >= 0) ban_range(sc, tb, last && !penult ? latest : latest + 1);
    if (n <= 0) {
        ban_range(sc, 0, tb);
        const long hi = (long)tb + sp->max_initial_timestamp + 1;
        if (hi < V) ban_range(sc, (int)hi, V);
    }
    /* log-softmax, then the timestamps' total probability against the best text token */
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) mx = sc[j] > mx ? sc[j] : mx;
    if (!(mx > -INFINITY)) return;
    double all = 0, stamps = 0;
    float best_text = -INFINITY;
    for (int j = 0; j < V; j++) {
        const double e = exp((double)sc[j] - mx);
        all += e;
        if (j >= tb) stamps += e;
        else best_text = sc[j] > best_text ? sc[j] : best_text;
    }
    const double lse = mx + log(all);
    const double ts_logprob = stamps > 0 ? mx + log(stamps) - lse : -INFINITY;
    if (ts_logprob > (double)best_text - lse) ban_range(sc, 0, tb);
}

/* Suppressed sequences and <unk>: ban each sequence's last id where the ids before it end
 * the prefix. Whether a finite value changed. */
static int suppress_ids(const step_ctx *x, float *sc, const prefix *p, edit_log *log) {
    const s2s_search *s = x->s;
    int changed = 0;
    for (int k = 0; k < s->n_suppress; k++) {
        const int len = s->suppress_len[k], *seq = s->suppress[k];
        if (len < 1 || len - 1 > p->n) continue;
        if (len > 1 && memcmp(p->ids + p->n - (len - 1), seq, sizeof(int) * (size_t)(len - 1))) continue;
        if (isfinite(sc[seq[len - 1]])) changed = 1;
        set_logit(sc, seq[len - 1], -INFINITY, log);
    }
    if (s->disable_unk && isfinite(sc[x->c->unk_id])) {
        set_logit(sc, x->c->unk_id, -INFINITY, log);
        changed = 1;
    }
    return changed;
}

/* The processors that touch a few ids: repetition penalty, no-repeat n-gram, bad words,
 * min length. */
static int process_ids(const step_ctx *x, float *sc, const prefix *p, edit_log *log) {
    const s2s_config *c = x->c;
    const s2s_search *s = x->s;
    const int cur_len = x->t + 1;
    int changed = 0;
    if (s->repetition_penalty != 1.0f) { /* each distinct id once: gather, then scatter */
        for (int i = 0; i < p->n; i++) {
            int seen = 0;
            for (int j = 0; j < i && !seen; j++) seen = p->ids[j] == p->ids[i];
            if (seen) continue;
            const float v = sc[p->ids[i]];
            if (isfinite(v)) changed = 1;
            set_logit(sc, p->ids[i], v < 0 ? v * s->repetition_penalty : v / s->repetition_penalty, log);
        }
    }
    const int ng = s->no_repeat_ngram;
    if (ng > 0 && cur_len + 1 >= ng) {
        /* every earlier n-gram whose first ng-1 ids equal the last ng-1 ids bans its last id */
        const int *last = p->ids + p->n - (ng - 1);
        for (int st = 0; st + ng <= p->n; st++) {
            if (ng > 1 && memcmp(p->ids + st, last, sizeof(int) * (size_t)(ng - 1))) continue;
            const int id = p->ids[st + ng - 1];
            if (isfinite(sc[id])) changed = 1;
            set_logit(sc, id, -INFINITY, log);
        }
    }
    changed |= suppress_ids(x, sc, p, log);
    changed |= suppress_speech(x, sc, p, log);
    if (c->family->ban_pad) set_logit(sc, c->pad_id, -INFINITY, log);
    const int last_step = cur_len == x->max_length - 1;
    if ((cur_len < s->min_length || (x->ignore_eos && !last_step)) && isfinite(sc[c->eos_id])) {
        set_logit(sc, c->eos_id, -INFINITY, log);
        changed = 1;
    }
    return changed;
}

/* The token forced at this step (forced BOS after the start token, HF's
 * ForcedBOSTokenLogitsProcessor; forced EOS at the last step, applied after it), or -1. */
static int forced_token(const step_ctx *x) {
    if (x->t + 1 == x->max_length - 1 && x->c->forced_eos) return x->c->eos_id;
    if (x->s->forced_bos >= 0 && x->t + 1 == 1) return x->s->forced_bos;
    return -1;
}

static int process(const step_ctx *x, float *sc, const prefix *p) {
    edit_log none = {NULL, 0};
    int changed = process_ids(x, sc, p, &none);
    const int forced = forced_token(x);
    if (forced >= 0) { /* every other id -inf */
        for (int j = 0; j < x->c->decoder_vocab_size; j++) sc[j] = -INFINITY;
        sc[forced] = 0;
        changed = 1;
    }
    if (x->s->timestamps) {
        timestamp_rules(x, sc, p);
        changed = 1;
    }
    return changed;
}

/* Release 1's greedy rule: argmax over the ids between the banned ones; an earlier id wins
 * ties. Kept as it was, so greedy output stays bit-identical. */
static int choose_between_pad(const s2s_config *c, const float *logits) {
    const int V = c->decoder_vocab_size, pad = c->pad_id;
    const int lo[2] = {0, pad + 1}, hi[2] = {pad, V};
    int best = -1;
    for (int s = 0; s < 2; s++) {
        if (hi[s] <= lo[s]) continue;
        int i = lo[s] + at_argmax(logits + lo[s], hi[s] - lo[s]);
        if (best < 0 || logits[i] > logits[best]) best = i;
    }
    return best;
}

/* The rule above from the row's argmax r: r itself, unless r is <pad> or lies after it
 * behind a NaN at pad + 1 (that stretch's argmax is then pad + 1, which never wins). */
static int choose_plain(const s2s_config *c, const float *logits, int last_step, int *raw_best) {
    if (last_step && c->forced_eos) return c->eos_id;
    const int pad = c->pad_id;
    const int r = *raw_best = at_argmax(logits, c->decoder_vocab_size);
    if (!c->family->ban_pad || r < pad || (r > pad && logits[pad + 1] == logits[pad + 1])) return r;
    return choose_between_pad(c, logits);
}

/* The processed row's argmax from the raw row's, r: an id the processors did not touch
 * cannot overtake r, so only the edited ids compete (an earlier one wins ties; a NaN at 0
 * made r = 0, which nothing overtakes). Unless r itself was edited: then the row is
 * searched again. */
static int edited_argmax(const float *sc, int V, int r, const edit_log *log) {
    int redo = 0;
    for (int i = 0; i < log->n && !redo; i++) redo = log->e[i].id == r;
    if (redo) return at_argmax(sc, V);
    int best = r;
    for (int i = 0; i < log->n; i++) {
        const int id = log->e[i].id;
        if (sc[id] > sc[best] || (sc[id] == sc[best] && id < best)) best = id;
    }
    return best;
}

int greedy_choose(const step_ctx *x, float *logits, const prefix *p, float *work, int *raw_best) {
    const int V = x->c->decoder_vocab_size;
    *raw_best = -1;
    if (!search_has_processors(x->s, x->ignore_eos))
        return choose_plain(x->c, logits, x->t + 1 == x->max_length - 1, raw_best);
    const int forced = forced_token(x);
    if (forced >= 0) return forced;
    if (max_edits(x->s, p) > V || x->s->timestamps) { /* the edit list would not fit in work (tiny
                                                            vocabularies), or whole ranges change */
        memcpy(work, logits, sizeof(float) * (size_t)V);
        process(x, work, p);
        return at_argmax(work, V);
    }
    /* the processors edit the row in place, noting each old value, and the edits are undone
     * backwards: a copy of the row cost a 58k-entry memcpy per row and step */
    const int r = *raw_best = at_argmax(logits, V);
    edit_log log = {(logit_edit *)(void *)work, 0};
    process_ids(x, logits, p, &log);
    const int best = edited_argmax(logits, V, r, &log);
    while (log.n > 0) {
        log.n--;
        logits[log.e[log.n].id] = log.e[log.n].old;
    }
    return best;
}

/* The k-th largest of x[0, n) (k <= n), by insertion into buf[0, k). */
static float kth_largest(const float *x, int n, int k, float *buf) {
    int m = 0;
    for (int j = 0; j < n; j++) {
        const float v = x[j];
        if (m == k && !(v > buf[k - 1])) continue;
        int at = m < k ? m++ : k - 1;
        while (at > 0 && v > buf[at - 1]) {
            buf[at] = buf[at - 1];
            at--;
        }
        buf[at] = v;
    }
    return buf[k - 1];
}

float processed_logprob(const step_ctx *x, const float *logits, const prefix *p, float *work, int id, int top_k) {
    const int V = x->c->decoder_vocab_size;
    memcpy(work, logits, sizeof(float) * (size_t)V);
    process(x, work, p);
    if (top_k > 0 && top_k < V) {
        const float cut = kth_largest(work, V, top_k, work + V);
        for (int j = 0; j < V; j++)
            if (work[j] < cut) work[j] = -INFINITY;
    }
    return log_softmax_at(work, V, id, -1);
}

/* ---------------------------------------------------------------------------------------
 * Sampling */

/* splitmix64: a small, well-mixed stream; one per sample, so draws never depend on threads
 * or on the batch a sentence lands in */
static uint64_t next_u64(uint64_t *st) {
    uint64_t z = (*st += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t sample_seed(unsigned long long seed, const int *ids, int n, int k) {
    uint64_t h = seed ^ 0x6a09e667f3bcc909ULL;
    next_u64(&h);
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)(uint32_t)ids[i];
        next_u64(&h);
    }
    h ^= (uint64_t)k * 0x9e3779b97f4a7c15ULL;
    next_u64(&h);
    return h;
}

static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

int sample_choose(const step_ctx *x, const float *logits, const prefix *p, float *work, uint64_t *rng) {
    const s2s_search *s = x->s;
    const int V = x->c->decoder_vocab_size;
    float *sc = work, *sorted = work + V;
    memcpy(sc, logits, sizeof(float) * (size_t)V);
    process(x, sc, p);
    const float temp = s->temperature > 0 ? s->temperature : 1.0f;
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) {
        sc[j] /= temp;
        mx = sc[j] > mx ? sc[j] : mx;
    }
    /* the threshold below which ids are dropped: the k-th largest value (ties kept, as HF's
     * top-k), then the smallest head of the sorted distribution holding top_p */
    float cut = -INFINITY;
    const int use_k = s->top_k > 0 && s->top_k < V, use_p = s->top_p > 0 && s->top_p < 1;
    if (use_k || use_p) {
        int keep = use_k ? s->top_k : V;
        if (use_k && keep <= 1024) { /* the k largest by insertion: far cheaper than a sort */
            int n = 0;
            for (int j = 0; j < V; j++) {
                const float v = sc[j];
                if (n == keep && !(v > sorted[keep - 1])) continue;
                int at = n < keep ? n++ : keep - 1;
                while (at > 0 && v > sorted[at - 1]) {
                    sorted[at] = sorted[at - 1];
                    at--;
                }
                sorted[at] = v;
            }
        } else {
            memcpy(sorted, sc, sizeof(float) * (size_t)V);
            qsort(sorted, (size_t)V, sizeof(float), cmp_desc);
        }
        if (use_p) {
            double total = 0, run = 0;
            for (int j = 0; j < keep; j++) total += exp((double)sorted[j] - mx);
            int j = 0;
            for (; j < keep; j++) {
                run += exp((double)sorted[j] - mx);
                if (run >= s->top_p * total) break;
            }
            keep = j + 1 < keep ? j + 1 : keep;
        }
        cut = sorted[keep - 1];
    }
    double total = 0;
    for (int j = 0; j < V; j++) total += sc[j] >= cut ? exp((double)sc[j] - mx) : 0.0;
    const double u = (double)(next_u64(rng) >> 11) * 0x1.0p-53 * total;
    double run = 0;
    int last = -1;
    for (int j = 0; j < V; j++) {
        if (!(sc[j] >= cut) || !isfinite(sc[j])) continue;
        run += exp((double)sc[j] - mx);
        last = j;
        if (run > u) return j;
    }
    return last >= 0 ? last : at_argmax(sc, V);
}

/* ---------------------------------------------------------------------------------------
 * Beam candidates */

/* The largest value of x[0, n) that `x[j] > max` finds from -inf (NaN never wins), through
 * the vector argmax: -inf if there is none. */
static float row_max(const float *x, int n) {
    if (n <= 0) return -INFINITY;
    const float v = x[at_k()->argmax(x, n)];
    return v > -INFINITY ? v : -INFINITY;
}

void beam_candidates(const step_ctx *x, const float *logits, const prefix *p, float beam_score,
                     float *work, beam_cand *out, float *lse_raw) {
    const s2s_config *c = x->c;
    const int V = c->decoder_vocab_size, K = 2 * x->s->beams, pad = c->pad_id;
    float mx, lse;
    if (c->family->ban_pad) {
        /* log-softmax without <pad> (HF sets it to -inf before the log-softmax, for Marian) */
        const float m0 = row_max(logits, pad), m1 = row_max(logits + pad + 1, V - pad - 1);
        mx = m1 > m0 ? m1 : m0;
        const float sum = at_k()->sum_exp(logits, pad, mx) + at_k()->sum_exp(logits + pad + 1, V - pad - 1, mx);
        lse = mx + logf(sum);
        const double hi = lse > logits[pad] ? lse : logits[pad];
        *lse_raw = (float)(hi + log(exp(lse - hi) + exp(logits[pad] - hi)));
    } else {
        mx = row_max(logits, V);
        lse = *lse_raw = mx + logf(at_k()->sum_exp(logits, V, mx));
    }
    at_k()->add_scalar(work, logits, -lse, V); /* x - lse, as x + (-lse) is */
    if (process(x, work, p) && x->s->renormalize) {
        const float m2 = row_max(work, V);
        if (isfinite(m2)) {
            const float l2 = m2 + logf(at_k()->sum_exp(work, V, m2));
            at_k()->add_scalar(work, work, -l2, V);
        }
    }
    /* the K best of work + beam_score, kept sorted; a later id enters only if strictly
     * better, so equal sums keep the lower id first. Once K are in, the scan jumps to the
     * next id that beats the K-th (first_above: whole vectors at a time). */
    int n = 0;
    for (int j = 0; j < V; j++) {
        if (n == K) {
            j += at_k()->first_above(work + j, V - j, beam_score, out[K - 1].score);
            if (j >= V) break;
        }
        const float v = work[j] + beam_score;
        int at = n < K ? n++ : K - 1;
        while (at > 0 && v > out[at - 1].score) {
            out[at] = out[at - 1];
            at--;
        }
        out[at].score = v;
        out[at].token = j;
    }
}

/* ---------------------------------------------------------------------------------------
 * The heap of finished hypotheses (BeamHypotheses) */

void heap_init(beam_heap *b, beam_hyp *storage, int beams) {
    b->h = storage;
    b->n = 0;
    b->cap = beams;
    b->added = 0;
    b->worst = 1e9;
}

double normalize_score(double sum, int len, float length_penalty) {
    return sum / pow((double)len, (double)length_penalty);
}

void heap_add(beam_heap *b, const s2s_search *s, double sum_logprobs, int generated_len, int rec) {
    const double score = normalize_score(sum_logprobs, generated_len, s->length_penalty);
    if (b->n >= b->cap && !(score > b->worst)) return;
    b->h[b->n++] = (beam_hyp){score, (float)sum_logprobs, rec, b->added++};
    if (b->n > b->cap) {
        /* drop the lowest (the earliest of equals); worst becomes the next lowest */
        int lo = 0;
        for (int i = 1; i < b->n; i++)
            if (b->h[i].score < b->h[lo].score) lo = i;
        memmove(b->h + lo, b->h + lo + 1, sizeof(beam_hyp) * (size_t)(b->n - lo - 1));
        b->n--;
        double w = b->h[0].score;
        for (int i = 1; i < b->n; i++) w = b->h[i].score < w ? b->h[i].score : w;
        b->worst = w;
    } else if (score < b->worst) {
        b->worst = score;
    }
}

int heap_is_done(const beam_heap *b, const s2s_search *s, double best_sum, int hf_cur_len, int prompt_len,
                 int max_length) {
    if (b->n < b->cap) return 0;
    if (s->early_stopping == S2S_EARLY_TRUE) return 1;
    const double lp = s->length_penalty;
    int len = hf_cur_len - prompt_len;
    if (s->early_stopping == S2S_EARLY_NEVER && lp > 0) len = max_length - prompt_len;
    return b->worst >= best_sum / pow((double)len, lp);
}

static int by_score_desc(const void *a, const void *b) {
    const beam_hyp *x = a, *y = b;
    if (x->score != y->score) return x->score < y->score ? 1 : -1;
    return y->order - x->order;
}

void heap_sort(beam_heap *b) { qsort(b->h, (size_t)b->n, sizeof(beam_hyp), by_score_desc); }
