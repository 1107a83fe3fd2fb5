/* attend quantize: rewrite an f32/f16 checkpoint with int8 matrices (per-row scales), the
 * same bytes `export_marian.py --dtype int8` writes for the same weights. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage_quantize(FILE *f) {
    fprintf(f,
            "usage: attend quantize IN.gguf OUT.gguf\n"
            "\n"
            "Write OUT with every weight matrix of IN stored as int8 with one f32 scale per row\n"
            "(format version 2; see weights/FORMAT.md). Vectors and a trained alignment head\n"
            "stay f32. IN must be an f32 or f16 attend checkpoint; OUT is what\n"
            "export_marian.py --dtype int8 would write.\n");
}

int cmd_quantize(int argc, char **argv) {
    if (cli_wants_help(argc, argv)) {
        usage_quantize(stdout);
        return EXIT_OK;
    }
    const char *path[2];
    int n_paths = 0;
    for (int i = 1, opts = 1; i < argc; i++) {
        if (opts && !strcmp(argv[i], "--")) opts = 0;
        else if (opts && cli_is_option(argv[i])) return cli_unknown_option("quantize", argv[i]);
        else if (n_paths < 2) path[n_paths++] = argv[i];
        else n_paths = 3;
    }
    if (n_paths != 2) {
        fprintf(stderr, "attend quantize: needs IN.gguf and OUT.gguf (see --help)\n");
        return EXIT_USAGE;
    }
    char err[512];
    const int rc = attend_quantize(path[0], path[1], err, sizeof err);
    if (rc) fprintf(stderr, "attend quantize: %s\n", err);
    return rc == 0 ? EXIT_OK : rc == ATTEND_E_MODEL ? EXIT_MODEL : rc == ATTEND_E_USAGE ? EXIT_USAGE
         : rc == ATTEND_E_IO ? EXIT_IO : EXIT_FAIL;
}
