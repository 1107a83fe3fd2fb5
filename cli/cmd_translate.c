/* attend translate: one line in, one line out, in order, flushed as soon as ready. The options
 * are read into a translate_options, the lines translated in chunks (the library sorts each
 * chunk by length into batches) and written by output.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/align.h"
#include "cli.h"
#include "line_reader.h"
#include "npz.h"
#include "options.h"
#include "output.h"

#define DEFAULT_BATCH 32

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

/* ---------------------------------------------------------------------------------------
 * Options */

typedef struct {
    cli_model_options common; /* -m, -t, --beam, --greedy, --src-lang, --tgt-lang */
    attend_params p;          /* the search settings; common's are copied in after parsing */
    const char *dump_path;    /* --dump-attention */
    int dump_logits;          /* --dump-logits */
    int align;                /* --alignment: append " ||| " and the Pharaoh alignment */
    attend_view view;         /* its attention view */
    int batch;                /* --batch-size: at most this many sentences per batch (0: no limit) */
    int batch_tokens;         /* --batch-tokens: at most this many source tokens per batch (0: no limit) */
    int verbose;              /* -v: one line per chunk and per batch on stderr */
    int nbest;                /* --n-best K: K lines per input line (0: one plain line) */
    char **texts;             /* the TEXT arguments (gathered in place at the front of argv) */
    int n_texts;
} translate_options;

/* The defaults: the model's own search settings, its default thread count and model,
 * DEFAULT_BATCH sentences a batch (set when the run starts: --batch-tokens alone lifts it). */
static translate_options translate_default_options(void) {
    translate_options o;
    memset(&o, 0, sizeof o);
    o.p = attend_default_params();
    return o;
}

static int take_early_stopping(cli_args *a, attend_params *p) {
    const char *v;
    const int rc = cli_take_str(a, &v);
    if (rc != CLI_OPT_TAKEN) return rc;
    p->early_stopping = !strcmp(v, "true")    ? ATTEND_EARLY_TRUE
                        : !strcmp(v, "false") ? ATTEND_EARLY_FALSE
                        : !strcmp(v, "never") ? ATTEND_EARLY_NEVER
                                              : -1;
    if (p->early_stopping >= 0) return CLI_OPT_TAKEN;
    fprintf(stderr, "attend translate: --early-stopping is true, false or never, not '%s'\n", v);
    return EXIT_USAGE;
}

/* The options of the search and its logits processors, into o->p. */
static int take_search_option(cli_args *a, translate_options *o) {
    attend_params *p = &o->p;
    int rc = CLI_OPT_OTHER, seed;
    if (cli_is(a, NULL, "--max-length")) return cli_take_int(a, 2, 1 << 20, &p->max_length);
    if (cli_is(a, NULL, "--early-stopping")) return take_early_stopping(a, p);
    if (cli_is(a, NULL, "--repetition-penalty")) return cli_take_float(a, 1e-6, 1e6, &p->repetition_penalty);
    if (cli_is(a, NULL, "--top-k")) return cli_take_int(a, 0, 1 << 24, &p->top_k);
    if (cli_is(a, NULL, "--top-p")) return cli_take_float(a, 1e-9, 1, &p->top_p);
    if (cli_is(a, NULL, "--temperature")) return cli_take_float(a, 1e-9, 1e9, &p->temperature);
    if (cli_is(a, NULL, "--length-penalty")) {
        rc = cli_take_float(a, -100, 100, &p->length_penalty);
        p->set_length_penalty = 1;
    } else if (cli_is(a, NULL, "--n-best")) {
        rc = cli_take_int(a, 1, 1024, &o->nbest);
        p->n_best = o->nbest;
    } else if (cli_is(a, NULL, "--min-length")) {
        rc = cli_take_int(a, 0, 1 << 20, &p->min_length);
        p->set_min_length = 1;
    } else if (cli_is(a, NULL, "--no-repeat-ngram-size")) {
        rc = cli_take_int(a, 0, 1 << 20, &p->no_repeat_ngram_size);
        p->set_no_repeat_ngram_size = 1;
    } else if (cli_is(a, NULL, "--sample")) {
        p->sample = 1;
        rc = CLI_OPT_TAKEN;
    } else if (cli_is(a, NULL, "--seed") && (rc = cli_take_int(a, 0, 2147483647, &seed)) == CLI_OPT_TAKEN) {
        p->seed = (unsigned long long)seed;
    }
    return rc;
}

/* --alignment or --alignment=VIEW. */
static int take_alignment(const char *arg, translate_options *o) {
    char verr[300];
    o->align = 1;
    if (attend_view_parse(arg[11] ? arg + 12 : ATTEND_DEFAULT_VIEW, &o->view, verr, sizeof verr) == 0)
        return CLI_OPT_TAKEN;
    fprintf(stderr, "attend translate: --alignment: %s\n", verr);
    return EXIT_USAGE;
}

/* Batching, verbosity and what is written besides the translations. */
static int take_output_option(cli_args *a, translate_options *o) {
    const char *arg = a->argv[a->i];
    if (cli_is(a, "-b", "--batch-size")) return cli_take_int(a, 1, 100000, &o->batch);
    if (cli_is(a, NULL, "--batch-tokens")) return cli_take_int(a, 1, 10000000, &o->batch_tokens);
    if (cli_is(a, NULL, "--dump-attention")) return cli_take_str(a, &o->dump_path);
    if (cli_is(a, NULL, "--alignment") || !strncmp(arg, "--alignment=", 12)) return take_alignment(arg, o);
    if (cli_is(a, "-v", "--verbose")) o->verbose = 1;
    else if (cli_is(a, NULL, "--dump-logits")) o->dump_logits = 1;
    else return CLI_OPT_OTHER;
    return CLI_OPT_TAKEN;
}

