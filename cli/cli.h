/* cli: what the attend subcommands share (model lookup, number parsing, exit statuses). */
#ifndef ATTEND_CLI_H
#define ATTEND_CLI_H

#include <stddef.h>
#include <stdio.h>

#include "../model/attend.h"

/* Exit statuses (documented in README.md). */
enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2, EXIT_MODEL = 3, EXIT_IO = 4 };

/* Load -m's model (path may be NULL: $ATTEND_MODEL, else the shipped model next to the
 * binary); on failure print one line and exit with EXIT_USAGE or EXIT_MODEL. */
attend_model *cli_load_model(const char *path);
/* The same; inspect_only: for commands that only read the configuration or check the file. */
attend_model *cli_load_model_with(const char *path, int inspect_only);
/* --compute NAME (f32, bf16 or auto): the compute type cli_load_model loads with; an unknown
 * name prints one line and returns EXIT_USAGE, else 0. */
int cli_set_compute(const char *opt, const char *name);
const char *cli_compute(void);
/* The model file a command uses: path if given, else $ATTEND_MODEL, else the shipped model
 * next to the binary; when there is none, print where it looked and exit with EXIT_USAGE.
 * buf (PATH_MAX bytes or more) may hold the result. */
const char *cli_model_path(const char *path, char *buf, size_t n);
/* Parse an integer option value in lo..hi, or print one line and exit with EXIT_USAGE. */
int cli_parse_int(const char *opt, const char *s, int lo, int hi);
/* The same for a real number in lo..hi. */
float cli_parse_float(const char *opt, const char *s, double lo, double hi);

/* 1 if -h or --help is among argv[1..argc) before any "--": every command takes it anywhere. */
int cli_wants_help(int argc, char **argv);
/* Is a an option: "-x" or "--xyz" ("-" alone is a file or text)? */
int cli_is_option(const char *a);
/* --src-lang / --tgt-lang against the model: a multilingual model needs the target (and,
 * with need_src, the source) language, as one of its codes; a model without languages takes
 * none. 0, or EXIT_USAGE after one line on stderr that lists the valid codes. */
int cli_check_languages(const char *cmd, const attend_model *m, const char *src, const char *tgt, int need_src);
/* --task against the model's tasks (NULL: none asked): 0, or EXIT_USAGE after a message
 * listing them. */
int cli_check_task(const char *cmd, const attend_model *m, const char *task);
/* Print "attend CMD: unknown option OPT (see --help)" and return EXIT_USAGE. */
int cli_unknown_option(const char *cmd, const char *opt);
/* Flush standard output. On a write error print one line (only once, and nothing for a
 * closed pipe, where attend ends quietly) and return EXIT_IO; else 0. */
int cli_flush_stdout(void);

int cmd_translate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_verify(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_align(int argc, char **argv);
int cmd_explore(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_split(int argc, char **argv);
int cmd_detect(int argc, char **argv);
int cmd_transcribe(int argc, char **argv);
int cmd_features(int argc, char **argv);
/* Standard input into memory (*n bytes, malloc'ed; at most 1 GiB): audio files given as "-".
 * NULL after one line on stderr naming the command. */
unsigned char *cli_read_stdin(const char *cmd, size_t *n);

#endif
