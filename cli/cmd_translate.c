/* attend translate: one line in, one line out, in order, flushed as soon as ready. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../model/align.h"
#include "cli.h"
#include "npz.h"

#define DEFAULT_BATCH 32

/* ---------------------------------------------------------------------------------------
 * Reading lines: our own buffer on fd 0, so we know which lines are already here and can
 * batch them without waiting for more (interactive use stays one line in, one line out). */

typedef struct {
    int fd;
    char *buf;
    size_t len, cap, start;
    size_t max_line; /* bytes kept of a longer line; the rest is read and dropped */
    int eof;
    int skipping;    /* inside the dropped rest of a line */
} line_reader;

/* Pull more bytes. Returns 1 if some arrived, 0 at end of input, -1 on error. The buffer
 * holds at most one partial line (at most max_line bytes) besides what arrives, so it stays
 * small however long a line is. */
static int reader_fill(line_reader *r) {
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->len - r->start);
        r->len -= r->start;
        r->start = 0;
    }
    if (r->len + 65536 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 1 << 17;
        char *p = realloc(r->buf, cap);
        if (!p) return -1;
        r->buf = p;
        r->cap = cap;
    }
    for (;;) {
        ssize_t k = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return -1;
        if (k == 0) {
            r->eof = 1;
            return 0;
        }
        r->len += (size_t)k;
        return 1;
    }
}

/* A complete line already buffered? Sets line and length (without \n or \r\n). A line
 * longer than max_line is given as its first max_line bytes as soon as they are here, and
 * its rest up to the \n is dropped as it arrives. */
static int reader_take(line_reader *r, char **line, size_t *n) {
    if (!r->buf) return 0; /* nothing read yet (memchr on NULL is undefined even for 0 bytes) */
    if (r->skipping) {
        char *end = memchr(r->buf + r->start, '\n', r->len - r->start);
        r->start = end ? (size_t)(end - r->buf) + 1 : r->len;
        if (!end) return 0;
        r->skipping = 0;
    }
    char *s = r->buf + r->start;
    const size_t avail = r->len - r->start;
    char *nl = memchr(s, '\n', avail);
    size_t l = nl ? (size_t)(nl - s) : avail;
    if (l > r->max_line) {
        *line = s;
        *n = r->max_line;
        r->start += nl ? l + 1 : r->max_line;
        r->skipping = !nl;
        return 1;
    }
    if (!nl && !(r->eof && avail > 0)) return 0;
    r->start += l + (nl ? 1 : 0);
    if (l && s[l - 1] == '\r') l--;
    *line = s;
    *n = l;
    return 1;
}

static int input_waiting(int fd) {
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
}

/* ---------------------------------------------------------------------------------------
 * translate */

static void usage_translate(FILE *f) {
    fprintf(f,
            "usage: attend translate [-m MODEL.gguf] [options] [TEXT ...]\n"
            "\n"
            "Translate each TEXT argument, or else each line of standard input: exactly one\n"
            "output line per input line, in order, flushed as soon as it is ready. Options may\n"
            "come anywhere; '--' ends them (for a TEXT that starts with '-').\n"
            "\n"
            "options:\n"
            "  -m, --model FILE        checkpoint (default: $ATTEND_MODEL, else the shipped\n"
            "                          models/de-en.gguf next to the binary)\n"
            "  -t, --threads N         threads (default: physical cores, or\n"
            "                          $OMP_NUM_THREADS)\n"
            "  -b, --batch-size N      sentences translated together; lines already waiting are\n"
            "                          sorted by length into batches, output stays in order\n"
            "                          (default %d, or no limit with --batch-tokens alone)\n"
            "      --batch-tokens N    at most N source tokens per batch (a longer sentence\n"
            "                          goes alone); with -b, both limits hold\n"
            "  -v, --verbose           one line per chunk of input and per batch on stderr\n"
            "      --max-length N      generation limit counting the start token\n"
            "                          (default: the model's max_length)\n"
            "      --src-lang L        multilingual models (M2M-100, NLLB, mBART): the\n"
            "                          source language, one of the codes `attend info`\n"
            "                          lists (required)\n"
            "      --tgt-lang L        multilingual models: the target language (required);\n"
            "                          Marian models with >>xx<< codes: writes >>L<< first\n"
            "      --dump-attention F  write every attention matrix, ids and pieces to the\n"
            "                          NumPy archive F (.npz); see README\n"
            "      --dump-logits       with --dump-attention: also the raw logits per step\n"
            "      --alignment[=VIEW]  append ' ||| ' and the word alignment (Pharaoh i-j,\n"
            "                          0-based source-target) from attention VIEW (default\n"
            "                          " ATTEND_DEFAULT_VIEW "; see attend align --help)\n"
            "\n"
            "search (default: the model's generation settings, as HF generate() uses them;\n"
            "greedy for files that record none; see attend info):\n"
            "      --beam N            beam search with N beams (1: greedy)\n"
            "      --greedy            the same as --beam 1\n"
            "      --length-penalty X  beam score = sum of log-probs / length^X\n"
            "      --early-stopping V  true, false or never (HF's early_stopping)\n"
            "      --n-best K          K lines per input line, best first:\n"
            "                          'i ||| translation ||| score' (i counts lines from 0)\n"
            "      --min-length N      no </s> before N tokens (the start token counted)\n"
            "      --no-repeat-ngram-size N  no n-gram of this size twice\n"
            "      --repetition-penalty X    HF's penalty on tokens already generated\n"
            "      --sample            draw each token at random (with --n-best K: K samples)\n"
            "      --top-k K           sampling: only the K most likely tokens\n"
            "      --top-p P           sampling: only the smallest set holding probability P\n"
            "      --temperature T     sampling: divide the logits by T (default 1)\n"
            "      --seed S            sampling: a line's draws depend on S and the line only\n"
            "                          (default 0)\n"
            "  -h, --help              this help\n",
            DEFAULT_BATCH);
}

