/* The public API (attend.h) over the seq2seq model (seq2seq.h). */
#include "attend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine/isa.h"
#include "compute.h"
#include "../tokenizer/text.h"
#include "attend_model.h"
#include "split_lines.h"
#include "api_run.h"
#include "translate.h"


/* The FFN's activation; "gated-" before it for a gated FFN (T5 v1.1: fc2(act(fc1 x) * gate x)). */
static const char *activation_name(const s2s_config *c) {
    static const char *const names[2][4] = {{"swish", "relu", "gelu", "gelu_tanh"},
                                            {"gated-swish", "gated-relu", "gated-gelu", "gated-gelu_tanh"}};
    return names[c->gated_ffn != 0][c->act];
}

const char *attend_version(void) { return ATTEND_VERSION; }
int attend_abi(void) { return ATTEND_ABI; }
void attend_mem_free(void *p) { free(p); }

attend_params attend_default_params(void) {
    attend_params p = {0};
    return p;
}

attend_load_params attend_default_load_params(void) {
    attend_load_params lp = {0};
    return lp;
}

attend_model *attend_load(const char *path, char *err, size_t errlen) {
    return attend_load_with(path, NULL, err, errlen);
}

attend_model *attend_load_with(const char *path, const attend_load_params *lp, char *err, size_t errlen) {
    const attend_load_params defaults = attend_default_load_params();
    if (!lp) lp = &defaults;
    if (at_kernels_init(err, errlen)) return NULL;
    const int compute = s2s_compute_parse(lp->compute_type, err, errlen);
    if (compute < 0) return NULL;
    attend_model *am = calloc(1, sizeof *am);
    if (!am) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* the checksums and finiteness are checked before any use, which also reads the mapping
     * in once (0.2 s for a 299 MB f32 file here) */
    am->inspect_only = lp->inspect_only != 0;
    am->m = am->inspect_only ? s2s_load_verified(path, err, errlen)
                             : s2s_load_compute(path, compute, err, errlen);
    if (!am->m) {
        free(am);
        return NULL;
    }
    const s2s_config *c = &am->m->c;
    attend_config *o = &am->config;
    o->vocab_size = c->vocab_size;
    o->decoder_vocab_size = c->decoder_vocab_size;
    o->d_model = c->d_model;
    o->encoder_layers = c->enc_layers;
    o->decoder_layers = c->dec_layers;
    o->encoder_heads = c->enc_heads;
    o->decoder_heads = c->dec_heads;
    o->encoder_ffn_dim = c->enc_ffn;
    o->decoder_ffn_dim = c->dec_ffn;
    o->max_position_embeddings = c->max_pos;
    o->max_length = c->max_length;
    o->activation = activation_name(c);
    o->scale_embedding = c->scale_embedding;
    o->shared_embeddings = c->shared_embeddings;
    o->tied_output = c->tied_output;
    o->forced_eos = c->forced_eos;
    o->pad_id = c->pad_id;
    o->eos_id = c->eos_id;
    o->unk_id = c->unk_id;
    o->decoder_start_id = c->start_id;
    o->dtype = am->m->dtype == AT_I8 ? "int8" : am->m->dtype == AT_F16 ? "f16" : "f32";
    o->tensor_count = (long long)gguf_tensor_count(am->m->file);
    o->file_bytes = (long long)gguf_file_size(am->m->file);
    o->metadata_checksum = gguf_find_kv(am->m->file, "attend.metadata_crc32") != NULL;
    o->model_max_length = c->model_max_length;
    o->generation_recorded = c->gen.recorded;
    o->num_beams = c->gen.num_beams;
    o->early_stopping = c->gen.early_stopping;
    o->min_length = c->gen.min_length;
    o->no_repeat_ngram_size = c->gen.no_repeat_ngram;
    o->renormalize_logits = c->gen.renormalize;
    o->length_penalty = c->gen.length_penalty;
    o->repetition_penalty = c->gen.repetition_penalty;
    o->max_line_bytes = (long long)c->max_pos * S2S_BYTES_PER_POSITION;
    o->architecture = c->family->name;
    o->n_languages = am->m->n_langs;
    o->languages = am->m->lang_code;
    o->language_ids = am->m->lang_id;
    o->alignment_view = c->align_view;
    o->alignment_view_recorded = c->align_view_recorded;
    o->align_head_layer = c->align_head_width > 0 ? c->align_head_layer : -1;
    o->align_head_width = c->align_head_width;
    o->n_tasks = am->m->n_tasks;
    o->tasks = am->m->task_name;
    o->task_prefixes = am->m->task_prefix;
    o->encoder_head_dim = c->enc_hd;
    o->decoder_head_dim = c->dec_hd;
    o->relative_buckets = c->family->positions == POS_RELATIVE ? c->rel_buckets : 0;
    o->relative_max_distance = c->family->positions == POS_RELATIVE ? c->rel_max_distance : 0;
    o->audio = c->family->audio;
    o->n_mels = c->family->audio ? c->speech.n_mels : 0;
    o->audio_frames = c->family->audio ? 2 * c->speech.n_frames : 0;
    o->n_alignment_heads = c->family->audio ? am->m->n_alignment_heads : 0;
    o->alignment_heads = c->family->audio ? am->m->alignment_heads : NULL;
    return am;
}

