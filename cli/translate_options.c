/* attend translate's options: --help, the defaults, the option groups (the model options
 * through options.c, the search, the outputs), and the checks before and after the model is
 * loaded (translate.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "translate.h"

static void usage_search(FILE *f);

void translate_usage(FILE *f) {
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
            "      --compute T         f32 (default, exact), bf16 (AVX-512 BF16 CPUs: faster,\n"
            "                          approximate) or auto (= f32)\n"
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
            "                          Marian models with >>xx<< codes: writes >>L<< first;\n"
            "                          T5 models with <2xx> codes (MADLAD-400): <2L>\n"
            "      --task NAME         T5 models: write the prefix of task NAME (one of\n"
            "                          those `attend info` lists) before each source\n"
            "      --split MODE        sentences (default): a line's sentences are translated\n"
            "                          one by one (abbreviations, numbers, dates, quotes, URLs\n"
            "                          kept whole; an over-long one cut again at clauses) and\n"
            "                          joined into its one output line; none: each line is\n"
            "                          one sequence (docs/splitting.md)\n"
            "      --split-lang L      the splitting rules' language, e.g. de or en\n"
            "                          (default: --src-lang, else every language's rules)\n"
            "      --format FORMAT     text (default) or html: each line an HTML fragment; its\n"
            "                          text translated, inline tags (<b>, <a>...) placed around\n"
            "                          the words aligned to the ones they wrapped, <script>,\n"
            "                          <pre>, <code>, translate=\"no\" untouched (docs/markup.md)\n"
            "      --document FILE     translate FILE (- for standard input) as one HTML\n"
            "                          document to standard output (implies --format html)\n"
            "      --dump-attention F  write every attention matrix, ids and pieces to the\n"
            "                          NumPy archive F (.npz; its keys: see\n"
            "                          docs/alignment-and-attention.md)\n"
            "      --dump-logits       with --dump-attention: also the raw logits per step\n"
            "      --prefix TEXT       every translation starts with TEXT (its target pieces,\n"
            "                          no </s>); the search continues after it, as HF's\n"
            "                          generate(decoder_input_ids=[start, *prefix])\n"
            "      --prefix-file FILE  line i of FILE is the prefix of input line i (blank\n"
            "                          lines too; an empty line: no prefix)\n"
            "      --alignment[=VIEW]  append ' ||| ' and the word alignment (Pharaoh i-j,\n"
            "                          0-based source-target) from attention VIEW (default:\n"
            "                          the model's own, see attend info and attend align\n"
            "                          --help)\n"
            "      --reverse-model FILE  with --alignment: the links the model and FILE (a\n"
            "                          target->source model, force-decoded from each\n"
            "                          translation to its source) agree on, as attend\n"
            "                          align --reverse-model gives them (a line FILE\n"
            "                          cannot align, past its length: the model's own\n"
            "                          links, with a warning)\n",
            DEFAULT_BATCH);
    usage_search(f);
}

/* attend translate --help's search options. */
static void usage_search(FILE *f) {
    fprintf(f,
            "\n"
            "search (default: the model's generation settings, as HF generate() uses them;\n"
            "greedy for files that record none; see attend info):\n"
            "      --beam N            beam search with N beams (1, or --greedy: greedy)\n"
            "      --length-penalty X  normalized score = log-prob sum / length^X (beams\n"
            "                          rank by it: HF's sequences_scores)\n"
            "      --early-stopping V  true, false or never (HF's early_stopping)\n"
            "      --n-best K          K lines per input line, best first:\n"
            "                          'i ||| translation ||| normalized score' (i: from 0);\n"
            "                          with --alignment, ' ||| ' and each one's own alignment;\n"
            "                          --dump-attention adds each one's under s{i}/nbest{k}/\n"
            "      --min-length N      no </s> before N tokens (the start token counted)\n"
            "      --no-repeat-ngram-size N  no n-gram of this size twice\n"
            "      --repetition-penalty X    HF's penalty on tokens already generated\n"
            "      --sample            draw each token at random (with --n-best K: K samples)\n"
            "      --top-k K           sampling: only the K most likely tokens\n"
            "      --top-p P           sampling: only the smallest set holding probability P\n"
            "      --temperature T     sampling: divide the logits by T (default 1)\n"
            "      --seed S            sampling: a line's draws depend on S and the line only\n"
            "                          (default 0)\n"
            "  -h, --help              this help\n");
}

/* ---------------------------------------------------------------------------------------
 * Options */

/* The defaults: the model's own search settings, its default thread count and model,
 * DEFAULT_BATCH sentences a batch (set when the run starts: --batch-tokens alone lifts it). */
translate_options translate_default_options(void) {
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
    o->view_from_model = !arg[11]; /* read once the model is loaded */
    if (o->view_from_model || attend_view_parse(arg + 12, &o->view, verr, sizeof verr) == 0)
        return CLI_OPT_TAKEN;
    fprintf(stderr, "attend translate: --alignment: %s\n", verr);
    return EXIT_USAGE;
}

