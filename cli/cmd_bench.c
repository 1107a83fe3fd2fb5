/* attend bench: time translation of random sources, and measure the machine in the same run
 * (memory bandwidth, and how much of it a batch-1 decoder step achieves; the multiply-add
 * peak, and how much of it the linear layers achieve). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../model/attend.h"
#include "bench_peak.h"
#include "cli.h"

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
            "on AMX tiles, tdpbusd's peak beside it). A multilingual model's\n"
            "sources start with its first language's token, which is also the target language.\n"
            "\n"
            "options:\n"
            "  -m, --model FILE     checkpoint (required)\n"
            "  -b, --batch B        sentences per batch (default 1)\n"
            "  -s, --src-len S      source tokens per sentence, </s> included (default 20)\n"
            "  -n, --tgt-len T      target tokens decoded per sentence (default 20)\n"
            "  -t, --threads N      threads (default: physical cores,\n"
            "                       or $OMP_NUM_THREADS)\n"
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
 * Memory bandwidth: a[i] = b[i] + s * c[i] over three arrays far larger than any cache,
 * counted as STREAM counts it (3 x 4 bytes per element), and a pass that only reads them
 * (a decoder step only reads its weights; the triad's writes add bandwidth a read-only
 * stream may not get). Run in a child process so its 1.9 GiB never shows in the
 * benchmark's peak RSS. GB/s, best of 5 each, or 0. */

/* OpenMP's thread pool does not survive fork(), so the child uses plain pthreads. */
enum { PASS_INIT, PASS_TRIAD, PASS_READ };

typedef struct {
    float *a, *b, *c;
    size_t lo, hi;
    float s;
    int pass;  /* PASS_* */
    float sum; /* PASS_READ: the sum read, so the reads cannot be dropped */
} triad_part;

static void *triad_run(void *arg) {
    triad_part *p = arg;
    /* local restrict pointers and an explicit simd loop: through the struct the compiler
     * must assume aliasing and emits scalar code, which understates the bandwidth */
    float *restrict a = p->a, *restrict b = p->b, *restrict c = p->c;
    const float s = p->s;
    if (p->pass == PASS_INIT) {
#pragma omp simd
        for (size_t i = p->lo; i < p->hi; i++) a[i] = 0, b[i] = 1, c[i] = 2;
    } else if (p->pass == PASS_TRIAD) {
#pragma omp simd
        for (size_t i = p->lo; i < p->hi; i++) a[i] = b[i] + s * c[i];
    } else { /* read only, as a batch-1 decoder step reads its weights */
        float sum = 0;
#pragma omp simd reduction(+ : sum)
        for (size_t i = p->lo; i < p->hi; i++) sum += a[i] + b[i] + c[i];
        p->sum = sum;
    }
    return NULL;
}

static void triad_pass(float *a, float *b, float *c, size_t n, float s, int pass, int threads) {
    pthread_t tid[64];
    triad_part part[64];
    if (threads > 64) threads = 64;
    for (int t = 0; t < threads; t++) {
        part[t] = (triad_part){a, b, c, n * t / threads, n * (t + 1) / threads, s, pass, 0};
        if (t > 0 && pthread_create(&tid[t], NULL, triad_run, &part[t])) part[t].hi = part[t].lo, tid[t] = 0;
    }
    triad_run(&part[0]);
    for (int t = 1; t < threads; t++)
        if (part[t].hi > part[t].lo) pthread_join(tid[t], NULL);
}

typedef struct {
    double triad, read; /* GB/s, best of 5 each; 0 if not measured */
} bandwidth;