void attend_free(attend_model *m) {
    if (!m) return;
    s2s_free(m->m);
    free(m);
}

const attend_config *attend_get_config(const attend_model *m) { return &m->config; }

int attend_verify(const attend_model *m, char *err, size_t errlen) {
    return s2s_verify(m->m, err, errlen);
}

const char *attend_isa(void) { return at_k()->name; }

int attend_select_isa(char *err, size_t errlen) { return at_kernels_init(err, errlen); }

const char *attend_isa_available(void) { return at_isa_list(); }

const char *attend_isa_int8(void) { return at_isa_int8_path(); }

const char *attend_isa_bf16(const char **why) {
    const char *missing = s2s_bf16_missing();
    if (why) *why = missing;
    return missing ? NULL : "avx512bf16";
}
int attend_default_threads(void) { return at_default_threads(); }

void attend_result_free(attend_result *r) {
    if (!r) return;
    free(r->text);
    free(r->src_ids);
    free(r->tgt_ids);
    for (int i = 0; r->src_pieces && i < r->n_src; i++) free(r->src_pieces[i]);
    for (int i = 0; r->tgt_pieces && i < r->n_tgt; i++) free(r->tgt_pieces[i]);
    free(r->src_pieces);
    free(r->tgt_pieces);
    for (int k = 0; r->nbest && k < r->n_best; k++) {
        attend_hypothesis *h = &r->nbest[k];
        free(h->text);
        for (int i = 0; h->pieces && i < h->n; i++) free(h->pieces[i]);
        free(h->pieces);
        free(h->ids);
        if (h->logprob != r->logprob) free(h->logprob); /* nbest[0]'s are r's own */
        if (h->dec_self != r->dec_self) free(h->dec_self);
        if (h->cross != r->cross) free(h->cross);
        if (h->align_head != r->align_head) free(h->align_head);
    }
    free(r->nbest);
    free(r->logprob);
    free(r->logits);
    free(r->enc_self);
    free(r->dec_self);
    free(r->cross);
    free(r->head_cross);
    free(r->align_head);
    free(r->message);
    free(r->sentences);
    memset(r, 0, sizeof *r);
}

/* Mark out as a line that failed on its own (attend_result.status): text "", message msg.
 * 0, or -1 when out of memory for that. */
static int fail_line(attend_result *out, int status, const char *msg) {
    attend_result_free(out);
    out->status = status;
    out->text = strdup("");
    out->message = strdup(msg);
    return out->text && out->message ? 0 : -1;
}

/* The search these params ask for, over the model's defaults. 0 or -1 with err. */
/* attend_params.suppress_ids / disable_unk into the search, each id checked. */
static int resolve_suppress(const s2s_model *m, const attend_params *p, s2s_search *s, char *err,
                            size_t errlen) {
    s->disable_unk = p->disable_unk != 0;
    if (p->n_suppress <= 0) return 0;
    if (!p->suppress_ids || !p->suppress_lens) {
        snprintf(err, errlen, "n_suppress %d without suppress_ids and suppress_lens", p->n_suppress);
        return -1;
    }
    for (int k = 0; k < p->n_suppress; k++) {
        if (p->suppress_lens[k] < 1 || !p->suppress_ids[k]) {
            snprintf(err, errlen, "suppressed sequence %d is empty", k);
            return -1;
        }
        for (int i = 0; i < p->suppress_lens[k]; i++)
            if (p->suppress_ids[k][i] < 0 || p->suppress_ids[k][i] >= m->c.decoder_vocab_size) {
                snprintf(err, errlen, "suppressed sequence %d: id %d is outside the target vocabulary (0..%d)",
                         k, p->suppress_ids[k][i], m->c.decoder_vocab_size - 1);
                return -1;
            }
    }
    s->suppress = p->suppress_ids;
    s->suppress_len = p->suppress_lens;
    s->n_suppress = p->n_suppress;
    return 0;
}

