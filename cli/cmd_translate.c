/* attend translate: one line in, one line out, in order, flushed as soon as ready. The options
 * are read into a translate_options (translate_options.c), the lines translated in chunks
 * (the library sorts each chunk by length into batches) and written by output.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "line_reader.h"
#include "npz.h"
#include "output.h"
#include "reverse_model.h"
#include "translate.h"

/* ---------------------------------------------------------------------------------------
 * Writing: a chunk's lines go out in input order, each as soon as it and every line before
 * it are translated, so output follows each batch rather than each chunk. */

typedef struct {
    const translate_options *o;
    attend_model *m;
    attend_params p;  /* o->p with what the outputs need (attention, scores, logits) */
    npz_writer *dump; /* --dump-attention */
    long long n_done; /* lines written so far */
    long long failed; /* lines the library could not translate (attend_result.status) */
    FILE *prefixes;   /* --prefix-file, read one line per input line */
    long long n_read; /* input lines given a prefix line so far */
    attend_model *rm; /* --reverse-model */
    attend_params rp; /* its settings */
} translate_ctx;

typedef struct {
    int n;                /* lines in the chunk */
    const int *slot;      /* line i -> its index among the lines translated, -1 if blank */
    attend_result *res;   /* [k] translations, by slot (text set once translated); freed
                           * once written */
    int written;          /* lines 0..written are out */
    const size_t *lens;   /* [n] the lines' bytes (more than SPLIT_MAX_LINE: cut) */
    const char *const *src; /* [k] the lines translated, by slot */
    attend_result *rres;  /* [k] --reverse-model's results, by slot; freed with res */
} chunk_output;

/* --reverse-model: line idx's translation r with the links both directions agree on (rr the
 * reverse model's result). Where the reverse model cannot give them (its result failed, or it
 * cut the translation into other words: past its length limit), the line keeps its
 * translation with the forward model's links, and stderr says so. Returns 0 or an exit status. */
static int write_both(translate_ctx *cx, long long idx, attend_result *r, const attend_result *rr) {
    char err[512];
    const attend_config *c = attend_get_config(cx->m), *rc = attend_get_config(cx->rm);
    char *al = rr->status ? NULL : attend_alignment_both(r, c, &cx->o->view, rr, rc, NULL, err, sizeof err);
    if (al) {
        cli_write_aligned(r, al);
        free(al);
        return 0;
    }
    if (!rr->status && rr->truncated)
        snprintf(err, sizeof err, "it read the translation's first %d tokens only (its length limit)", rr->n_src);
    fprintf(stderr, "attend: line %lld: --reverse-model %s: %s; the forward model's links instead\n", idx,
            cx->o->reverse_model, rr->status && rr->message ? rr->message : rr->status ? "not translated" : err);
    return cli_write_translation(r, c, &cx->o->view);
}

/* Write one input line's output: the translation r (NULL for a blank line; rr, --reverse-model's
 * result for it) of a line the reader cut (cut 1) or not. Returns 0 or an exit status. */
static int write_line(translate_ctx *cx, attend_result *r, const attend_result *rr, int cut) {
    const translate_options *o = cx->o;
    const long long idx = ++cx->n_done; /* 1-based input line */
    if (r && r->status) { /* reported, and an empty line keeps the output in step */
        fprintf(stderr, "attend: line %lld: %s\n", idx, r->message ? r->message : "not translated");
        cx->failed++;
        r = NULL;
    }
    if (!r) {
        cli_write_empty(idx - 1, o->nbest, o->align);
        return 0;
    }
    const attend_config *c = attend_get_config(cx->m);
    if (cut) /* the reader kept SPLIT_MAX_LINE bytes of it: that is the news */
        fprintf(stderr, "attend: line %lld: longer than %d bytes; translated its first %d\n", idx, SPLIT_MAX_LINE,
                SPLIT_MAX_LINE);
    else
        cli_warn_truncated(c, idx, r);
    int status = 0;
    if (o->nbest) status = cli_write_nbest(idx - 1, r, c, o->align ? &o->view : NULL); /* Marian's n-best layout */
    else if (rr) status = write_both(cx, idx, r, rr);
    else status = cli_write_translation(r, c, o->align ? &o->view : NULL);
    if (!status && cx->dump) {
        cli_dump_result(cx->dump, c, idx - 1, r, o->dump_logits);
        cli_dump_nbest(cx->dump, c, idx - 1, r);
    }
    return status;
}

