/* The option loop's steps that the commands share (options.h). */
#include "options.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"

int cli_is(const cli_args *a, const char *short_name, const char *long_name) {
    const char *arg = a->argv[a->i];
    return (short_name && !strcmp(arg, short_name)) || !strcmp(arg, long_name);
}

int cli_take_str(cli_args *a, const char **out) {
    if (a->i + 1 >= a->argc) {
        fprintf(stderr, "attend %s: %s needs a value (see --help)\n", a->cmd, a->argv[a->i]);
        return EXIT_USAGE;
    }
    a->i++;
    *out = a->argv[a->i];
    return CLI_OPT_TAKEN;
}

int cli_take_int(cli_args *a, int lo, int hi, int *out) {
    const char *opt = a->argv[a->i], *v;
    const int rc = cli_take_str(a, &v);
    if (rc == CLI_OPT_TAKEN) *out = cli_parse_int(opt, v, lo, hi);
    return rc;
}

int cli_take_float(cli_args *a, double lo, double hi, float *out) {
    const char *opt = a->argv[a->i], *v;
    const int rc = cli_take_str(a, &v);
    if (rc == CLI_OPT_TAKEN) *out = cli_parse_float(opt, v, lo, hi);
    return rc;
}

/* --split sentences|none into *split (ATTEND_SPLIT_*). */
static int take_split(cli_args *a, int *split) {
    const char *v;
    int rc = cli_take_str(a, &v);
    if (rc) return rc;
    if (!strcmp(v, "sentences")) *split = ATTEND_SPLIT_SENTENCES;
    else if (!strcmp(v, "none")) *split = ATTEND_SPLIT_NONE;
    else {
        fprintf(stderr, "attend %s: --split %s: must be 'sentences' or 'none' (see --help)\n", a->cmd, v);
        return EXIT_USAGE;
    }
    return CLI_OPT_TAKEN;
}

/* --compute f32|bf16|auto: kept for cli_load_model. */
int cli_take_compute(cli_args *a) {
    const char *v;
    const int rc = cli_take_str(a, &v);
    if (rc) return rc;
    return cli_set_compute("--compute", v) ? EXIT_USAGE : CLI_OPT_TAKEN;
}

int cli_model_option(cli_args *a, cli_model_options *o) {
    if (cli_is(a, "-m", "--model")) return cli_take_str(a, &o->model);
    if (cli_is(a, "-t", "--threads")) return cli_take_int(a, 1, 1024, &o->threads);
    if (cli_is(a, NULL, "--src-lang")) return cli_take_str(a, &o->src_lang);
    if (cli_is(a, NULL, "--tgt-lang")) return cli_take_str(a, &o->tgt_lang);
    if (cli_is(a, NULL, "--task")) return cli_take_str(a, &o->task);
    if (cli_is(a, NULL, "--beam")) return cli_take_int(a, 1, 1024, &o->beams);
    if (cli_is(a, NULL, "--split")) return take_split(a, &o->split);
    if (cli_is(a, NULL, "--split-lang")) return cli_take_str(a, &o->split_lang);
    if (cli_is(a, NULL, "--compute")) return cli_take_compute(a);
    if (cli_is(a, NULL, "--greedy")) {
        o->beams = 1;
        return CLI_OPT_TAKEN;
    }
    return CLI_OPT_OTHER;
}

attend_params cli_model_params(const cli_model_options *o) {
    attend_params p = attend_default_params();
    p.threads = o->threads;
    p.num_beams = o->beams;
    p.src_lang = o->src_lang;
    p.tgt_lang = o->tgt_lang;
    p.task = o->task;
    p.split = o->split;
    p.split_lang = o->split_lang;
    return p;
}

int cli_one_text(cli_args *a, const char **text, const char *too_many) {
    const char *arg = a->argv[a->i];
    if (!strcmp(arg, "--")) {
        if (a->i + 1 < a->argc) *text = a->argv[++a->i];
        if (a->i + 1 >= a->argc) return CLI_OPT_TAKEN; /* nothing after: the loop ends */
    } else if (cli_is_option(arg)) {
        return cli_unknown_option(a->cmd, arg);
    } else if (!*text) {
        *text = arg;
        return CLI_OPT_TAKEN;
    }
    fprintf(stderr, "attend %s: %s\n", a->cmd, too_many);
    return EXIT_USAGE;
}