int api_resolve_search(const s2s_model *m, const attend_params *p, s2s_search *s, char *err,
                          size_t errlen) {
    *s = s2s_search_defaults(m);
    if (p->num_beams < 0 || p->n_best < 0 || p->top_k < 0) {
        snprintf(err, errlen, "num_beams, n_best and top_k must not be negative");
        return -1;
    }
    if (p->num_beams > 0) s->beams = p->num_beams;
    if (p->sample) {
        if (p->num_beams > 1) {
            snprintf(err, errlen, "sampling draws one token at a time: num_beams must be 0 or 1, not %d",
                     p->num_beams);
            return -1;
        }
        s->sample = 1;
        s->beams = 1;
    }
    if (p->n_best > 0) s->n_best = p->n_best;
    if (p->early_stopping < 0 || p->early_stopping > ATTEND_EARLY_NEVER) {
        snprintf(err, errlen, "early_stopping %d: not an ATTEND_EARLY_ value", p->early_stopping);
        return -1;
    }
    if (p->early_stopping != ATTEND_EARLY_MODEL)
        s->early_stopping = p->early_stopping == ATTEND_EARLY_TRUE    ? S2S_EARLY_TRUE
                            : p->early_stopping == ATTEND_EARLY_NEVER ? S2S_EARLY_NEVER
                                                                      : S2S_EARLY_FALSE;
    if (p->set_length_penalty) s->length_penalty = p->length_penalty;
    if (p->set_min_length) s->min_length = p->min_length;
    if (p->set_no_repeat_ngram_size) s->no_repeat_ngram = p->no_repeat_ngram_size;
    if (p->repetition_penalty != 0) s->repetition_penalty = p->repetition_penalty;
    /* zero means the default; anything else goes to s2s_search_check as given */
    s->top_k = p->top_k;
    s->top_p = p->top_p != 0 ? p->top_p : 1.0f;
    s->temperature = p->temperature != 0 ? p->temperature : 1.0f;
    s->seed = p->seed;
    if (resolve_suppress(m, p, s, err, errlen)) return -1;
    return s2s_search_check(s, err, errlen);
}

int api_sentence_fits(const attend_model *am, const char *s, size_t len) {
    int *ids = NULL, n = 0, truncated = 0;
    char err[64];
    const int lang = am->m->n_langs > 0 ? am->m->lang_id[0] : -1;
    if (s2s_encode_text_lang(am->m, lang, s, len, &ids, &n, NULL, &truncated, err, sizeof err)) return 1;
    free(ids);
    return !truncated;
}

int attend_count_tokens(const attend_model *am, const char *line, size_t len, char *err, size_t errlen) {
    int *ids = NULL, n = 0, truncated = 0;
    /* a multilingual source starts with its language's token: any language counts the same */
    const int lang = am->m->n_langs > 0 ? am->m->lang_id[0] : -1;
    if (s2s_encode_text_lang(am->m, lang, line, len, &ids, &n, NULL, &truncated, err, errlen)) return -1;
    free(ids);
    return n;
}

/* Pieces of n ids (malloc'd strings, "" for an id without one); NULL when out of memory. */
static char **pieces_of(const vocab *v, const int *ids, int n) {
    char **out = calloc((size_t)n + 1, sizeof(char *));
    for (int k = 0; out && k < n; k++) {
        const char *pc = vocab_piece(v, ids[k]);
        out[k] = strdup(pc ? pc : "");
        if (!out[k]) {
            for (int j = 0; j < k; j++) free(out[j]);
            free(out);
            return NULL;
        }
    }
    return out;
}

/* Move one sentence's output o into r (ids, arrays, scores, the n-best list with texts and
 * pieces); o is freed. 0, or -1 when out of memory (r then holds what it took: free it). */
static int take_output(const s2s_model *m, s2s_output *o, attend_result *r) {
    r->n_tgt = o->n;
    r->tgt_ids = o->ids;
    r->logits = o->logits;
    r->logprob = o->logprob;
    r->enc_self = o->enc_self;
    r->dec_self = o->dec_self;
    r->cross = o->cross;
    r->head_cross = o->head_cross;
    o->head_cross = NULL;
    r->align_head = o->align_head;
    r->score = o->score;
    r->normalized_score = o->normalized_score;
    r->n_best = o->n_best;
    /* r owns them now (freed once, by attend_result_free, on any failure below) */
    o->logits = o->logprob = o->enc_self = o->dec_self = o->cross = o->align_head = NULL;
    o->ids = NULL;
    if (o->n_best > 0) /* nbest[0]'s arrays are those just taken */
        o->nbest[0].logprob = o->nbest[0].dec_self = o->nbest[0].cross = o->nbest[0].align_head = NULL;
    r->nbest = calloc((size_t)r->n_best + 1, sizeof *r->nbest);
    int oom = !r->nbest;
    if (oom) r->n_best = 0;
    for (int k = 0; !oom && k < r->n_best; k++) {
        attend_hypothesis *h = &r->nbest[k];
        s2s_hyp *q = &o->nbest[k];
        h->ids = q->ids;
        h->n = q->n;
        h->score = q->score;
        h->normalized_score = q->normalized_score;
        h->logprob = k == 0 ? r->logprob : q->logprob; /* nbest[0]: the result's */
        h->dec_self = k == 0 ? r->dec_self : q->dec_self;
        h->cross = k == 0 ? r->cross : q->cross;
        h->align_head = k == 0 ? r->align_head : q->align_head;
        q->ids = NULL;
        q->logprob = q->dec_self = q->cross = q->align_head = NULL;
        h->text = s2s_decode_text(m, h->ids, h->n);
        h->pieces = pieces_of(m->tgt_vocab, h->ids, h->n);
        oom = !h->text || !h->pieces;
    }
    s2s_output_free(o); /* what was not moved: the hypotheses after an out-of-memory */
    if (oom) return -1;
    r->text = s2s_decode_text(m, r->tgt_ids, r->n_tgt);
    r->tgt_pieces = pieces_of(m->tgt_vocab, r->tgt_ids, r->n_tgt);
    return r->text && r->tgt_pieces ? 0 : -1;
}

