/* The models of one attend serve (serve.h): -m FILE[=SRC-TGT] (repeatable) and --models DIR
 * loaded, each given its language pair (a model without language tokens) and its own
 * scheduler thread. Routing a request to one of them: serve_route.c. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "serve.h"

static int is_multi(const attend_model *m) { return attend_get_config(m)->n_languages > 0; }

/* "dir/de-en.gguf" -> "de-en". */
static void base_name(const char *path, char *out, size_t n) {
    const char *slash = strrchr(path, '/'), *b = slash ? slash + 1 : path;
    size_t len = strlen(b);
    if (len > 5 && !strcmp(b + len - 5, ".gguf")) len -= 5;
    snprintf(out, n, "%.*s", (int)len, b);
}

/* -m FILE=SRC-TGT: the pair split off (a file that exists by the whole name keeps it). */
static void split_spec(const char *arg, char *path, size_t n, const char **pair) {
    struct stat st;
    const char *eq = strrchr(arg, '=');
    *pair = NULL;
    if (eq && stat(arg, &st) != 0) {
        snprintf(path, n, "%.*s", (int)(eq - arg), arg);
        *pair = eq + 1;
    } else
        snprintf(path, n, "%s", arg);
}

/* The pair of model v: FILE=SRC-TGT, --languages (one model), else the file's name. */
static int find_pair(serve_model *v, const char *explicit_pair, int n_models) {
    const char *given = explicit_pair ? explicit_pair : n_models == 1 ? v->o.languages : NULL;
    memset(v->o.pair, 0, sizeof v->o.pair);
    if (given && is_multi(v->m)) {
        fprintf(stderr, "attend serve: %s: this model names its own languages (attend info lists them): give "
                        "it no pair\n", v->name);
        return EXIT_USAGE;
    }
    if (given && serve_pair_parse(given, v->o.pair)) {
        fprintf(stderr, "attend serve: %s: the pair %s: give SRC-TGT, e.g. de-en\n", v->name, given);
        return EXIT_USAGE;
    }
    if (!given && !is_multi(v->m)) serve_pair_from_name(v->name, v->o.pair);
    if (n_models > 1 && !is_multi(v->m) && !v->o.pair[0][0]) {
        fprintf(stderr, "attend serve: %s: its name carries no language pair: give one, -m FILE=SRC-TGT\n", v->name);
        return EXIT_USAGE;
    }
    return 0;
}

/* The defaults (--src-lang, --tgt-lang, --task) checked against model v; with several
 * models they only apply where they fit. */
static int check_defaults(serve_model *v, int n_models) {
    cli_model_options *c = &v->o.common;
    const int langs_ok = !(c->src_lang || c->tgt_lang) || (is_multi(v->m) &&
                         !cli_check_languages("serve", v->m, c->src_lang, c->tgt_lang, 0));
    if (n_models == 1) {
        if ((c->src_lang || c->tgt_lang) && cli_check_languages("serve", v->m, c->src_lang, c->tgt_lang, 0))
            return EXIT_USAGE;
        return cli_check_task("serve", v->m, c->task) ? EXIT_USAGE : 0;
    }
    if (!langs_ok) c->src_lang = c->tgt_lang = NULL;
    if (c->task && attend_get_config(v->m)->n_tasks == 0) c->task = NULL;
    return 0;
}

static int load_one(serve_models *t, const char *arg, const serve_options *o, int n_models) {
    char path[4200];
    const char *pair;
    split_spec(arg, path, sizeof path, &pair);
    serve_model *v = &t->v[t->n];
    v->o = *o;
    v->o.common.model = NULL;
    base_name(path, v->name, sizeof v->name);
    const char *slash = strrchr(path, '/');
    snprintf(v->file, sizeof v->file, "%.255s", slash ? slash + 1 : path);
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].name, v->name)) {
            fprintf(stderr, "attend serve: two models named %s: each needs a name of its own\n", v->name);
            return EXIT_USAGE;
        }
    v->m = cli_load_model(path);
    if (!v->m) return EXIT_USAGE;
    t->n++;
    const int rc = find_pair(v, pair, n_models);
    return rc ? rc : check_defaults(v, n_models);
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The .gguf files of dir, sorted, appended to list (malloc'd paths). */
static int list_dir(const char *dir, char **list, int *n) {
    DIR *d = opendir(dir);
    if (!d) return fprintf(stderr, "attend serve: --models %s: cannot open the folder\n", dir), EXIT_USAGE;
    const int first = *n;
    for (struct dirent *e; (e = readdir(d));) {
        const size_t len = strlen(e->d_name);
        if (len <= 5 || strcmp(e->d_name + len - 5, ".gguf") || e->d_name[0] == '.') continue;
        if (*n == SERVE_MAX_MODELS) {
            closedir(d);
            return fprintf(stderr, "attend serve: more than %d models\n", SERVE_MAX_MODELS), EXIT_USAGE;
        }
        if (asprintf(&list[(*n)++], "%s/%s", dir, e->d_name) < 0) list[--(*n)] = NULL;
    }
    closedir(d);
    qsort(list + first, (size_t)(*n - first), sizeof *list, by_name);
    if (*n == first) return fprintf(stderr, "attend serve: --models %s: no .gguf file in it\n", dir), EXIT_USAGE;
    return 0;
}

int serve_models_load(serve_models *t, const serve_options *o) {
    char *list[SERVE_MAX_MODELS], buf[4200];
    int n = 0, rc = 0;
    for (int i = 0; i < o->n_model_args; i++) list[n++] = strdup(o->model_args[i]);
    if (o->models_dir) rc = list_dir(o->models_dir, list, &n);
    if (!rc && n == 0) list[n++] = strdup(cli_model_path(o->common.model, buf, sizeof buf));
    if (!rc && o->languages && n > 1) {
        fprintf(stderr, "attend serve: --languages names one model's pair: with several, give -m FILE=SRC-TGT\n");
        rc = EXIT_USAGE;
    }
    memset(t, 0, sizeof *t);
    t->v = calloc((size_t)(n ? n : 1), sizeof *t->v);
    if (!t->v) rc = EXIT_USAGE;
    for (int i = 0; i < n && !rc; i++) rc = list[i] ? load_one(t, list[i], o, n) : EXIT_USAGE;
    for (int i = 0; i < n; i++) free(list[i]);
    if (rc) serve_models_free(t);
    return rc;
}

int serve_models_start(serve_models *t, char *err, size_t errlen) {
    for (int i = 0; i < t->n; i++) {
        t->v[i].s = serve_sched_start(t->v[i].m, &t->v[i].o, err, errlen);
        if (t->v[i].s) continue;
        serve_models_stop(t);
        return -1;
    }
    return 0;
}

void serve_models_stop(serve_models *t) {
    for (int i = 0; i < t->n; i++)
        if (t->v[i].s) serve_sched_stop(t->v[i].s);
}

void serve_models_free(serve_models *t) {
    for (int i = 0; i < t->n; i++) {
        if (t->v[i].s) serve_sched_free(t->v[i].s);
        attend_free(t->v[i].m);
    }
    free(t->v);
    memset(t, 0, sizeof *t);
}

int serve_models_pending(const serve_models *t) {
    int n = 0;
    for (int i = 0; i < t->n; i++) n += t->v[i].s ? serve_sched_pending(t->v[i].s) : 0;
    return n;
}