static bandwidth measure_bandwidth(int threads) {
    bandwidth r = {0, 0};
    int fd[2];
    if (pipe(fd)) return r;
    pid_t pid = fork();
    if (pid < 0) return r;
    if (pid == 0) {
        close(fd[0]);
        const size_t n = (size_t)160 << 20; /* 160 Mi floats = 640 MiB per array */
        float *a = malloc(n * 4), *b = malloc(n * 4), *c = malloc(n * 4);
        bandwidth best = {0, 0};
        if (a && b && c) {
            triad_pass(a, b, c, n, 0, PASS_INIT, threads);
            for (int rep = 0; rep < 5; rep++) {
                double t0 = now();
                triad_pass(a, b, c, n, 0.5f + rep, PASS_TRIAD, threads);
                double gbps = 3.0 * 4 * n / (now() - t0) / 1e9;
                if (gbps > best.triad) best.triad = gbps;
                t0 = now();
                triad_pass(a, b, c, n, 0, PASS_READ, threads);
                gbps = 3.0 * 4 * n / (now() - t0) / 1e9;
                if (gbps > best.read) best.read = gbps;
            }
        }
        if (write(fd[1], &best, sizeof best) != sizeof best) _exit(1);
        _exit(0);
    }
    close(fd[1]);
    if (read(fd[0], &r, sizeof r) != sizeof r) r.triad = r.read = 0;
    close(fd[0]);
    waitpid(pid, NULL, 0);
    return r;
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
 * bench */

int cmd_bench(int argc, char **argv) {
    const double unix_main = wall();
    const char *path = NULL;
    int B = 1, S = 20, T = 20, threads = 0, rounds = 5, seed = 1, want_bandwidth = 1, want_peak = 1, json = 0, beams = 1;
    if (cli_wants_help(argc, argv)) {
        usage_bench(stdout);
        return EXIT_OK;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define ARG(s, l) (!strcmp(a, s) || !strcmp(a, l))
#define NEED_VALUE CLI_NEED_VALUE("bench", a, v, i)
        if (ARG("-m", "--model")) {
            NEED_VALUE path = v;
        } else if (ARG("-b", "--batch")) {
            NEED_VALUE B = cli_parse_int(a, v, 1, 100000);
        } else if (ARG("-s", "--src-len")) {
            NEED_VALUE S = cli_parse_int(a, v, 1, 100000);
        } else if (ARG("-n", "--tgt-len")) {
            NEED_VALUE T = cli_parse_int(a, v, 1, 100000);
        } else if (ARG("-t", "--threads")) {
            NEED_VALUE threads = cli_parse_int(a, v, 1, 4096);
        } else if (ARG("-r", "--rounds")) {
            NEED_VALUE rounds = cli_parse_int(a, v, 1, 100000);
        } else if (!strcmp(a, "--beam")) {
            NEED_VALUE beams = cli_parse_int(a, v, 1, 1024);
        } else if (!strcmp(a, "--seed")) {
            NEED_VALUE seed = cli_parse_int(a, v, 0, 1 << 30);
        } else if (!strcmp(a, "--no-bandwidth")) {
            want_bandwidth = 0;
        } else if (!strcmp(a, "--no-peak")) {
            want_peak = 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (cli_is_option(a)) {
            return cli_unknown_option("bench", a);
        } else {
            fprintf(stderr, "attend bench: unexpected argument '%s'; the model goes after -m (see --help)\n", a);
            return EXIT_USAGE;
        }
#undef NEED_VALUE
#undef ARG
    }
    if (!path) {
        fprintf(stderr, "attend bench: -m MODEL.gguf is required (see --help)\n");
        return EXIT_USAGE;
    }
    char err[512];
    if (attend_select_isa(err, sizeof err)) {
        fprintf(stderr, "attend bench: %s\n", err);
        return EXIT_USAGE;
    }
    if (threads == 0) threads = attend_default_threads();
    const double t_load = now();
    attend_model *m = attend_load(path, err, sizeof err);
    const double load_s = now() - t_load, unix_loaded = wall();
    if (!m) {
        fprintf(stderr, "attend bench: %s: %s\n", path, err);
        return EXIT_MODEL;
    }
    const attend_config *c = attend_get_config(m);
    if (S > c->max_position_embeddings || T > c->max_position_embeddings) {
        fprintf(stderr, "attend bench: lengths must fit the model's %d positions\n", c->max_position_embeddings);
        attend_free(m);
        return EXIT_USAGE;
    }

    /* random sources: ordinary ids (not </s>, <unk>, pad or a language token), </s> last; a
     * multilingual model's sources start with its first language's token, and that language
     * is the target too (forced as the first output token) */
    const int lang = c->n_languages > 0 ? c->language_ids[0] : -1;
    int *ids = malloc(sizeof(int) * (size_t)B * S);
    const int **src = calloc((size_t)B, sizeof *src);
    int *lens = calloc((size_t)B, sizeof *lens);
    attend_result *out = calloc((size_t)B, sizeof *out);
    double *t_round = malloc(sizeof(double) * rounds), *t_enc = malloc(sizeof(double) * rounds);
    double *t_dec = malloc(sizeof(double) * rounds);
    if (!ids || !src || !lens || !out || !t_round || !t_enc || !t_dec) {
        fprintf(stderr, "attend bench: out of memory\n");
        return EXIT_FAIL;
    }
    srand((unsigned)seed);
    for (int i = 0; i < B; i++) {
        for (int j = 0; j < S - 1; j++) {
            int id;
            do id = rand() % c->vocab_size;
            while (id == c->eos_id || id == c->pad_id || id == c->unk_id || is_language(c, id));
            ids[(size_t)i * S + j] = id;
        }
        if (lang >= 0 && S > 1) ids[(size_t)i * S] = lang;
        ids[(size_t)i * S + S - 1] = c->eos_id;
        src[i] = ids + (size_t)i * S;
        lens[i] = S;
    }
    /* always an explicit search, so a file's recorded num_beams never turns greedy runs into
     * beam runs: greedy (beams 1) or N beams. </s> is banned until the last step (min_length
     * T: the start token counts), so every row, every beam too, decodes T tokens */
    attend_stats st;
    attend_params p = attend_default_params();
    p.threads = threads;
    p.num_beams = beams;
    p.n_best = 1;
    p.max_length = T + 1;
    p.set_min_length = 1;
    p.min_length = T;
    p.stats = &st;
    if (lang >= 0) p.tgt_lang = c->languages[0];
    int produced = 0;
    long long steps = 0;
    double first_s = 0, unix_first = 0; /* the warm-up round: the model's first translation */
    for (int r = -1; r < rounds; r++) { /* round -1 warms caches and page tables */
        double t0 = now();
        if (attend_translate_ids(m, src, lens, B, NULL, NULL, &p, out, err, sizeof err)) {
            fprintf(stderr, "attend bench: %s\n", err);
            return EXIT_FAIL;
        }
        double dt = now() - t0;
        produced = 0;
        for (int i = 0; i < B; i++) {
            produced += out[i].n_tgt;
            attend_result_free(&out[i]);
        }
        steps = st.steps;
        if (r < 0) first_s = dt, unix_first = wall();
        if (r >= 0) {
            t_round[r] = dt;
            t_enc[r] = st.encode_seconds;
            t_dec[r] = st.decode_seconds;
        }
    }
    const double rss_mib = peak_rss_mib();
    double best = t_round[0];
    for (int r = 1; r < rounds; r++) best = t_round[r] < best ? t_round[r] : best;
    const double med = median(t_round, rounds), enc = median(t_enc, rounds), dec = median(t_dec, rounds);
    const double tok_s = produced / med, tok_s_max = produced / best;
    const double wbytes = step_bytes(c);
    const double step_s = dec / T;
    const double achieved = wbytes / step_s / 1e9;
    const bandwidth bws = want_bandwidth ? measure_bandwidth(threads) : (bandwidth){0, 0};
    const double bw = bws.triad;
    /* the linear layers' ops (2 per multiply-add) per round, against the peak of their dtype */
    double enc_macs, dec_macs;
    linear_macs(c, &enc_macs, &dec_macs);
    const double dec_ops = 2.0 * dec_macs * steps * B * beams, run_ops = 2.0 * enc_macs * B * S + dec_ops;
    const double run_rate = run_ops / med / 1e9, dec_rate = dec > 0 ? dec_ops / dec / 1e9 : 0;
    const int int8 = !strcmp(c->dtype, "int8"), amx = int8 && !strcmp(attend_isa_int8(), "amx");
    const compute_peak pk =
        want_peak ? measure_compute_peak(attend_isa(), amx, threads) : (compute_peak){0, 0, "none", "none", 0};
    const double peak = int8 ? pk.i8_gops : pk.f32_gflops;

    if (json) {
        printf("{\"model\": \"%s\", \"dtype\": \"%s\", \"isa\": \"%s\", \"threads\": %d, \"batch\": %d, "
               "\"beam\": %d, \"src_len\": %d, \"tgt_len\": %d, \"rounds\": %d, \"tokens\": %d, \"steps\": %d, "
               "\"ms_per_sentence\": %.3f, \"ms_per_sentence_min\": %.3f, \"tok_s\": %.2f, \"tok_s_max\": %.2f, "
               "\"encode_ms\": %.3f, \"decode_ms\": %.3f, \"step_ms\": %.4f, \"peak_rss_mib\": %.1f, "
               "\"step_weight_mb\": %.3f, \"step_gbps\": %.3f, \"triad_gbps\": %.3f, \"bw_fraction\": %.4f, "
               "\"read_gbps\": %.3f, \"read_fraction\": %.4f, \"peak_f32_gflops\": %.2f, \"peak_i8_gops\": %.2f, "
               "\"linear_gop\": %.4f, \"linear_gops\": %.2f, \"decoder_linear_gops\": %.2f, \"peak_fraction\": %.4f, "
               "\"decoder_peak_fraction\": %.4f, \"int8_path\": \"%s\", \"peak_amx_gops\": %.2f, "
               "\"amx_peak_fraction\": %.4f, \"load_ms\": %.3f, \"first_round_ms\": %.3f, \"unix_main\": %.6f, "
               "\"unix_loaded\": %.6f, \"unix_first_round\": %.6f}\n",
               path, c->dtype, attend_isa(), threads, B, beams, S, T, rounds, produced, (int)steps,
               1e3 * med / B, 1e3 * best / B, tok_s, tok_s_max, 1e3 * enc, 1e3 * dec, 1e3 * step_s, rss_mib,
               wbytes / 1e6, achieved, bw, bw > 0 ? achieved / bw : 0.0, bws.read, bws.read > 0 ? achieved / bws.read : 0.0,
               pk.f32_gflops, pk.i8_gops, run_ops / 1e9, run_rate, dec_rate, peak > 0 ? run_rate / peak : 0.0,
               peak > 0 ? dec_rate / peak : 0.0, attend_isa_int8(), pk.amx_gops,
               pk.amx_gops > 0 ? run_rate / pk.amx_gops : 0.0, 1e3 * load_s, 1e3 * first_s, unix_main, unix_loaded, unix_first);
    } else {
        printf("model               %s (%s, kernels %s%s%s, %d threads)\n", path, c->dtype, attend_isa(),
               int8 ? ", int8 on " : "", int8 ? attend_isa_int8() : "", threads);
        printf("shape               batch %d, %d source tokens, %d target tokens, %d rounds\n", B, S, T, rounds);
        if (beams > 1) printf("search              beam %d (%d decoder rows a step)\n", beams, B * beams);
        else printf("search              greedy\n");
        printf("time per sentence   %.2f ms median, %.2f ms min\n", 1e3 * med / B, 1e3 * best / B);
        printf("target tokens/s     %.1f median, %.1f max\n", tok_s, tok_s_max);
        printf("encoder / decoder   %.2f ms / %.2f ms per batch (median)\n", 1e3 * enc, 1e3 * dec);
        printf("peak RSS            %.1f MiB\n", rss_mib);
        printf("load / first round  %.1f ms to open the model, %.1f ms for its first (warm-up) round\n", 1e3 * load_s,
               1e3 * first_s);
        printf("decoder step        %.3f ms, %.1f MB of weights -> %.2f GB/s%s\n", 1e3 * step_s, wbytes / 1e6, achieved,
               B == 1 && beams == 1 ? "" : " (several rows a step: the weights are shared by them)");
        if (bw > 0)
            printf("memory bandwidth    %.2f GB/s triad (%d threads); step reaches %.0f%% of it\n", bw, threads,
                   100 * achieved / bw);
        if (bws.read > 0)
            printf("read bandwidth      %.2f GB/s, reading only (%d threads); step reaches %.0f%% of it\n", bws.read,
                   threads, 100 * achieved / bws.read);
        const char *unit = int8 ? "GOP/s" : "GFLOP/s";
        if (pk.f32_gflops > 0 || pk.i8_gops > 0)
            printf("multiply-add peak   %.1f GFLOP/s f32 (%s), %.1f GOP/s int8 (%s), %d threads\n", pk.f32_gflops,
                   pk.f32_how, pk.i8_gops, pk.i8_how, threads);
        if (pk.amx_gops > 0) printf("AMX peak            %.1f GOP/s int8 (tdpbusd tiles), %d threads\n", pk.amx_gops, threads);
        printf("linear layers       %.2f G%s per round -> %.1f %s over the run, %.1f %s in the decoder", run_ops / 1e9,
               int8 ? "OP" : "FLOP", run_rate, unit, dec_rate, unit);
        if (peak > 0) printf(" (%.0f%% / %.0f%% of the %s peak", 100 * run_rate / peak, 100 * dec_rate / peak,
                             int8 ? "int8" : "f32");
        if (peak > 0 && pk.amx_gops > 0)
            printf("; %.0f%% / %.0f%% of the AMX peak", 100 * run_rate / pk.amx_gops, 100 * dec_rate / pk.amx_gops);
        if (peak > 0) printf(")");
        printf("\n");
    }
    free(ids);
    free(src);
    free(out);
    free(t_round);
    free(t_enc);
    free(t_dec);
    free(lens);
    attend_free(m);
    return EXIT_OK;
}