/* The shared second half of attend_translate and attend_translate_ids: src[i] holds the
 * source (and forced target) ids of out[i], whose src_ids/src_pieces are already set;
 * translate them and fill the rest of out. 0, or -1 with err (out then freed). */
static int translate_sources(attend_model *am, s2s_source *src, int n, const attend_params *p,
                             const s2s_search *search, attend_result *out, char *err, size_t errlen) {
    s2s_output *res = calloc((size_t)n + 1, sizeof *res);
    if (!res) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    s2s_opts o = {0};
    o.max_length = p->max_length;
    o.want_logits = p->want_logits;
    o.want_scores = p->want_scores || p->n_best > 0;
    o.search = search;
    o.want_attention = p->want_attention;
    o.cross_heads = p->cross_heads, o.n_cross_heads = p->n_cross_heads > 0 ? p->n_cross_heads : 0;
    s2s_timing timing;
    o.timing = p->stats ? &timing : NULL;
    o.stop = p->stop; /* Ctrl-C and streaming, between decoder steps */
    o.on_token = p->on_token, o.token_user = p->token_user;
    if (s2s_translate_ids(am->m, src, n, &o, res, err, errlen)) goto fail;
    if (p->stats) {
        p->stats->encode_seconds += timing.encode;
        p->stats->decode_seconds += timing.decode;
        p->stats->steps += timing.steps;
        p->stats->encoder_passes += timing.encoded;
    }
    for (int i = 0; i < n; i++)
        if (take_output(am->m, &res[i], &out[i])) {
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
    free(res);
    return 0;
fail:
    for (int i = 0; i < n; i++) {
        if (res) s2s_output_free(&res[i]);
        attend_result_free(&out[i]);
    }
    free(res);
    return -1;
}

/* Translate src[0..n) into out[0..n) batch by batch as p->batch_size / batch_tokens say,
 * handing each batch to p->on_batch. 0, or -1 with err; on failure every entry not handed
 * over is freed. */
int api_run_batched(attend_model *am, s2s_source *src, int n, const attend_params *p,
                       const s2s_search *search, attend_result *out, char *err, size_t errlen) {
    int *order = malloc(sizeof(int) * ((size_t)n + 1)), *done = calloc((size_t)n + 1, sizeof(int));
    s2s_source *bs = malloc(sizeof *bs * ((size_t)n + 1));
    attend_result *bo = calloc((size_t)n + 1, sizeof *bo);
    int rc = 0;
    if (!order || !done || !bs || !bo) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
        goto fail;
    }
    /* lines that failed on their own (n 0: attend_result.status set) are complete already:
     * they go first, handed over at once */
    int nfail = 0;
    for (int i = 0; i < n; i++)
        if (src[i].n == 0) order[nfail++] = i, done[i] = 1;
    for (int i = 0, j = nfail; i < n; i++)
        if (src[i].n > 0) order[j++] = i;
    if (nfail && p->on_batch && p->on_batch(p->user, order, nfail)) {
        snprintf(err, errlen, "stopped by the caller after %d of %d sentences", nfail, n);
        for (int j = nfail; j < n; j++) attend_result_free(&out[order[j]]);
        rc = -1;
        goto done;
    }
    const int sorted = p->batch_size > 0 || p->batch_tokens > 0;
    int *todo = order + nfail, nt = n - nfail;
    if (sorted) /* by source length, ties in input order (a Shell sort on that total order) */
        for (int gap = nt / 2; gap > 0; gap /= 2)
            for (int i = gap; i < nt; i++)
                for (int j = i; j >= gap; j -= gap) {
                    const int a = todo[j - gap], b = todo[j];
                    if (src[a].n < src[b].n || (src[a].n == src[b].n && a < b)) break;
                    todo[j - gap] = b, todo[j] = a;
                }
    for (int s0 = nfail, k; s0 < n; s0 += k) {
        long long sum = src[order[s0]].n;
        k = 1;
        while (sorted && s0 + k < n && (p->batch_size <= 0 || k < p->batch_size) &&
               (p->batch_tokens <= 0 || sum + src[order[s0 + k]].n <= p->batch_tokens))
            sum += src[order[s0 + k++]].n;
        if (!sorted) k = n - s0;
        for (int j = 0; j < k; j++) {
            bs[j] = src[order[s0 + j]];
            bo[j] = out[order[s0 + j]];
            memset(&out[order[s0 + j]], 0, sizeof *out); /* now bo's, freed by it on failure */
        }
        if (p->stop && *p->stop) {
            snprintf(err, errlen, "stopped by the caller after %d of %d sentences", s0, n);
            rc = -1;
            goto fail;
        }
        if (translate_sources(am, bs, k, p, search, bo, err, errlen)) {
            rc = -1;
            goto fail;
        }
        for (int j = 0; j < k; j++) {
            out[order[s0 + j]] = bo[j];
            done[order[s0 + j]] = 1;
        }
        if (p->on_batch && p->on_batch(p->user, order + s0, k)) {
            snprintf(err, errlen, "stopped by the caller after %d of %d sentences", s0 + k, n);
            for (int j = s0 + k; j < n; j++) attend_result_free(&out[order[j]]);
            rc = -1;
            goto done;
        }
    }
    goto done;
fail:
    /* handed over (with on_batch) stays the caller's; everything else is freed */
    for (int i = 0; i < n; i++)
        if (!(done && done[i] && p->on_batch)) attend_result_free(&out[i]);
done:
    free(order);
    free(done);
    free(bs);
    free(bo);
    return rc;
}