/* Options go anywhere before "--"; the TEXT arguments are gathered in place at the front of
 * argv (each slot written has already been read). 0 or EXIT_USAGE. */
static int parse_translate(int argc, char **argv, translate_options *o) {
    *o = translate_default_options();
    o->texts = argv + 1;
    cli_args a = {"translate", argc, argv, 0};
    for (a.i = 1; a.i < argc; a.i++) {
        int rc = cli_model_option(&a, &o->common);
        if (rc == CLI_OPT_OTHER) rc = take_search_option(&a, o);
        if (rc == CLI_OPT_OTHER) rc = take_output_option(&a, o);
        if (rc != CLI_OPT_OTHER) {
            if (rc) return rc;
        } else if (!strcmp(argv[a.i], "--")) {
            while (++a.i < argc) o->texts[o->n_texts++] = argv[a.i];
        } else if (cli_is_option(argv[a.i])) {
            return cli_unknown_option("translate", argv[a.i]);
        } else {
            o->texts[o->n_texts++] = argv[a.i];
        }
    }
    o->p.threads = o->common.threads;
    o->p.num_beams = o->common.beams;
    o->p.src_lang = o->common.src_lang;
    o->p.tgt_lang = o->common.tgt_lang;
    return 0;
}

/* Options that do not go together, before the model is loaded. 0 or EXIT_USAGE. */
static int check_options(const translate_options *o) {
    const attend_params *p = &o->p;
    if (o->nbest && o->align) {
        fprintf(stderr, "attend translate: --alignment describes one translation: not with --n-best\n");
        return EXIT_USAGE;
    }
    if (!p->sample && (p->top_k || p->top_p > 0 || p->temperature > 0 || p->seed)) {
        fprintf(stderr, "attend translate: --top-k, --top-p, --temperature and --seed need --sample\n");
        return EXIT_USAGE;
    }
    if (p->sample && p->num_beams > 1) {
        fprintf(stderr, "attend translate: --sample draws one token at a time: not with --beam %d\n", p->num_beams);
        return EXIT_USAGE;
    }
    if (o->dump_logits && !o->dump_path) {
        fprintf(stderr, "attend translate: --dump-logits needs --dump-attention FILE\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* The options against the model: its languages, its beams for --n-best, its layers and heads
 * for --alignment. 0 or EXIT_USAGE. */
static int check_with_model(const translate_options *o, const attend_model *m) {
    const attend_config *c = attend_get_config(m);
    char err[512];
    if (cli_check_languages("translate", m, o->p.src_lang, o->p.tgt_lang, 1)) return EXIT_USAGE;
    const int beams = o->p.num_beams ? o->p.num_beams : c->generation_recorded && !o->p.sample ? c->num_beams : 1;
    if (o->nbest > beams && !o->p.sample) {
        fprintf(stderr, "attend translate: --n-best %d needs at least as many beams (--beam %d)\n", o->nbest,
                o->nbest);
        return EXIT_USAGE;
    }
    if (o->align && attend_view_check(&o->view, c->decoder_layers, c->decoder_heads, err, sizeof err)) {
        fprintf(stderr, "attend translate: --alignment: %s\n", err);
        return EXIT_USAGE;
    }
    return 0;
}

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
} translate_ctx;

typedef struct {
    int n;                /* lines in the chunk */
    const int *slot;      /* line i -> its index among the lines translated, -1 if blank */
    attend_result *res;   /* [k] translations, by slot (text set once translated); freed
                           * once written */
    int written;          /* lines 0..written are out */
} chunk_output;

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v' && s[i] != 0)
            return 0; /* NUL reads as a space (model/text.c) */
    return 1;
}

/* Write one input line's output: the translation r (NULL for a blank line). Returns 0 or an
 * exit status. */
static int write_line(translate_ctx *cx, attend_result *r) {
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
    cli_warn_truncated(c, idx, r);
    int status = 0;
    if (o->nbest) cli_write_nbest(idx - 1, r); /* Marian's n-best layout */
    else status = cli_write_translation(r, c, o->align ? &o->view : NULL);
    if (!status && cx->dump) cli_dump_result(cx->dump, c, idx - 1, r, o->dump_logits);
    return status;
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
static int translate_sorted(translate_ctx *cx, const char **todo, const size_t *todo_len, int k,
                            chunk_output *o) {
    batch_ctx b = {cx, o, 0};
    attend_params p = cx->p;
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
static int translate_chunk(translate_ctx *cx, char **lines, size_t *lens, int n) {
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
    if (!status && cx->o->verbose) fprintf(stderr, "attend: %d line%s, %d to translate\n", n, n == 1 ? "" : "s", k);
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
    if (!status && cx->failed) {
        fprintf(stderr, "attend: %lld line%s not translated (empty output lines)\n", cx->failed,
                cx->failed == 1 ? "" : "s");
        status = EXIT_FAIL;
    }
    return status;
}

int cmd_translate(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_translate(stdout);
        return EXIT_OK;
    }
    translate_options o;
    int status = parse_translate(argc, argv, &o);
    if (!status) status = check_options(&o);
    if (status) return status;
    translate_ctx cx = {&o, cli_load_model(o.common.model), {0}, NULL, 0, 0};
    status = check_with_model(&o, cx.m);
    if (!status) status = prepare(&cx);
    if (!status) {
        const int chunk = chunk_lines(&cx.p);
        status = o.n_texts > 0 ? translate_texts(&cx, chunk) : translate_stdin(&cx, chunk);
    }
    return finish(&cx, status);
}
