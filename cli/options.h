/* options: the option loop the commands share. Each command reads its arguments into its own
 * *_options struct; the options translate, align and explore have in common (-m, -t, --beam,
 * --greedy, --src-lang, --tgt-lang) are read here, with the same ranges and messages.
 *
 *   cli_args a = {"align", argc, argv, 0};
 *   for (a.i = 1; a.i < argc; a.i++) {
 *       int rc = cli_model_option(&a, &o->common);
 *       if (rc == CLI_OPT_OTHER) rc = take_align_option(&a, o);
 *       if (rc == CLI_OPT_OTHER) rc = cli_one_text(&a, &o->source, "one sentence at a time");
 *       if (rc != CLI_OPT_TAKEN) return rc;
 *   }
 *
 * A step returns CLI_OPT_TAKEN, CLI_OPT_OTHER (not one of its options) or EXIT_USAGE after
 * printing one line; cli_parse_int and cli_parse_float exit themselves on a bad number. */
#ifndef ATTEND_CLI_OPTIONS_H
#define ATTEND_CLI_OPTIONS_H

#include "../model/attend.h"

enum { CLI_OPT_TAKEN = 0, CLI_OPT_OTHER = -1 };

/* The arguments of one command, and the one being read. */
typedef struct {
    const char *cmd; /* for messages: "attend CMD: ..." */
    int argc;
    char **argv;
    int i;           /* argv[i] is the argument being read */
} cli_args;

/* Is the argument being read short or long (short may be NULL)? */
int cli_is(const cli_args *a, const char *short_name, const char *long_name);
/* The option's value: steps a->i onto the next argument and stores it in *out; EXIT_USAGE
 * after "attend CMD: OPT needs a value (see --help)" when there is none. */
int cli_take_str(cli_args *a, const char **out);
/* The same, parsed as an integer in lo..hi (a bad number exits with EXIT_USAGE). */
int cli_take_int(cli_args *a, int lo, int hi, int *out);
/* The same, parsed as a real number in lo..hi. */
int cli_take_float(cli_args *a, double lo, double hi, float *out);

/* The options that choose the model and how it translates, as translate, align and explore
 * spell them; zero (NULL) is the default: the default model, the default thread count, the
 * model's own search setting, no languages. */
typedef struct {
    const char *model;    /* -m, --model */
    int threads;          /* -t, --threads: 1..1024 */
    int beams;            /* --beam N (1..1024), --greedy (1) */
    const char *src_lang; /* --src-lang */
    const char *tgt_lang; /* --tgt-lang */
    const char *task;     /* --task */
    int split;            /* --split sentences|none: ATTEND_SPLIT_* */
    const char *split_lang; /* --split-lang: the splitting rules' language */
} cli_model_options;

/* Read the argument at a->i if it is one of the options above. */
/* --compute f32|bf16|auto (cli_set_compute) */
int cli_take_compute(cli_args *a);
int cli_model_option(cli_args *a, cli_model_options *o);
/* Parameters for attend_translate with these options and every other setting default. */
attend_params cli_model_params(const cli_model_options *o);

/* For commands that take one TEXT (align, explore): "--" takes the next argument as the
 * text and ends the options; another option is unknown; a second text is EXIT_USAGE after
 * "attend CMD: " and too_many. */
int cli_one_text(cli_args *a, const char **text, const char *too_many);

#endif