/* --format text|html. */
static int take_format(cli_args *a, translate_options *o) {
    const char *v;
    const int rc = cli_take_str(a, &v);
    if (rc != CLI_OPT_TAKEN) return rc;
    if (strcmp(v, "text") && strcmp(v, "html")) {
        fprintf(stderr, "attend translate: --format is text or html, not '%s'\n", v);
        return EXIT_USAGE;
    }
    o->html = !strcmp(v, "html");
    return CLI_OPT_TAKEN;
}

/* Batching, verbosity and what is written besides the translations. */
static int take_output_option(cli_args *a, translate_options *o) {
    const char *arg = a->argv[a->i];
    if (cli_is(a, "-b", "--batch-size")) return cli_take_int(a, 1, 100000, &o->batch);
    if (cli_is(a, NULL, "--batch-tokens")) return cli_take_int(a, 1, 10000000, &o->batch_tokens);
    if (cli_is(a, NULL, "--dump-attention")) return cli_take_str(a, &o->dump_path);
    if (cli_is(a, NULL, "--prefix")) return cli_take_str(a, &o->prefix);
    if (cli_is(a, NULL, "--prefix-file")) return cli_take_str(a, &o->prefix_file);
    if (cli_is(a, NULL, "--alignment") || !strncmp(arg, "--alignment=", 12)) return take_alignment(arg, o);
    if (cli_is(a, NULL, "--format")) return take_format(a, o);
    if (cli_is(a, NULL, "--reverse-model")) return cli_take_str(a, &o->reverse_model);
    if (cli_is(a, NULL, "--document")) {
        o->html = 1;
        return cli_take_str(a, &o->document);
    }
    if (cli_is(a, "-v", "--verbose")) o->verbose = 1;
    else if (cli_is(a, NULL, "--dump-logits")) o->dump_logits = 1;
    else return CLI_OPT_OTHER;
    return CLI_OPT_TAKEN;
}

/* Options go anywhere before "--"; the TEXT arguments are gathered in place at the front of
 * argv (each slot written has already been read). 0 or EXIT_USAGE. */
int translate_parse(int argc, char **argv, translate_options *o) {
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
    o->p.task = o->common.task;
    o->p.split = o->common.split;
    o->p.split_lang = o->common.split_lang;
    return 0;
}

/* HTML in: what only plain text has (n-best lists, alignments, dumps, prefixes) is refused. */
static int check_html(const translate_options *o) {
    const char *what = o->nbest ? "--n-best" : o->align ? "--alignment" : o->dump_path ? "--dump-attention"
                     : o->prefix || o->prefix_file ? "--prefix" : NULL;
    if (o->html && what) {
        fprintf(stderr, "attend translate: %s is for plain text: not with --format html or --document\n", what);
        return EXIT_USAGE;
    }
    if (o->document && o->n_texts) {
        fprintf(stderr, "attend translate: --document reads FILE: no TEXT arguments with it\n");
        return EXIT_USAGE;
    }
    return 0;
}

/* Options that do not go together, before the model is loaded. 0 or EXIT_USAGE. */
int translate_check_options(const translate_options *o) {
    const attend_params *p = &o->p;
    if (!p->sample && (p->top_k || p->top_p > 0 || p->temperature > 0 || p->seed)) {
        fprintf(stderr, "attend translate: --top-k, --top-p, --temperature and --seed need --sample\n");
        return EXIT_USAGE;
    }
    if (p->sample && p->num_beams > 1) {
        fprintf(stderr, "attend translate: --sample draws one token at a time: not with --beam %d\n", p->num_beams);
        return EXIT_USAGE;
    }
    if (o->prefix && o->prefix_file) {
        fprintf(stderr, "attend translate: --prefix and --prefix-file: give one of them\n");
        return EXIT_USAGE;
    }
    if (o->reverse_model && (!o->align || o->nbest)) {
        fprintf(stderr, "attend translate: --reverse-model changes --alignment's links: %s\n",
                o->align ? "not with --n-best (one translation a line)" : "give --alignment with it");
        return EXIT_USAGE;
    }
    if (o->dump_logits && !o->dump_path) {
        fprintf(stderr, "attend translate: --dump-logits needs --dump-attention FILE\n");
        return EXIT_USAGE;
    }
    return check_html(o);
}

/* The options against the model: its languages, its beams for --n-best, its layers and heads
 * for --alignment. 0 or EXIT_USAGE. */
int translate_check_with_model(translate_options *o, const attend_model *m) {
    const attend_config *c = attend_get_config(m);
    char err[512];
    if (c->audio) {
        fprintf(stderr, "attend translate: a speech model (%s): it reads audio, use attend transcribe\n",
                c->architecture);
        return EXIT_USAGE;
    }
    if (o->align && o->view_from_model && attend_view_parse(c->alignment_view, &o->view, err, sizeof err)) {
        fprintf(stderr, "attend translate: --alignment: %s\n", err); /* the loader checked it */
        return EXIT_USAGE;
    }
    if (cli_check_languages("translate", m, o->p.src_lang, o->p.tgt_lang, 1) || cli_check_task("translate", m, o->p.task))
        return EXIT_USAGE;
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

