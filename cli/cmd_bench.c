/* attend bench: time translation of random sources, and measure the machine in the same run
 * (memory bandwidth, and how much of it a batch-1 decoder step achieves; the multiply-add
 * peak, and how much of it the linear layers achieve). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "../model/attend.h"
#include "bench_bandwidth.h"
#include "bench_peak.h"
#include "cli.h"
#include "options.h"

static void usage_bench(FILE *f) {
    fprintf(f,
            "usage: attend bench -m MODEL.gguf [options]\n"
            "\n"
            "Translate B random sources of S tokens, decoding exactly T target tokens (</s> is\n"
            "never chosen early), R timed rounds after one warm-up, and report time per sentence,\n"
            "target tokens/s, encoder and decoder time, peak RSS, and the time to open the model\n"
            "and of its first (warm-up) round (--json: also their wall-clock ends, unix_loaded and\n"
            "unix_first_round, and unix_main, for timings from process start). With --beam N every one of a\n"
            "sentence's N beams runs to the limit (N decoder rows a step; T output tokens per\n"
            "sentence counted). Then measure the memory bandwidth (a STREAM-like triad,\n"
            "multi-threaded, over 3 x 640 MiB, and a pass that only reads the same arrays) and,\n"
            "at batch 1, the fraction of each that one decoder step reaches (weight bytes per\n"
            "step / step time). Then time register-only multiply-add loops on the same threads\n"
            "(f32 FMA; int8 vpdpbusd with AVX-512 VNNI, else vpmaddubsw + vpmaddwd) and report\n"
            "the linear layers' rate (2 x rows x in x out per layer, summed from the model's\n"
            "shapes over the run, per second of the run and of the decoder) against that peak:\n"
            "f32 peak for f32 and f16 models, int8 peak for int8 models (and, where int8 runs\n"
            "on AMX tiles, tdpbusd's peak beside it), vdpbf16ps's with --compute bf16. A\n"
            "multilingual model's sources start with its first language's token, which is also\n"
            "the target language.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE     checkpoint (required)\n"
            "  -b, --batch B        sentences per batch (default 1)\n"
            "  -s, --src-len S      source tokens per sentence, </s> included (default 20)\n"
            "  -n, --tgt-len T      target tokens decoded per sentence (default 20)\n"
            "  -t, --threads N      threads (default: physical cores,\n"
            "                       or $OMP_NUM_THREADS)\n"
            "      --compute T      f32 (default) or bf16 (AVX-512 BF16 CPUs)\n"
            "  -r, --rounds R       timed rounds (default 5)\n"
            "      --beam N         beam search with N beams, n-best 1, the model's other\n"
            "                       generation settings (default 1: greedy)\n"
            "      --seed N         random source ids (default 1)\n"
            "      --no-bandwidth   skip the bandwidth measurement\n"
            "      --no-peak        skip the multiply-add peak measurement\n"
            "      --json           one JSON object instead of the table\n"
            "  -h, --help           this help\n"
            "\n"
            "$ATTEND_ISA=generic|avx2|avx512 forces a kernel set; $ATTEND_AMX=0 keeps int8 off AMX.\n");
}


static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wall-clock time (CLOCK_REALTIME, seconds since the epoch): comparable with the clock of
 * the process that started this one, for load timings from process start. */
static double wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ---------------------------------------------------------------------------------------
 * The model's linear layers, from its configuration (attend.h): every family attend runs
 * has the same matrices. Weights are [out, in]; an int8 row also stores a scale and a row
 * sum (8 bytes), and every linear layer has an f32 bias of `out`. */

static double weight_bytes(const attend_config *c, double out, double in) {
    const double n = out * in;
    const double w = !strcmp(c->dtype, "int8") ? n + 8.0 * out : !strcmp(c->dtype, "f16") ? 2 * n : 4 * n;
    return w + 4.0 * out;
}

/* Bytes a batch-1 decoder step reads: every decoder matrix but the cross-attention keys
 * and values (computed once per sentence), the output projection, and the LayerNorm
 * vectors. */