typedef struct {
    attend_model *m;
    attend_params p;
    npz_writer *dump;
    int dump_logits;
    int align;        /* --alignment: append " ||| " and the Pharaoh alignment */
    attend_view view;
    long long n_done; /* lines written so far */
    int batch;        /* --batch-size: at most this many sentences per batch (0: no limit) */
    int batch_tokens; /* --batch-tokens: at most this many source tokens per batch (0: no limit) */
    int verbose;      /* -v: one line per chunk and per batch on stderr */
    int nbest;        /* --n-best K: K lines per input line (0: one plain line) */
    long long failed; /* lines the library could not translate (attend_result.status) */
} translate_ctx;

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v' && s[i] != 0)
            return 0; /* NUL reads as a space (model/text.c) */
    return 1;
}

/* ---------------------------------------------------------------------------------------
 * Writing: a chunk's lines go out in input order, each as soon as it and every line before
 * it are translated, so output follows each batch rather than each chunk. */

typedef struct {
    int n;                /* lines in the chunk */
    const int *slot;      /* line i -> its index among the lines translated, -1 if blank */
    attend_result *res;   /* [k] translations, by slot (text set once translated); freed
                           * once written */
    int written;          /* lines 0..written are out */
} chunk_output;

/* Write one output line: the translation r (NULL for a blank line). Returns 0 or an exit
 * status. */
static void one_line(char *t) { /* one line out, whatever the vocabulary holds */
    for (; *t; t++)
        if (*t == '\n' || *t == '\r') *t = ' ';
}

static int write_line(translate_ctx *cx, attend_result *r) {
    const long long idx = ++cx->n_done; /* 1-based input line */
    if (r && r->status) { /* reported, and an empty line keeps the output in step */
        fprintf(stderr, "attend: line %lld: %s\n", idx, r->message ? r->message : "not translated");
        cx->failed++;
        r = NULL;
    }
    if (!r) {
        if (cx->nbest)
            for (int k = 0; k < cx->nbest; k++) printf("%lld |||  ||| 0.000000\n", idx - 1);
        else
            fputs(cx->align ? " ||| \n" : "\n", stdout);
        return 0;
    }
    const attend_config *c = attend_get_config(cx->m);
    const size_t max_bytes = (size_t)c->max_line_bytes;
    if (r->truncated && r->n_src >= c->model_max_length && c->model_max_length < c->max_position_embeddings)
        fprintf(stderr, "attend: line %lld: longer than the tokenizer's %d tokens (model_max_length); "
                "translated its first %d\n", idx, c->model_max_length, r->n_src);
    else if (r->truncated && r->n_src >= c->max_position_embeddings)
        fprintf(stderr, "attend: line %lld: longer than the model's %d positions; "
                "translated its first %d tokens\n", idx, c->max_position_embeddings, r->n_src);
    else if (r->truncated) /* many bytes, few tokens (runs of spaces, say) */
        fprintf(stderr, "attend: line %lld: longer than %zu bytes; translated its first %zu (%d tokens)\n",
                idx, max_bytes, max_bytes, r->n_src);
    if (cx->nbest) { /* Marian's n-best layout; fewer hypotheses than K cannot happen */
        for (int k = 0; k < r->n_best; k++) {
            one_line(r->nbest[k].text);
            printf("%lld ||| %s ||| %.6f\n", idx - 1, r->nbest[k].text, r->nbest[k].score);
        }
        if (cx->dump) cli_dump_result(cx->dump, attend_get_config(cx->m), idx - 1, r, cx->dump_logits);
        return 0;
    }
    one_line(r->text);
    fputs(r->text, stdout);
    if (cx->align) {
        char err[512];
        char *al = attend_alignment(r, c, &cx->view, err, sizeof err);
        if (!al) {
            fprintf(stderr, "attend: --alignment: %s\n", err);
            return EXIT_USAGE;
        }
        printf(" ||| %s", al);
        free(al);
    }
    fputc('\n', stdout);
    if (cx->dump) cli_dump_result(cx->dump, c, idx - 1, r, cx->dump_logits);
    return 0;
}