/* The token id of language `code` for option `what`, or -1 with err naming the valid codes. */
static int language_of(const s2s_model *m, const char *code, const char *what, char *err, size_t errlen) {
    char *list = s2s_language_list(m);
    int id = code ? s2s_language_id(m, code, strlen(code)) : -1;
    if (id < 0 && code)
        snprintf(err, errlen, "%s '%.40s' is not a language of this model (%.*s)", what, code,
                 (int)(errlen > 100 ? errlen - 100 : 0), list ? list : "");
    else if (id < 0)
        snprintf(err, errlen, "this model is multilingual: give a %s, one of %.*s", what,
                 (int)(errlen > 100 ? errlen - 100 : 0), list ? list : "");
    free(list);
    return id;
}

/* The languages p asks for: *src_lang the source's token (-1 when need_src is 0 or the model
 * has none) and search->forced_bos the target's. 0 or -1 with err. */
/* Checkpoints for several target languages read the target as a code at the start of the
 * source: Marian's >>xx<< (opus-mt-en-mul, ...), T5's <2xx> (MADLAD-400). The code's
 * piece for this family into buf: its length, or -1 when it does not fit. */
static int code_piece(const s2s_model *m, const char *code, char *buf, size_t n) {
    const int w = m->c.family->sentinels ? snprintf(buf, n, "<2%s>", code) : snprintf(buf, n, ">>%s<<", code);
    return w > 0 && (size_t)w < n ? w : -1;
}

/* The id of code's piece among the source pieces, or -1 with err listing the codes this
 * model has. */
static int target_code(const s2s_model *m, const char *code, char *err, size_t errlen) {
    char piece[80];
    const int n = code_piece(m, code, piece, sizeof piece);
    const int id = n > 0 ? vocab_id(m->src_vocab, piece, (size_t)n) : -1;
    if (id >= 0) return id;
    const int t5 = m->c.family->sentinels;
    const char *open = t5 ? "<2" : ">>", *close = t5 ? ">" : "<<";
    const size_t ol = strlen(open), cl = strlen(close);
    size_t w = (size_t)snprintf(err, errlen, "target language '%.40s': this model has no %s%.40s%s code (", code, open,
                                code, close);
    int listed = 0;
    for (int i = 0; i < m->c.vocab_size && w + 24 < errlen; i++) {
        const char *p = vocab_piece(m->src_vocab, i);
        const size_t pl = p ? strlen(p) : 0;
        if (pl > ol + cl && pl < 20 && !strncmp(p, open, ol) && !strcmp(p + pl - cl, close))
            w += (size_t)snprintf(err + w, errlen - w, "%s%.*s", listed++ ? ", " : "", (int)(pl - ol - cl), p + ol);
    }
    if (w + 2 < errlen) snprintf(err + w, errlen - w, "%s)", listed ? "" : "none: it translates into one language");
    return -1;
}

static int resolve_languages(const s2s_model *m, const attend_params *p, int need_src, int *src_lang,
                             s2s_search *search, char *err, size_t errlen) {
    *src_lang = -1;
    if (m->n_langs == 0 && (m->c.family->text_codes || m->c.family->sentinels) && p->tgt_lang && !p->src_lang) {
        char piece[80];
        if (!need_src) {
            snprintf(err, errlen, "tgt_lang for a %s model with token ids: put the %s id first in each source",
                     m->c.family->name, code_piece(m, p->tgt_lang, piece, sizeof piece) > 0 ? piece : "code's");
            return -1;
        }
        return target_code(m, p->tgt_lang, err, errlen) < 0 ? -1 : 0;
    }
    if (m->n_langs == 0) {
        if (p->src_lang || p->tgt_lang) {
            snprintf(err, errlen, "source/target languages given, but this %s model has no language tokens",
                     m->c.family->name);
            return -1;
        }
        return 0;
    }
    if ((need_src || p->src_lang) && (*src_lang = language_of(m, p->src_lang, "source language", err, errlen)) < 0)
        return -1;
    search->forced_bos = language_of(m, p->tgt_lang, "target language", err, errlen);
    return search->forced_bos < 0 ? -1 : 0;
}

