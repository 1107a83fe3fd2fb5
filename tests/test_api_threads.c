/* attend.h's thread-safety claim, tested: several threads translate different inputs on
 * one loaded model at once, each with its own thread count and search, and every result
 * equals the same call made alone. `make tsan` runs this under ThreadSanitizer.
 * Usage: test_api_threads [MODEL.gguf] [INNER_THREADS_MAX] (default tests/data/tiny-v1.gguf, 2) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/attend.h"
#include "check.h"

#define N_LINES 24
#define N_WORKERS 4
#define ROUNDS 3

static const char *const lines[N_LINES] = {
    "Hallo Welt!", "Wo ist der Bahnhof?", "Ich habe Hunger.", "Zwei Hunde spielen im Schnee.",
    "Ein Mann liest ein Buch.", "Die Katze schläft auf dem Sofa.", "Wir fahren morgen nach Berlin.",
    "Kannst du mir bitte helfen?", "Das Wetter ist heute schön.", "Er trinkt einen Kaffee.",
    "Sie singt ein Lied.", "Der Zug kommt um acht Uhr.", "Ich bin müde.", "Wie spät ist es?",
    "Tom hat keine Zeit.", "Eine Frau fährt Fahrrad.", "Die Kinder lachen.", "Es regnet.",
    "Mein Bruder wohnt in Hamburg.", "Das ist mein Haus.", "Ein Junge springt ins Wasser.",
    "Wir essen zusammen.", "Der Hund bellt laut.", "Gute Nacht!"};

typedef struct {
    char *text;
    float score;
    float cross_sum;
} outcome;

static attend_model *model;
static outcome want[N_LINES];
static int inner_max = 2;

/* The call each line gets, whichever thread makes it: its own beams and thread count. */
static attend_params params_for(int i) {
    attend_params p = attend_default_params();
    p.threads = 1 + i % inner_max;
    p.num_beams = 1 + i % 3;
    p.want_attention = p.want_scores = 1;
    return p;
}

static int translate_one(int i, outcome *o) {
    attend_params p = params_for(i);
    attend_result r;
    char err[256];
    if (attend_translate(model, &lines[i], NULL, 1, NULL, &p, &r, err, sizeof err)) {
        fprintf(stderr, "line %d: %s\n", i, err);
        return -1;
    }
    o->text = strdup(r.text);
    o->score = r.score;
    double s = 0;
    const attend_config *c = attend_get_config(model);
    for (size_t k = 0; k < (size_t)c->decoder_layers * c->decoder_heads * r.n_tgt * r.n_src; k++) s += r.cross[k];
    o->cross_sum = (float)s;
    attend_result_free(&r);
    return 0;
}

static int failures;
static pthread_mutex_t fail_lock = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    const int w = (int)(size_t)arg;
    for (int round = 0; round < ROUNDS; round++)
        for (int k = 0; k < N_LINES; k++) {
            const int i = (k * 7 + w * 5 + round) % N_LINES; /* each worker its own order */
            outcome o;
            int bad = translate_one(i, &o) != 0;
            if (!bad) {
                bad = strcmp(o.text, want[i].text) || o.score != want[i].score || o.cross_sum != want[i].cross_sum;
                if (bad)
                    fprintf(stderr, "worker %d line %d: '%s' %.6f %.6f, alone: '%s' %.6f %.6f\n", w, i, o.text,
                            (double)o.score, (double)o.cross_sum, want[i].text, (double)want[i].score,
                            (double)want[i].cross_sum);
                free(o.text);
            }
            if (bad) {
                pthread_mutex_lock(&fail_lock);
                failures++;
                pthread_mutex_unlock(&fail_lock);
            }
        }
    return NULL;
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : repo_path("tests/data/tiny-v1.gguf");
    (void)passed, (void)failed; /* check.h's counters: this test counts its calls */
    if (argc > 2) inner_max = atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
    char err[256];
    model = attend_load(path, err, sizeof err);
    if (!model) {
        fprintf(stderr, "%s: %s\n", path, err);
        return 1;
    }
    for (int i = 0; i < N_LINES; i++)
        if (translate_one(i, &want[i])) return 1;
    pthread_t t[N_WORKERS];
    for (int w = 0; w < N_WORKERS; w++) pthread_create(&t[w], NULL, worker, (void *)(size_t)w);
    for (int w = 0; w < N_WORKERS; w++) pthread_join(t[w], NULL);
    for (int i = 0; i < N_LINES; i++) free(want[i].text);
    attend_free(model);
    const int calls = N_WORKERS * ROUNDS * N_LINES;
    printf("%d concurrent calls on %d threads (1..%d threads inside each): %d differ from the call alone\n",
           calls, N_WORKERS, inner_max, failures);
    printf("%d passed, %d failed\n", calls - failures, failures);
    return failures != 0;
}