/* Write the lines that are ready and in order, and flush them. Returns 0 or an exit status. */
static int write_ready(translate_ctx *cx, chunk_output *o) {
    const int from = o->written;
    while (o->written < o->n) {
        const int k = o->slot[o->written];
        if (k >= 0 && !o->res[k].text) break; /* not translated yet */
        int status = write_line(cx, k >= 0 ? &o->res[k] : NULL);
        if (k >= 0) attend_result_free(&o->res[k]); /* attention results are big */
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

static int batch_done(void *user, const int *index, int n) {
    batch_ctx *b = user;
    if (b->cx->verbose) {
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
static int translate_sorted(translate_ctx *cx, const char **todo, const size_t *todo_len, int k,
                            chunk_output *o) {
    batch_ctx b = {cx, o, 0};
    attend_params p = cx->p;
    p.batch_size = cx->batch;
    p.batch_tokens = cx->batch_tokens;
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

/* Translate a chunk and write one line per input, in order. Blank lines give blank lines
 * without running the model. Returns 0 or an exit status. */
static int translate_batch(translate_ctx *cx, char **lines, size_t *lens, int n) {
    const char **todo = malloc(sizeof(char *) * (size_t)n);
    size_t *todo_len = malloc(sizeof(size_t) * (size_t)n);
    int *slot = malloc(sizeof(int) * (size_t)n);
    attend_result *res = calloc((size_t)n, sizeof *res);
    int status = 0, k = 0;
    if (!todo || !todo_len || !slot || !res) {
        fprintf(stderr, "attend: out of memory\n");
        status = EXIT_FAIL;
    }
    for (int i = 0; !status && i < n; i++) {
        slot[i] = -1;
        if (!is_blank(lines[i], lens[i])) {
            slot[i] = k;
            todo[k] = lines[i];
            todo_len[k++] = lens[i];
        }
    }
    if (!status && cx->verbose) fprintf(stderr, "attend: %d line%s, %d to translate\n", n, n == 1 ? "" : "s", k);
    chunk_output o = {n, slot, res, 0};
    if (!status && k) status = translate_sorted(cx, todo, todo_len, k, &o);
    if (!status) status = write_ready(cx, &o); /* blank lines after the last translation */
    for (int i = 0; res && i < k; i++) attend_result_free(&res[i]); /* those not written */
    free(res);
    free(todo);
    free(todo_len);
    free(slot);
    return status;
}

int cmd_translate(int argc, char **argv) {
    const char *model = NULL, *dump_path = NULL;
    translate_ctx cx = {0};
    cx.p = attend_default_params();
    int batch = 0, batch_tokens = 0, n_texts = 0;
    if (cli_wants_help(argc, argv)) {
        usage_translate(stdout);
        return EXIT_OK;
    }
    /* options go anywhere before "--"; the TEXT arguments are gathered in place at the front
     * of argv (each slot written has already been read) */
    char **texts = argv + 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE CLI_NEED_VALUE("translate", a, v, i)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            NEED_VALUE model = v;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            NEED_VALUE cx.p.threads = cli_parse_int(a, v, 1, 1024);
        } else if (!strcmp(a, "-b") || !strcmp(a, "--batch-size")) {
            NEED_VALUE batch = cli_parse_int(a, v, 1, 100000);
        } else if (!strcmp(a, "--batch-tokens")) {
            NEED_VALUE batch_tokens = cli_parse_int(a, v, 1, 10000000);
        } else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) {
            cx.verbose = 1;
        } else if (!strcmp(a, "--max-length")) {
            NEED_VALUE cx.p.max_length = cli_parse_int(a, v, 2, 1 << 20);
        } else if (!strcmp(a, "--src-lang")) {
            NEED_VALUE cx.p.src_lang = v;
        } else if (!strcmp(a, "--tgt-lang")) {
            NEED_VALUE cx.p.tgt_lang = v;
        } else if (!strcmp(a, "--beam")) {
            NEED_VALUE cx.p.num_beams = cli_parse_int(a, v, 1, 1024);
        } else if (!strcmp(a, "--greedy")) {
            cx.p.num_beams = 1;
        } else if (!strcmp(a, "--length-penalty")) {
            NEED_VALUE cx.p.length_penalty = cli_parse_float(a, v, -100, 100);
            cx.p.set_length_penalty = 1;
        } else if (!strcmp(a, "--early-stopping")) {
            NEED_VALUE cx.p.early_stopping = !strcmp(v, "true")    ? ATTEND_EARLY_TRUE
                                             : !strcmp(v, "false") ? ATTEND_EARLY_FALSE
                                             : !strcmp(v, "never") ? ATTEND_EARLY_NEVER
                                                                   : -1;
            if (cx.p.early_stopping < 0) {
                fprintf(stderr, "attend translate: --early-stopping is true, false or never, not '%s'\n", v);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--n-best")) {
            NEED_VALUE cx.p.n_best = cx.nbest = cli_parse_int(a, v, 1, 1024);
        } else if (!strcmp(a, "--min-length")) {
            NEED_VALUE cx.p.min_length = cli_parse_int(a, v, 0, 1 << 20);
            cx.p.set_min_length = 1;
        } else if (!strcmp(a, "--no-repeat-ngram-size")) {
            NEED_VALUE cx.p.no_repeat_ngram_size = cli_parse_int(a, v, 0, 1 << 20);
            cx.p.set_no_repeat_ngram_size = 1;
        } else if (!strcmp(a, "--repetition-penalty")) {
            NEED_VALUE cx.p.repetition_penalty = cli_parse_float(a, v, 1e-6, 1e6);
        } else if (!strcmp(a, "--sample")) {
            cx.p.sample = 1;
        } else if (!strcmp(a, "--top-k")) {
            NEED_VALUE cx.p.top_k = cli_parse_int(a, v, 0, 1 << 24);
        } else if (!strcmp(a, "--top-p")) {
            NEED_VALUE cx.p.top_p = cli_parse_float(a, v, 1e-9, 1);
        } else if (!strcmp(a, "--temperature")) {
            NEED_VALUE cx.p.temperature = cli_parse_float(a, v, 1e-9, 1e9);
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE cx.p.seed = (unsigned long long)cli_parse_int(a, v, 0, 2147483647);
        } else if (!strcmp(a, "--dump-attention")) {
            NEED_VALUE dump_path = v;
        } else if (!strcmp(a, "--dump-logits")) {
            cx.dump_logits = 1;
        } else if (!strcmp(a, "--alignment") || !strncmp(a, "--alignment=", 12)) {
            char verr[300];
            cx.align = 1;
            if (attend_view_parse(a[11] ? a + 12 : ATTEND_DEFAULT_VIEW, &cx.view, verr, sizeof verr)) {
                fprintf(stderr, "attend translate: --alignment: %s\n", verr);
                return EXIT_USAGE;
            }
        } else if (!strcmp(a, "--")) {
            while (++i < argc) texts[n_texts++] = argv[i];
        } else if (cli_is_option(a)) {
            return cli_unknown_option("translate", a);
        } else {
            texts[n_texts++] = argv[i];
        }
    }
#undef NEED_VALUE
    if (cx.nbest && cx.align) {
        fprintf(stderr, "attend translate: --alignment describes one translation: not with --n-best\n");
        return EXIT_USAGE;
    }
    if (!cx.p.sample && (cx.p.top_k || cx.p.top_p > 0 || cx.p.temperature > 0 || cx.p.seed)) {
        fprintf(stderr, "attend translate: --top-k, --top-p, --temperature and --seed need --sample\n");
        return EXIT_USAGE;
    }
    if (cx.p.sample && cx.p.num_beams > 1) {
        fprintf(stderr, "attend translate: --sample draws one token at a time: not with --beam %d\n",
                cx.p.num_beams);
        return EXIT_USAGE;
    }
    if (cx.dump_logits && !dump_path) {
        fprintf(stderr, "attend translate: --dump-logits needs --dump-attention FILE\n");
        return EXIT_USAGE;
    }
    cx.m = cli_load_model(model);
    char err[512];
    if (cli_check_languages("translate", cx.m, cx.p.src_lang, cx.p.tgt_lang, 1)) {
        attend_free(cx.m);
        return EXIT_USAGE;
    }
    {
        const attend_config *c = attend_get_config(cx.m);
        const int beams = cx.p.num_beams ? cx.p.num_beams : c->generation_recorded && !cx.p.sample ? c->num_beams : 1;
        if (cx.nbest > beams && !cx.p.sample) {
            fprintf(stderr, "attend translate: --n-best %d needs at least as many beams (--beam %d)\n", cx.nbest,
                    cx.nbest);
            attend_free(cx.m);
            return EXIT_USAGE;
        }
    }
    if (cx.align) {
        const attend_config *c = attend_get_config(cx.m);
        if (attend_view_check(&cx.view, c->decoder_layers, c->decoder_heads, err, sizeof err)) {
            fprintf(stderr, "attend translate: --alignment: %s\n", err);
            attend_free(cx.m);
            return EXIT_USAGE;
        }
        cx.p.want_attention = 1;
    }
    if (dump_path) {
        cx.dump = npz_open(dump_path, err, sizeof err);
        if (!cx.dump) {
            fprintf(stderr, "attend: --dump-attention: %s\n", err);
            attend_free(cx.m);
            return EXIT_IO;
        }
        cx.p.want_attention = cx.p.want_scores = 1;
        cx.p.want_logits = cx.dump_logits;
    }
    if (!batch && !batch_tokens) batch = DEFAULT_BATCH;
    cx.batch = batch, cx.batch_tokens = batch_tokens;
    /* lines already waiting are read in chunks of several batches to sort them by length
     * (a --batch-tokens batch guessed at 16 tokens a sentence); attention results are big,
     * so then about one batch per chunk */
    const int several = cx.p.want_attention ? 1 : 8;
    long long want = batch ? (long long)batch * several : (long long)batch_tokens * several / 16;
    const int chunk = want < 1 ? 1 : want > 100000 ? 100000 : (int)want;
    int status = 0;
    if (n_texts > 0) {
        for (int i = 0; !status && i < n_texts; i += chunk) {
            int n = n_texts - i < chunk ? n_texts - i : chunk;
            size_t *lens = malloc(sizeof(size_t) * (size_t)n);
            if (!lens) {
                fprintf(stderr, "attend: out of memory\n");
                return EXIT_FAIL;
            }
            for (int j = 0; j < n; j++) lens[j] = strlen(texts[i + j]);
            status = translate_batch(&cx, texts + i, lens, n);
            free(lens);
        }
    } else {
        line_reader r = {0};
        /* one byte more than the tokenizer reads, so that it sees the line was cut */
        r.max_line = (size_t)attend_get_config(cx.m)->max_line_bytes + 1;
        char **lines = malloc(sizeof(char *) * (size_t)chunk);
        size_t *lens = malloc(sizeof(size_t) * (size_t)chunk);
        if (!lines || !lens) {
            fprintf(stderr, "attend: out of memory\n");
            return EXIT_FAIL;
        }
        while (!status) {
            int n = 0;
            /* block for the first line, then take whatever else has already arrived */
            for (;;) {
                char *s;
                size_t l;
                if (n < chunk && reader_take(&r, &s, &l)) {
                    lines[n] = s; /* copy out: the buffer moves when refilled */
                    lines[n] = malloc(l + 1);
                    if (!lines[n]) {
                        fprintf(stderr, "attend: out of memory for a %zu-byte line\n", l);
                        return EXIT_FAIL;
                    }
                    memcpy(lines[n], s, l);
                    lines[n][l] = 0;
                    lens[n++] = l;
                    continue;
                }
                if (n == chunk || r.eof) break;
                if (n > 0 && !input_waiting(r.fd)) break;
                int got = reader_fill(&r);
                if (got < 0) {
                    fprintf(stderr, "attend: reading input: %s\n", strerror(errno));
                    status = EXIT_IO;
                    break;
                }
            }
            if (n == 0) break;
            if (!status) status = translate_batch(&cx, lines, lens, n);
            for (int j = 0; j < n; j++) free(lines[j]);
        }
        free(lines);
        free(lens);
        free(r.buf);
    }
    if (cx.dump && npz_close(cx.dump, err, sizeof err)) {
        fprintf(stderr, "attend: --dump-attention %s: %s\n", dump_path, err);
        if (!status) status = EXIT_IO;
    }
    attend_free(cx.m);
    if (!status && cx.failed) {
        fprintf(stderr, "attend: %lld line%s not translated (empty output lines)\n", cx.failed,
                cx.failed == 1 ? "" : "s");
        status = EXIT_FAIL;
    }
    return status;
}