/* src's target prefix: the target language's token first (lang >= 0), then ids[0..n), in
 * a copy src owns (n 0: no prefix, as without one). 0; 1 when it leaves no room for a token
 * within the length limit (msg says so: the line fails); -1 out of memory. */
static int set_prefix(const s2s_model *m, const attend_params *p, int lang, const int *ids, int n,
                      s2s_source *src, char *msg, size_t msglen) {
    if (n <= 0) return 0;
    const s2s_opts o = {.max_length = p->max_length};
    const int ml = s2s_max_length(m, &o), total = n + (lang >= 0);
    if (total > ml - 2) {
        snprintf(msg, msglen, "target prefix: %d tokens leave no room for a token within max_length %d", total, ml);
        return 1;
    }
    int *copy = malloc(sizeof(int) * (size_t)total);
    if (!copy) return -1;
    if (lang >= 0) copy[0] = lang;
    memcpy(copy + (lang >= 0), ids, sizeof(int) * (size_t)n);
    src->prefix = copy;
    src->n_prefix = total;
    return 0;
}

/* A forced target text into src (a multilingual target starts with its language token,
 * HF's tgt_lang prefix). 0, 1 (the line fails: msg) or -1 (out of memory). */
static int text_target(const s2s_model *m, int lang, const char *text, s2s_source *src, char *msg,
                       size_t msglen) {
    int *ids, n, truncated;
    char inner[200];
    /* its pieces are not needed (the result's come from the translation) */
    if (s2s_encode_target_lang(m, lang, text, strlen(text), &ids, &n, NULL, &truncated, inner, sizeof inner)) {
        snprintf(msg, msglen, "target: %.200s", inner);
        return 1;
    }
    src->forced = ids;
    src->n_forced = n;
    return 0;
}

/* Line i's text prefix (p->target_prefix[i]) into src as set_prefix does: tokenized as a
 * target, without its </s>. 0, 1 (the line fails: msg) or -1 (out of memory). */
static int text_prefix(const s2s_model *m, const attend_params *p, int lang, int i, s2s_source *src, char *msg,
                       size_t msglen) {
    const char *text = p->target_prefix ? p->target_prefix[i] : NULL;
    if (!text) return 0;
    int *ids = NULL, n = 0, truncated = 0;
    char inner[200];
    if (s2s_encode_target(m, text, strlen(text), &ids, &n, NULL, &truncated, inner, sizeof inner)) {
        snprintf(msg, msglen, "target prefix: %.200s", inner);
        return 1;
    }
    const int rc = set_prefix(m, p, lang, ids, n - 1, src, msg, msglen); /* </s> left out */
    free(ids);
    return rc;
}

/* What attend_translate writes before each non-blank source: a target language's code
 * (a model without language tokens given only tgt_lang: "<2xx> ", ">>xx<< ") and the
 * prefix of p->task. *out: malloc'd, or NULL for nothing. 0, or -1 with err (an unknown
 * task, listing the model's). */
