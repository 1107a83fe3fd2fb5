/* attend: the command-line tool. A thin client of the public API in model/attend.h and
 * model/align.h; each subcommand lives in its own cmd_*.c file, and reads its options into
 * its own *_options struct (the shared ones through options.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---------------------------------------------------------------------------------------
 * main */

static void usage(FILE *f) {
    fprintf(f,
            "usage: attend COMMAND [options]\n"
            "\n"
            "Translate with MarianMT / OPUS-MT, M2M-100, NLLB-200 and mBART-50 checkpoints\n"
            "exported to .gguf.\n"
            "\n"
            "commands:\n"
            "  translate   translate arguments or standard input, one line per line\n"
            "  info        print a model's configuration\n"
            "  verify      check a model file's checksums and values\n"
            "  align       show where the model looked: attention heatmap, word alignment\n"
            "  explore     write an HTML page with every attention matrix (head, matrix, grid,\n"
            "              alignment views)\n"
            "  serve       an HTTP translation server (LibreTranslate's API and attend's own,\n"
            "              batching across requests, a live explore page)\n"
            "  split       split arguments or standard input into sentences, one per line\n"
            "  detect      the language of each argument or line of standard input\n"
            "  transcribe  speech to text (or to English) with a Whisper checkpoint\n"
            "  features    Whisper's log-mel features of an audio file (.npy, .npz)\n"
            "  quantize    rewrite a checkpoint with int8 matrices (per-row scales)\n"
            "  bench       time translation of random sources; measure memory bandwidth\n"
            "  isa         print the kernel set in use ($ATTEND_ISA=generic|avx2|avx512 forces one),\n"
            "              what int8 and bf16 compute run on, and the default thread count\n"
            "\n"
            "Run 'attend COMMAND --help' for a command's options; 'attend --version' prints the\n"
            "version.\n");
}

/* attend isa: the kernel set in use, those this CPU has, and the default thread count. */
static int cmd_isa(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        printf("usage: attend isa\n\nPrint the kernel set in use ($ATTEND_ISA=generic|avx2|avx512 forces\n"
               "one), those this CPU supports, what its int8 linear layers run on (amx,\n"
               "avx512vnni, avx2 or generic; $ATTEND_AMX=0 turns AMX off), whether bf16\n"
               "compute (--compute bf16) runs and on which dot product, and the default\n"
               "thread count.\n");
        return EXIT_OK;
    }
    if (argc > 1) {
        if (cli_is_option(argv[1])) return cli_unknown_option("isa", argv[1]);
        fprintf(stderr, "attend isa: takes no arguments (see --help)\n");
        return EXIT_USAGE;
    }
    char err[256];
    if (attend_select_isa(err, sizeof err)) {
        fprintf(stderr, "attend: %s\n", err);
        return EXIT_USAGE;
    }
    printf("%s (this CPU: %s)\n", attend_isa(), attend_isa_available());
    printf("int8: %s\n", attend_isa_int8());
    const char *why = NULL;
    if (attend_isa_bf16(&why))
        printf("bf16: %s (vdpbf16ps: bf16 pairs multiplied, summed in f32; --compute bf16)\n", attend_isa_bf16(NULL));
    else
        printf("bf16: unavailable (%s; --compute bf16 is refused)\n", why);
    printf("threads: %d by default (%s)\n", attend_default_threads(),
           getenv("OMP_NUM_THREADS") ? "$OMP_NUM_THREADS" : "physical cores this process may use");
    return EXIT_OK;
}

static int run(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
        printf("attend %s\n", attend_version());
        return EXIT_OK;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return EXIT_OK;
    }
    if (!strcmp(cmd, "isa")) return cmd_isa(argc - 1, argv + 1);
    if (!strcmp(cmd, "translate")) return cmd_translate(argc - 1, argv + 1);
    if (!strcmp(cmd, "info")) return cmd_info(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify")) return cmd_verify(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "align")) return cmd_align(argc - 1, argv + 1);
    if (!strcmp(cmd, "explore")) return cmd_explore(argc - 1, argv + 1);
    if (!strcmp(cmd, "serve")) return cmd_serve(argc - 1, argv + 1);
    if (!strcmp(cmd, "split")) return cmd_split(argc - 1, argv + 1);
    if (!strcmp(cmd, "detect")) return cmd_detect(argc - 1, argv + 1);
    if (!strcmp(cmd, "transcribe")) return cmd_transcribe(argc - 1, argv + 1);
    if (!strcmp(cmd, "features")) return cmd_features(argc - 1, argv + 1);
    fprintf(stderr, "attend: unknown command '%s'\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}

int main(int argc, char **argv) {
    const int status = run(argc, argv);
    /* every command's output is checked here, once: a full disk is an error, not success */
    const int io = cli_flush_stdout();
    return status ? status : io;
}