/* Write the lines that are ready and in order, and flush them. Returns 0 or an exit status. */
static int write_ready(translate_ctx *cx, chunk_output *o) {
    const int from = o->written;
    while (o->written < o->n) {
        const int k = o->slot[o->written];
        if (k >= 0 && !o->res[k].text) break; /* not translated yet */
        const int cut = cx->p.split == ATTEND_SPLIT_SENTENCES && o->lens[o->written] > SPLIT_MAX_LINE;
        int status = write_line(cx, k >= 0 ? &o->res[k] : NULL, k >= 0 && cx->rm ? &o->rres[k] : NULL, cut);
        if (k >= 0) attend_result_free(&o->res[k]); /* attention results are big */
        if (k >= 0 && cx->rm) attend_result_free(&o->rres[k]);
        o->written++;
        if (status) return status;
    }
    return o->written > from ? cli_flush_stdout() : 0;
}

/* ---------------------------------------------------------------------------------------
 * Batching is the library's (attend_params.batch_size / batch_tokens: sorted by length, cut
 * into batches); after each batch it hands the finished lines over, and those that are
 * next in input order go out at once. */

typedef struct {
    translate_ctx *cx;
    chunk_output *o;
    int status;
} batch_ctx;

/* --reverse-model: the reverse model's results for the batch's lines index[0..n) (those
 * translated), into o->rres: each translation force-decoded to its source line, as attend
 * align --reverse-model does (reverse_model.h). 0 or EXIT_FAIL after a message. */
static int reverse_batch(translate_ctx *cx, chunk_output *o, const int *index, int n) {
    const char **text = calloc((size_t)n, sizeof *text), **src = calloc((size_t)n, sizeof *src);
    attend_result *rr = calloc((size_t)n, sizeof *rr);
    int *at = calloc((size_t)n, sizeof *at), m = 0, status = !text || !src || !rr || !at;
    for (int j = 0; !status && j < n; j++) {
        if (o->res[index[j]].status) continue; /* reported when written */
        src[m] = o->src[index[j]], at[m] = index[j];
        status = !(text[m++] = cli_reverse_source(&o->res[index[j]]));
    }
    char err[512] = "out of memory";
    if (status || (m && attend_translate(cx->rm, text, NULL, m, src, &cx->rp, rr, err, sizeof err))) {
        fprintf(stderr, "attend: --reverse-model %s: %s\n", cx->o->reverse_model, err);
        status = EXIT_FAIL;
    }
    for (int j = 0; !status && j < m; j++) o->rres[at[j]] = rr[j];
    for (int j = 0; text && j < m; j++) free((char *)text[j]);
    free(text);
    free(src);
    free(rr);
    free(at);
    return status;
}

static int batch_done(void *user, const int *index, int n) {
    batch_ctx *b = user;
    if (b->cx->rm && (b->status = reverse_batch(b->cx, b->o, index, n))) return b->status;
    if (b->cx->o->verbose) {
        long long sum = 0;
        int lo = 0, hi = 0;
        for (int j = 0; j < n; j++) {
            const int t = b->o->res[index[j]].n_src;
            sum += t;
            lo = j == 0 || t < lo ? t : lo;
            hi = t > hi ? t : hi;
        }
        fprintf(stderr, "attend: batch of %d sentence%s, %lld source tokens, lengths %d-%d\n", n,
                n == 1 ? "" : "s", sum, lo, hi);
    }
    b->status = write_ready(b->cx, b->o);
    return b->status;
}

/* Translate the k non-blank lines todo[0..k), writing what is ready after each batch.
 * Returns 0 or an exit status. */
static int translate_sorted(translate_ctx *cx, const char **todo, const size_t *todo_len,
                            const char *const *todo_prefix, int k, chunk_output *o) {
    batch_ctx b = {cx, o, 0};
    attend_params p = cx->p;
    p.target_prefix = todo_prefix;
    p.on_batch = batch_done;
    p.user = &b;
    char err[512];
    if (attend_translate(cx->m, todo, todo_len, k, NULL, &p, o->res, err, sizeof err)) {
        if (b.status) return b.status; /* a write failed: already reported */
        fprintf(stderr, "attend: %s\n", err);
        return EXIT_FAIL;
    }
    return 0;
}

/* The prefixes of a chunk's n lines into pre[0..n): --prefix for each, or the next n lines
 * of --prefix-file (malloc'd, *owned set; a blank input line takes its line too, so the
 * two files stay in step), or NULLs. 0 or an exit status. */
static int read_prefixes(translate_ctx *cx, char **pre, int n, int *owned) {
    *owned = cx->prefixes != NULL;
    for (int i = 0; i < n; i++) {
        pre[i] = (char *)cx->o->prefix;
        if (!cx->prefixes) continue;
        size_t cap = 0;
        ssize_t got = getline(&pre[i], &cap, cx->prefixes);
        if (got < 0) {
            free(pre[i]);
            pre[i] = NULL;
            fprintf(stderr, "attend: --prefix-file %s: no line for input line %lld (it has %lld)\n",
                    cx->o->prefix_file, cx->n_read + 1, cx->n_read);
            return EXIT_USAGE;
        }
        while (got > 0 && (pre[i][got - 1] == '\n' || pre[i][got - 1] == '\r')) pre[i][--got] = 0;
        cx->n_read++;
    }
    return 0;
}