static double step_bytes(const attend_config *c) {
    const double d = c->d_model, f = c->decoder_ffn_dim;
    const double layer = 6 * weight_bytes(c, d, d) + weight_bytes(c, f, d) + weight_bytes(c, d, f) + 3 * 2 * 4.0 * d;
    return c->decoder_layers * layer + weight_bytes(c, c->decoder_vocab_size, d); /* + final logits bias */
}

/* Peak resident set of this process: VmHWM (ru_maxrss survives execve, so a big parent
 * such as a Python driver would show through it). */
static double peak_rss_mib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) {
            fclose(f);
            return atof(line + 6) / 1024.0;
        }
    if (f) fclose(f);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024.0;
}

static int is_language(const attend_config *c, int id) {
    for (int k = 0; k < c->n_languages; k++)
        if (c->language_ids[k] == id) return 1;
    return 0;
}

/* Multiply-adds of the linear layers, from the model's shapes: encoder (per source token:
 * its layers, and every decoder layer's cross-attention keys and values) and decoder (per
 * decoder row and step: its layers and the output projection; bench decodes every row to
 * the limit, so each step has all of them). */
static void linear_macs(const attend_config *c, double *enc, double *dec) {
    const double d = c->d_model, fe = c->encoder_ffn_dim, fd = c->decoder_ffn_dim;
    *enc = c->encoder_layers * (4 * d * d + 2 * d * fe) + c->decoder_layers * 2 * d * d;
    *dec = c->decoder_layers * (6 * d * d + 2 * d * fd) + (double)c->decoder_vocab_size * d;
}


/* ---------------------------------------------------------------------------------------
 * Options */

typedef struct {
    const char *path;  /* -m (required) */
    int B, S, T;       /* -b, -s, -n: sentences per batch, source and target tokens */
    int threads;       /* -t: 0 for the default */
    int rounds, seed, beams;
    int want_bandwidth, want_peak, json;
} bench_options;

/* The defaults: batch 1, 20 source and 20 target tokens, 5 rounds, seed 1, greedy, the
 * default thread count, bandwidth and peak measured, a table. */
static bench_options bench_default_options(void) {
    bench_options o = {0};
    o.B = 1, o.S = 20, o.T = 20, o.rounds = 5, o.seed = 1, o.beams = 1;
    o.want_bandwidth = o.want_peak = 1;
    return o;
}

static int take_bench_option(cli_args *a, bench_options *o) {
    if (cli_is(a, "-m", "--model")) return cli_take_str(a, &o->path);
    if (cli_is(a, "-b", "--batch")) return cli_take_int(a, 1, 100000, &o->B);
    if (cli_is(a, "-s", "--src-len")) return cli_take_int(a, 1, 100000, &o->S);
    if (cli_is(a, "-n", "--tgt-len")) return cli_take_int(a, 1, 100000, &o->T);
    if (cli_is(a, "-t", "--threads")) return cli_take_int(a, 1, 4096, &o->threads);
    if (cli_is(a, "-r", "--rounds")) return cli_take_int(a, 1, 100000, &o->rounds);
    if (cli_is(a, NULL, "--beam")) return cli_take_int(a, 1, 1024, &o->beams);
    if (cli_is(a, NULL, "--seed")) return cli_take_int(a, 0, 1 << 30, &o->seed);
    if (cli_is(a, NULL, "--compute")) return cli_take_compute(a);
    if (cli_is(a, NULL, "--no-bandwidth")) o->want_bandwidth = 0;
    else if (cli_is(a, NULL, "--no-peak")) o->want_peak = 0;
    else if (cli_is(a, NULL, "--json")) o->json = 1;
    else return CLI_OPT_OTHER;
    return CLI_OPT_TAKEN;
}