static int source_prefix(const s2s_model *m, const attend_params *p, char **out, char *err, size_t errlen) {
    *out = NULL;
    const char *task = NULL;
    if (p->task && !(task = s2s_task_prefix(m, p->task))) {
        size_t w = (size_t)snprintf(err, errlen, "task '%.40s' is not a task of this model (%s", p->task,
                                    m->n_tasks ? "" : "it has none");
        for (int i = 0; i < m->n_tasks && w + 70 < errlen; i++)
            w += (size_t)snprintf(err + w, errlen - w, "%s%.64s", i ? ", " : "", m->task_name[i]);
        if (w + 2 < errlen) snprintf(err + w, errlen - w, ")");
        return -1;
    }
    char code[80] = "";
    int cl = 0;
    if (m->n_langs == 0 && p->tgt_lang && !p->src_lang && (cl = code_piece(m, p->tgt_lang, code, sizeof code - 1)) > 0)
        code[cl++] = ' ';
    if (cl <= 0 && !task) return 0;
    const size_t tl = task ? strlen(task) : 0;
    if (!(*out = malloc((size_t)(cl > 0 ? cl : 0) + tl + 1))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(*out, code, cl > 0 ? (size_t)cl : 0);
    memcpy(*out + (cl > 0 ? cl : 0), task ? task : "", tl + 1);
    return 0;
}

/* Checks shared by both entry points; sets the search. 0 or -1 with err. */
static int check_call(const attend_model *am, int n, const attend_params *p, int forced, s2s_search *search,
                      char *err, size_t errlen) {
    if (n < 0) {
        snprintf(err, errlen, "negative sentence count");
        return -1;
    }
    if (p->stats) memset(p->stats, 0, sizeof *p->stats);
    if (am->inspect_only) {
        snprintf(err, errlen, "the model was loaded for inspection only (attend_load_params.inspect_only)");
        return -1;
    }
    if (p->max_length < 0 || p->max_length == 1) {
        snprintf(err, errlen, "max_length %d: must be 0 (the model's) or at least 2", p->max_length);
        return -1;
    }
    if (am->m->c.family->audio) {
        snprintf(err, errlen, "a speech model (whisper): it transcribes audio (attend transcribe, "
                              "attend_decode_features), it does not translate text");
        return -1;
    }
    if (forced && (p->target_prefix || p->target_prefix_ids)) {
        snprintf(err, errlen, "forced targets and a target prefix do not go together");
        return -1;
    }
    return api_resolve_search(am->m, p, search, err, errlen);
}

/* attend_translate without sentence splitting (model/split_lines.c splits, then calls this):
 * each line one sequence. */
int api_translate_lines(attend_model *am, const char *const *lines, const size_t *lens, int n,
                        const char *const *targets, const attend_params *p, attend_result *out,
                        char *err, size_t errlen) {
    const s2s_model *m = am->m;
    attend_params defaults = attend_default_params();
    if (!p) p = &defaults;
    s2s_search search;
    int src_lang;
    if (check_call(am, n, p, targets != NULL, &search, err, errlen) ||
        resolve_languages(m, p, 1, &src_lang, &search, err, errlen))
        return -1;
    /* this call's threads, on this thread only; the caller's own setting comes back after */
    const int caller_threads = at_set_threads(p->threads);
    memset(out, 0, sizeof(*out) * (size_t)n);
    s2s_source *src = calloc((size_t)n + 1, sizeof *src);
    char *lead_text = NULL;
    int rc = -1;
    if (!src) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    char inner[256];
    /* a target language's code (>>xx<<, <2xx>) and a task's prefix, written before each source */
    if (source_prefix(m, p, &lead_text, err, errlen)) goto done;
    for (int i = 0; i < n; i++) {
        size_t len = lens ? lens[i] : strlen(lines[i]);
        const char *line = lines[i];
        char *coded = NULL;
        size_t lead = 0; /* a blank line stays as it is */
        while (lead < len && (line[lead] == ' ' || line[lead] == '\t' || line[lead] == '\r' || line[lead] == '\n')) lead++;
        if (lead_text && lead < len) {
            const size_t cl = strlen(lead_text);
            if (!(coded = malloc(cl + len + 1))) goto oom;
            memcpy(coded, lead_text, cl);
            memcpy(coded + cl, line, len);
            line = coded;
            len += cl;
        }
        const int bad = s2s_encode_text_lang(m, src_lang, line, len, &out[i].src_ids, &out[i].n_src,
                                                &out[i].src_pieces, &out[i].truncated, inner, sizeof inner);
        free(coded);
        if (bad) {
            if (fail_line(&out[i], ATTEND_E_MEMORY, inner)) goto oom;
            continue; /* src[i].n 0: skipped */
        }
        src[i].ids = out[i].src_ids;
        src[i].n = out[i].n_src;
        int status = 0; /* a target, or a prefix, the line cannot have fails it */
        int pr = targets && targets[i] ? text_target(m, search.forced_bos, targets[i], &src[i], inner, sizeof inner)
                                       : text_prefix(m, p, search.forced_bos, i, &src[i], inner, sizeof inner);
        if (pr > 0) status = targets && targets[i] ? ATTEND_E_MEMORY : ATTEND_E_INPUT;
        if (pr < 0 || (status && fail_line(&out[i], status, inner))) goto oom;
        if (status) src[i].n = 0;
    }
    rc = api_run_batched(am, src, n, p, &search, out, err, errlen);
    goto done;
oom:
    snprintf(err, errlen, "out of memory");
    for (int i = 0; i < n; i++) attend_result_free(&out[i]);
done:
    for (int i = 0; src && i < n; i++) {
        free((void *)src[i].forced);
        free((void *)src[i].prefix);
    }
    free(src);
    free(lead_text);
    at_set_threads(caller_threads);
    return rc;
}

/* ids[0..n) must lie in [0, vocab) and number 1..limit; else -1 with err naming what. */
static int check_ids(const int *ids, int n, int vocab, int limit, const char *what, int i, char *err,
                     size_t errlen) {
    if (!ids || n < 1 || n > limit) {
        snprintf(err, errlen, "%s %d: %d ids; must be 1..%d", what, i + 1, ids ? n : 0, limit);
        return -1;
    }
    for (int k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= vocab) {
            snprintf(err, errlen, "%s %d: id %d at position %d is outside the vocabulary (0..%d)", what, i + 1,
                     ids[k], k, vocab - 1);
            return -1;
        }
    return 0;
}

/* Line i's id prefix (p->target_prefix_ids[i], p->target_prefix_lens[i] of them) into src
 * as set_prefix does. 0, 1 (the line fails: msg) or -1 (out of memory). */
static int ids_prefix(const s2s_model *m, const attend_params *p, int lang, int i, s2s_source *src, char *msg,
                      size_t msglen) {
    const int *ids = p->target_prefix_ids ? p->target_prefix_ids[i] : NULL;
    const int n = ids && p->target_prefix_lens ? p->target_prefix_lens[i] : 0;
    if (n == 0) return 0;
    if (check_ids(ids, n, m->c.decoder_vocab_size, m->c.max_pos, "target prefix", i, msg, msglen)) return 1;
    return set_prefix(m, p, lang, ids, n, src, msg, msglen);
}

int attend_translate_ids(attend_model *am, const int *const *ids, const int *lens, int n,
                         const int *const *target_ids, const int *target_lens, const attend_params *p,
                         attend_result *out, char *err, size_t errlen) {
    const s2s_model *m = am->m;
    attend_params defaults = attend_default_params();
    if (!p) p = &defaults;
    s2s_search search;
    int src_lang;
    if (check_call(am, n, p, target_ids != NULL, &search, err, errlen) ||
        resolve_languages(m, p, 0, &src_lang, &search, err, errlen))
        return -1;
    if (p->task) {
        snprintf(err, errlen, "task for token ids: put the ids of the task's prefix first in each source");
        return -1;
    }
    if (n > 0 && (!ids || !lens)) {
        snprintf(err, errlen, "ids and lens must not be NULL");
        return -1;
    }
    const int positions = m->c.max_pos;
    const int caller_threads = at_set_threads(p->threads);
    memset(out, 0, sizeof(*out) * (size_t)n);
    s2s_source *src = calloc((size_t)n + 1, sizeof *src);
    int rc = -1;
    if (!src) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        char msg[256];
        if (check_ids(ids[i], lens[i], m->c.vocab_size, positions, "source", i, msg, sizeof msg) ||
            (target_ids && target_ids[i] && check_ids(target_ids[i], target_lens ? target_lens[i] : 0,
                                                      m->c.decoder_vocab_size, positions, "target", i, msg,
                                                      sizeof msg))) {
            if (fail_line(&out[i], ATTEND_E_INPUT, msg)) {
                snprintf(err, errlen, "out of memory");
                for (int k = 0; k <= i; k++) attend_result_free(&out[k]);
                goto done;
            }
            continue; /* src[i].n 0: skipped */
        }
        out[i].n_src = lens[i];
        out[i].src_ids = malloc(sizeof(int) * (size_t)lens[i]);
        out[i].src_pieces = out[i].src_ids ? pieces_of(m->src_vocab, ids[i], lens[i]) : NULL;
        if (!out[i].src_pieces) {
            snprintf(err, errlen, "out of memory");
            for (int k = 0; k <= i; k++) attend_result_free(&out[k]);
            goto done;
        }
        memcpy(out[i].src_ids, ids[i], sizeof(int) * (size_t)lens[i]);
        src[i].ids = out[i].src_ids;
        src[i].n = lens[i];
        if (target_ids && target_ids[i]) {
            src[i].forced = target_ids[i];
            src[i].n_forced = target_lens[i];
        }
        int pr = ids_prefix(m, p, search.forced_bos, i, &src[i], msg, sizeof msg);
        if (pr > 0) {
            src[i].n = 0;
            if (fail_line(&out[i], ATTEND_E_INPUT, msg)) pr = -1;
        }
        if (pr < 0) {
            snprintf(err, errlen, "out of memory");
            for (int k = 0; k <= i; k++) attend_result_free(&out[k]);
            goto done;
        }
    }
    rc = api_run_batched(am, src, n, p, &search, out, err, errlen);
done:
    for (int i = 0; src && i < n; i++) free((void *)src[i].prefix);
    free(src);
    at_set_threads(caller_threads);
    return rc;
}

int attend_tokenize(const attend_model *am, const char *text, size_t len, int **ids, int *n, char *err,
                    size_t errlen) {
    int truncated = 0;
    *ids = NULL;
    *n = 0;
    return s2s_encode_text(am->m, text, len, ids, n, NULL, &truncated, err, errlen);
}

char *attend_detokenize(const attend_model *am, const int *ids, int n) {
    for (int k = 0; k < n; k++)
        if (ids[k] < 0 || ids[k] >= am->m->c.decoder_vocab_size) return NULL;
    return s2s_decode_text(am->m, ids, n);
}