/* Translate a chunk and write one line per input, in order. Blank lines give blank lines
 * without running the model. Returns 0 or an exit status. */
static int translate_chunk(translate_ctx *cx, char **lines, size_t *lens, int n) {
    if (cx->o->html) { /* HTML fragments: attend_translate_html, one output line each */
        const int status = translate_html_lines(cx->m, &cx->p, lines, lens, n, cx->n_done);
        cx->n_done += n;
        return status;
    }
    const char **todo = malloc(sizeof(char *) * (size_t)n);
    size_t *todo_len = malloc(sizeof(size_t) * (size_t)n);
    char **pre = calloc((size_t)n, sizeof(char *));
    const char **todo_pre = calloc((size_t)n, sizeof(char *));
    int *slot = malloc(sizeof(int) * (size_t)n);
    attend_result *res = calloc((size_t)n, sizeof *res), *rres = calloc((size_t)n, sizeof *rres);
    int status = 0, k = 0, owned = 0;
    if (!todo || !todo_len || !pre || !todo_pre || !slot || !res || !rres) {
        fprintf(stderr, "attend: out of memory\n");
        status = EXIT_FAIL;
    }
    if (!status) status = read_prefixes(cx, pre, n, &owned);
    for (int i = 0; !status && i < n; i++) {
        slot[i] = -1;
        if (!cli_is_blank(lines[i], lens[i])) {
            slot[i] = k;
            todo_pre[k] = pre[i];
            todo[k] = lines[i];
            todo_len[k++] = lens[i];
        }
    }
    if (!status && cx->o->verbose) fprintf(stderr, "attend: %d line%s, %d to translate\n", n, n == 1 ? "" : "s", k);
    for (int i = 0; cx->p.split == ATTEND_SPLIT_SENTENCES && i < n; i++)
        if (lens[i] > SPLIT_MAX_LINE && slot[i] >= 0) todo_len[slot[i]] = SPLIT_MAX_LINE;
    chunk_output o = {n, slot, res, 0, lens, todo, rres};
    const int any_prefix = cx->o->prefix || cx->prefixes;
    if (!status && k) status = translate_sorted(cx, todo, todo_len, any_prefix ? todo_pre : NULL, k, &o);
    if (!status) status = write_ready(cx, &o); /* blank lines after the last translation */
    for (int i = 0; res && rres && i < k; i++) { /* those not written */
        attend_result_free(&res[i]);
        attend_result_free(&rres[i]);
    }
    for (int i = 0; owned && i < n; i++) free(pre[i]);
    free(res);
    free(rres);
    free(todo);
    free(todo_len);
    free(pre);
    free(todo_pre);
    free(slot);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * Input: the TEXT arguments, or standard input */

/* The TEXT arguments, chunk lines at a time. */
static int translate_texts(translate_ctx *cx, int chunk) {
    int status = 0;
    for (int i = 0; !status && i < cx->o->n_texts; i += chunk) {
        int n = cx->o->n_texts - i < chunk ? cx->o->n_texts - i : chunk;
        size_t *lens = malloc(sizeof(size_t) * (size_t)n);
        if (!lens) {
            fprintf(stderr, "attend: out of memory\n");
            return EXIT_FAIL;
        }
        for (int j = 0; j < n; j++) lens[j] = strlen(cx->o->texts[i + j]);
        status = translate_chunk(cx, cx->o->texts + i, lens, n);
        free(lens);
    }
    return status;
}

/* Up to chunk lines of r, copied out (the buffer moves when refilled) into lines and lens:
 * block for the first, then take whatever else has already arrived. Sets *n (0 at the end of
 * the input); returns 0 or an exit status. */
static int read_chunk(line_reader *r, char **lines, size_t *lens, int chunk, int *n) {
    for (*n = 0;;) {
        char *s;
        size_t l;
        if (*n < chunk && line_reader_take(r, &s, &l)) {
            lines[*n] = malloc(l + 1);
            if (!lines[*n]) {
                fprintf(stderr, "attend: out of memory for a %zu-byte line\n", l);
                return EXIT_FAIL;
            }
            memcpy(lines[*n], s, l);
            lines[*n][l] = 0;
            lens[(*n)++] = l;
            continue;
        }
        if (*n == chunk || r->eof) return 0;
        if (*n > 0 && !line_reader_waiting(r)) return 0;
        if (line_reader_fill(r) < 0) {
            fprintf(stderr, "attend: reading input: %s\n", strerror(errno));
            return EXIT_IO;
        }
    }
}

/* Standard input, a chunk of the lines already waiting at a time. */
static int translate_stdin(translate_ctx *cx, int chunk) {
    line_reader r = {0};
    /* one byte more than the tokenizer reads, so that it sees the line was cut */
    r.max_line = (size_t)attend_get_config(cx->m)->max_line_bytes + 1;
    if ((cx->p.split == ATTEND_SPLIT_SENTENCES || cx->o->html) && r.max_line < SPLIT_MAX_LINE + 1)
        r.max_line = SPLIT_MAX_LINE + 1; /* HTML: the tags do not count against the model */
    char **lines = malloc(sizeof(char *) * (size_t)chunk);
    size_t *lens = malloc(sizeof(size_t) * (size_t)chunk);
    if (!lines || !lens) {
        fprintf(stderr, "attend: out of memory\n");
        return EXIT_FAIL;
    }
    int status = 0;
    while (!status) {
        int n = 0;
        status = read_chunk(&r, lines, lens, chunk, &n);
        if (n == 0) break;
        if (!status) status = translate_chunk(cx, lines, lens, n);
        for (int j = 0; j < n; j++) free(lines[j]);
    }
    free(lines);
    free(lens);
    free(r.buf);
    return status;
}

/* ---------------------------------------------------------------------------------------
 * translate */

/* The parameters of the run, and --dump-attention's archive opened. 0 or EXIT_IO. */
static int prepare(translate_ctx *cx) {
    const translate_options *o = cx->o;
    cx->p = o->p;
    cx->p.want_attention = o->align;
    if (o->dump_path) {
        char err[512];
        cx->dump = npz_open(o->dump_path, err, sizeof err);
        if (!cx->dump) {
            fprintf(stderr, "attend: --dump-attention: %s\n", err);
            return EXIT_IO;
        }
        cx->p.want_attention = cx->p.want_scores = 1;
        cx->p.want_logits = o->dump_logits;
    }
    if (o->prefix_file && !(cx->prefixes = fopen(o->prefix_file, "r"))) {
        fprintf(stderr, "attend: --prefix-file %s: %s\n", o->prefix_file, strerror(errno));
        return EXIT_IO;
    }
    cx->p.batch_size = o->batch || o->batch_tokens ? o->batch : DEFAULT_BATCH;
    cx->p.batch_tokens = o->batch_tokens;
    return 0;
}

/* Lines read at once: several batches, to sort them by length (a --batch-tokens batch
 * guessed at 16 tokens a sentence); attention results are big, so then about one batch. */
static int chunk_lines(const attend_params *p) {
    const int several = p->want_attention ? 1 : 8;
    const long long want = p->batch_size ? (long long)p->batch_size * several
                                         : (long long)p->batch_tokens * several / 16;
    return want < 1 ? 1 : want > 100000 ? 100000 : (int)want;
}

/* Close the archive and report lines not translated; the exit status. */
static int finish(translate_ctx *cx, int status) {
    char err[512];
    if (cx->dump && npz_close(cx->dump, err, sizeof err)) {
        fprintf(stderr, "attend: --dump-attention %s: %s\n", cx->o->dump_path, err);
        if (!status) status = EXIT_IO;
    }
    attend_free(cx->m);
    attend_free(cx->rm);
    if (cx->prefixes) {
        char *extra = NULL;
        size_t cap = 0;
        if (!status && getline(&extra, &cap, cx->prefixes) >= 0) {
            fprintf(stderr, "attend: --prefix-file %s: more lines than the input's %lld\n", cx->o->prefix_file,
                    cx->n_read);
            status = EXIT_USAGE;
        }
        free(extra);
        fclose(cx->prefixes);
    }
    if (!status && cx->failed) {
        fprintf(stderr, "attend: %lld line%s not translated (empty output lines)\n", cx->failed,
                cx->failed == 1 ? "" : "s");
        status = EXIT_FAIL;
    }
    return status;
}

int cmd_translate(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        translate_usage(stdout);
        return EXIT_OK;
    }
    translate_options o;
    int status = translate_parse(argc, argv, &o);
    if (!status) status = translate_check_options(&o);
    if (status) return status;
    translate_ctx cx = {&o, cli_load_model(o.common.model), {0}, NULL, 0, 0, NULL, 0, NULL, {0}};
    status = translate_check_with_model(&o, cx.m);
    if (!status) status = prepare(&cx);
    if (!status && o.reverse_model) { /* exits with a message when it does not load */
        cx.rm = cli_load_model(o.reverse_model);
        cx.rp = cli_reverse_params(&o.common);
    }
    if (!status && o.document) {
        status = translate_html_document(cx.m, &cx.p, o.document);
    } else if (!status) {
        const int chunk = chunk_lines(&cx.p);
        status = o.n_texts > 0 ? translate_texts(&cx, chunk) : translate_stdin(&cx, chunk);
    }
    return finish(&cx, status);
}