/* 0 or EXIT_USAGE. */
static int parse_bench(int argc, char **argv, bench_options *o) {
    *o = bench_default_options();
    cli_args a = {"bench", argc, argv, 0};
    for (a.i = 1; a.i < argc; a.i++) {
        const char *arg = argv[a.i];
        const int rc = take_bench_option(&a, o);
        if (rc != CLI_OPT_OTHER) {
            if (rc) return rc;
        } else if (cli_is_option(arg)) {
            return cli_unknown_option("bench", arg);
        } else {
            fprintf(stderr, "attend bench: unexpected argument '%s'; the model goes after -m (see --help)\n", arg);
            return EXIT_USAGE;
        }
    }
    if (!o->path) {
        fprintf(stderr, "attend bench: -m MODEL.gguf is required (see --help)\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The timed rounds */

typedef struct {
    const bench_options *o;
    int threads;
    attend_model *m;
    const attend_config *c;
    double unix_main, load_s, unix_loaded; /* process start, the model's opening */
    int *ids;                              /* [B, S] the random sources */
    const int **src;
    int *lens;
    int lang;                              /* the sources' language token, or -1 */
    attend_result *out;
    double *t_round, *t_enc, *t_dec;       /* [rounds] seconds */
    int produced;                          /* target tokens of a round */
    long long steps;                       /* decoder steps of a round */
    double first_s, unix_first;            /* the warm-up round: the model's first translation */
} bench_run;

/* Select the kernels and open the model, timed. 0 or an exit status. */
static int open_model(bench_run *x) {
    char err[512];
    if (attend_select_isa(err, sizeof err)) {
        fprintf(stderr, "attend bench: %s\n", err);
        return EXIT_USAGE;
    }
    x->threads = x->o->threads ? x->o->threads : attend_default_threads();
    const double t_load = now();
    attend_load_params lp = attend_default_load_params();
    lp.compute_type = cli_compute();
    x->m = attend_load_with(x->o->path, &lp, err, sizeof err);
    x->load_s = now() - t_load, x->unix_loaded = wall();
    if (!x->m) {
        fprintf(stderr, "attend bench: %s: %s\n", x->o->path, err);
        return EXIT_MODEL;
    }
    x->c = attend_get_config(x->m);
    if (x->o->S > x->c->max_position_embeddings || x->o->T > x->c->max_position_embeddings) {
        fprintf(stderr, "attend bench: lengths must fit the model's %d positions\n", x->c->max_position_embeddings);
        return EXIT_USAGE;
    }
    return 0;
}

/* Random sources: ordinary ids (not </s>, <unk>, pad or a language token), </s> last; a
 * multilingual model's sources start with its first language's token, and that language
 * is the target too (forced as the first output token). 0 or EXIT_FAIL. */
static int make_sources(bench_run *x) {
    const attend_config *c = x->c;
    const int B = x->o->B, S = x->o->S, rounds = x->o->rounds;
    const int lang = x->lang = c->n_languages > 0 ? c->language_ids[0] : -1;
    x->ids = malloc(sizeof(int) * (size_t)B * S);
    x->src = calloc((size_t)B, sizeof *x->src);
    x->lens = calloc((size_t)B, sizeof *x->lens);
    x->out = calloc((size_t)B, sizeof *x->out);
    x->t_round = malloc(sizeof(double) * rounds), x->t_enc = malloc(sizeof(double) * rounds);
    x->t_dec = malloc(sizeof(double) * rounds);
    if (!x->ids || !x->src || !x->lens || !x->out || !x->t_round || !x->t_enc || !x->t_dec) {
        fprintf(stderr, "attend bench: out of memory\n");
        return EXIT_FAIL;
    }
    srand((unsigned)x->o->seed);
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < S - 1; j++) {
            int id;
            do id = rand() % c->vocab_size;
            while (id == c->eos_id || id == c->pad_id || id == c->unk_id || is_language(c, id));
            x->ids[(size_t)i * S + j] = id;
        }
        if (lang >= 0 && S > 1) x->ids[(size_t)i * S] = lang;
        x->ids[(size_t)i * S + S - 1] = c->eos_id;
        x->src[i] = x->ids + (size_t)i * S;
        x->lens[i] = S;
    }
    return 0;
}

/* One warm-up round, then the timed ones. 0 or EXIT_FAIL. */
static int run_rounds(bench_run *x) {
    const bench_options *o = x->o;
    char err[512];
    /* always an explicit search, so a file's recorded num_beams never turns greedy runs into
     * beam runs: greedy (beams 1) or N beams. </s> is banned until the last step (min_length
     * T: the start token counts), so every row, every beam too, decodes T tokens */
    attend_stats st;
    attend_params p = attend_default_params();
    p.threads = x->threads;
    p.num_beams = o->beams;
    p.n_best = 1;
    p.max_length = o->T + 1;
    p.set_min_length = 1;
    p.min_length = o->T;
    p.stats = &st;
    if (x->lang >= 0) p.tgt_lang = x->c->languages[0];
    for (int r = -1; r < o->rounds; r++) { /* round -1 warms caches and page tables */
        double t0 = now();
        if (attend_translate_ids(x->m, x->src, x->lens, o->B, NULL, NULL, &p, x->out, err, sizeof err)) {
            fprintf(stderr, "attend bench: %s\n", err);
            return EXIT_FAIL;
        }
        double dt = now() - t0;
        x->produced = 0;
        for (int i = 0; i < o->B; i++) {
            x->produced += x->out[i].n_tgt;
            attend_result_free(&x->out[i]);
        }
        x->steps = st.steps;
        if (r < 0) x->first_s = dt, x->unix_first = wall();
        if (r >= 0) {
            x->t_round[r] = dt;
            x->t_enc[r] = st.encode_seconds;
            x->t_dec[r] = st.decode_seconds;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * The figures */

typedef struct {
    double rss_mib, best, med, enc, dec;  /* MiB; seconds a round: min, median, encoder, decoder */
    double tok_s, tok_s_max;              /* target tokens per second: median, max */
    double wbytes, step_s, achieved;      /* a decoder step: weight bytes, seconds, GB/s */
    bandwidth bws;                        /* the machine's */
    double run_ops, run_rate, dec_rate;   /* the linear layers: ops a round, G/s over it, in the decoder */
    int int8, amx, bf16;                  /* int8 model; its layers on AMX; bf16 compute */
    compute_peak pk;                      /* the machine's */
    double peak;                          /* the peak of the model's dtype */
} bench_figures;

/* The timings reduced, and the machine measured (bandwidth, multiply-add peak). */
static bench_figures figures(const bench_run *x) {
    const bench_options *o = x->o;
    const attend_config *c = x->c;
    bench_figures f;
    f.rss_mib = peak_rss_mib();
    f.best = x->t_round[0];
    for (int r = 1; r < o->rounds; r++) f.best = x->t_round[r] < f.best ? x->t_round[r] : f.best;
    f.med = median(x->t_round, o->rounds), f.enc = median(x->t_enc, o->rounds), f.dec = median(x->t_dec, o->rounds);
    f.tok_s = x->produced / f.med, f.tok_s_max = x->produced / f.best;
    f.wbytes = step_bytes(c);
    f.step_s = f.dec / o->T;
    f.achieved = f.wbytes / f.step_s / 1e9;
    f.bws = o->want_bandwidth ? measure_bandwidth(x->threads) : (bandwidth){0, 0};
    /* the linear layers' ops (2 per multiply-add) per round, against the peak of their dtype */
    double enc_macs, dec_macs;
    linear_macs(c, &enc_macs, &dec_macs);
    const double dec_ops = 2.0 * dec_macs * x->steps * o->B * o->beams;
    f.run_ops = 2.0 * enc_macs * o->B * o->S + dec_ops;
    f.run_rate = f.run_ops / f.med / 1e9, f.dec_rate = f.dec > 0 ? dec_ops / f.dec / 1e9 : 0;
    f.int8 = !strcmp(c->dtype, "int8"), f.amx = f.int8 && !strcmp(attend_isa_int8(), "amx");
    f.bf16 = cli_compute() && !strcmp(cli_compute(), "bf16");
    f.pk = o->want_peak ? measure_compute_peak(attend_isa(), f.amx, f.bf16, x->threads)
                        : (compute_peak){0, 0, "none", "none", 0, 0};
    f.peak = f.int8 ? f.pk.i8_gops : f.bf16 ? f.pk.bf16_gflops : f.pk.f32_gflops;
    return f;
}

static void print_json(const bench_run *x, const bench_figures *f) {
    const bench_options *o = x->o;
    const double bw = f->bws.triad, B = o->B;
    printf("{\"model\": \"%s\", \"dtype\": \"%s\", \"compute\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"batch\": %d, "
           "\"beam\": %d, \"src_len\": %d, \"tgt_len\": %d, \"rounds\": %d, \"tokens\": %d, \"steps\": %d, "
           "\"ms_per_sentence\": %.3f, \"ms_per_sentence_min\": %.3f, \"tok_s\": %.2f, \"tok_s_max\": %.2f, "
           "\"encode_ms\": %.3f, \"decode_ms\": %.3f, \"step_ms\": %.4f, \"peak_rss_mib\": %.1f, "
           "\"step_weight_mb\": %.3f, \"step_gbps\": %.3f, \"triad_gbps\": %.3f, \"bw_fraction\": %.4f, "
           "\"read_gbps\": %.3f, \"read_fraction\": %.4f, \"peak_f32_gflops\": %.2f, \"peak_i8_gops\": %.2f, "
           "\"linear_gop\": %.4f, \"linear_gops\": %.2f, \"decoder_linear_gops\": %.2f, \"peak_fraction\": %.4f, "
           "\"decoder_peak_fraction\": %.4f, \"int8_path\": \"%s\", \"peak_amx_gops\": %.2f, "
           "\"amx_peak_fraction\": %.4f, \"peak_bf16_gflops\": %.2f, \"load_ms\": %.3f, \"first_round_ms\": %.3f, \"unix_main\": %.6f, "
           "\"unix_loaded\": %.6f, \"unix_first_round\": %.6f}\n",
           o->path, x->c->dtype, cli_compute() ? cli_compute() : "f32", attend_isa(), x->threads, o->B, o->beams, o->S, o->T, o->rounds, x->produced,
           (int)x->steps, 1e3 * f->med / B, 1e3 * f->best / B, f->tok_s, f->tok_s_max, 1e3 * f->enc, 1e3 * f->dec,
           1e3 * f->step_s, f->rss_mib, f->wbytes / 1e6, f->achieved, bw, bw > 0 ? f->achieved / bw : 0.0,
           f->bws.read, f->bws.read > 0 ? f->achieved / f->bws.read : 0.0, f->pk.f32_gflops, f->pk.i8_gops,
           f->run_ops / 1e9, f->run_rate, f->dec_rate, f->peak > 0 ? f->run_rate / f->peak : 0.0,
           f->peak > 0 ? f->dec_rate / f->peak : 0.0, attend_isa_int8(), f->pk.amx_gops,
           f->pk.amx_gops > 0 ? f->run_rate / f->pk.amx_gops : 0.0, f->pk.bf16_gflops, 1e3 * x->load_s, 1e3 * x->first_s, x->unix_main,
           x->unix_loaded, x->unix_first);
}

/* The table's lines on the machine: bandwidth, peaks, and the linear layers against them. */
static void print_machine(const bench_run *x, const bench_figures *f) {
    const int threads = x->threads, int8 = f->int8;
    const double bw = f->bws.triad, peak = f->peak, amx = f->pk.amx_gops;
    if (bw > 0)
        printf("memory bandwidth    %.2f GB/s triad (%d threads); step reaches %.0f%% of it\n", bw, threads,
               100 * f->achieved / bw);
    if (f->bws.read > 0)
        printf("read bandwidth      %.2f GB/s, reading only (%d threads); step reaches %.0f%% of it\n", f->bws.read,
               threads, 100 * f->achieved / f->bws.read);
    const char *unit = int8 ? "GOP/s" : "GFLOP/s";
    if (f->pk.f32_gflops > 0 || f->pk.i8_gops > 0)
        printf("multiply-add peak   %.1f GFLOP/s f32 (%s), %.1f GOP/s int8 (%s), %d threads\n", f->pk.f32_gflops,
               f->pk.f32_how, f->pk.i8_gops, f->pk.i8_how, threads);
    if (amx > 0) printf("AMX peak            %.1f GOP/s int8 (tdpbusd tiles), %d threads\n", amx, threads);
    if (f->pk.bf16_gflops > 0)
        printf("bf16 peak           %.1f GFLOP/s (vdpbf16ps zmm), %d threads\n", f->pk.bf16_gflops, threads);
    printf("linear layers       %.2f G%s per round -> %.1f %s over the run, %.1f %s in the decoder", f->run_ops / 1e9,
           int8 ? "OP" : "FLOP", f->run_rate, unit, f->dec_rate, unit);
    if (peak > 0) printf(" (%.0f%% / %.0f%% of the %s peak", 100 * f->run_rate / peak, 100 * f->dec_rate / peak,
                         int8 ? "int8" : f->bf16 ? "bf16" : "f32");
    if (peak > 0 && amx > 0)
        printf("; %.0f%% / %.0f%% of the AMX peak", 100 * f->run_rate / amx, 100 * f->dec_rate / amx);
    if (peak > 0) printf(")");
    printf("\n");
}

static void print_table(const bench_run *x, const bench_figures *f) {
    const bench_options *o = x->o;
    const int B = o->B, beams = o->beams;
    printf("model               %s (%s, compute %s, kernels %s%s%s, %d threads)\n", o->path, x->c->dtype,
           cli_compute() ? cli_compute() : "f32", attend_isa(),
           f->int8 ? ", int8 on " : "", f->int8 ? attend_isa_int8() : "", x->threads);
    printf("shape               batch %d, %d source tokens, %d target tokens, %d rounds\n", B, o->S, o->T, o->rounds);
    if (beams > 1) printf("search              beam %d (%d decoder rows a step)\n", beams, B * beams);
    else printf("search              greedy\n");
    printf("time per sentence   %.2f ms median, %.2f ms min\n", 1e3 * f->med / B, 1e3 * f->best / B);
    printf("target tokens/s     %.1f median, %.1f max\n", f->tok_s, f->tok_s_max);
    printf("encoder / decoder   %.2f ms / %.2f ms per batch (median)\n", 1e3 * f->enc, 1e3 * f->dec);
    printf("peak RSS            %.1f MiB\n", f->rss_mib);
    printf("load / first round  %.1f ms to open the model, %.1f ms for its first (warm-up) round\n", 1e3 * x->load_s,
           1e3 * x->first_s);
    printf("decoder step        %.3f ms, %.1f MB of weights -> %.2f GB/s%s\n", 1e3 * f->step_s, f->wbytes / 1e6,
           f->achieved, B == 1 && beams == 1 ? "" : " (several rows a step: the weights are shared by them)");
    print_machine(x, f);
}

/* ---------------------------------------------------------------------------------------
 * bench */

static void bench_run_free(bench_run *x) {
    free(x->ids);
    free(x->src);
    free(x->out);
    free(x->t_round);
    free(x->t_enc);
    free(x->t_dec);
    free(x->lens);
    if (x->m) attend_free(x->m);
}

int cmd_bench(int argc, char **argv) {
    bench_run x = {0};
    x.unix_main = wall();
    if (cli_wants_help(argc, argv)) {
        usage_bench(stdout);
        return EXIT_OK;
    }
    bench_options o;
    int status = parse_bench(argc, argv, &o);
    x.o = &o;
    if (!status) status = open_model(&x);
    if (!status) status = make_sources(&x);
    if (!status) status = run_rounds(&x);
    if (!status) {
        const bench_figures f = figures(&x);
        if (o.json) print_json(&x, &f);
        else print_table(&x, &f);
    }
    bench_run_free(&x);
    return status;
}
