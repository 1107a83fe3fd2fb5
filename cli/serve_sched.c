/* The scheduler (serve.h): one thread translates for every connection. A request is queued;
 * the batch gathers requests until none has come for --gather-ms (at most GATHER_SPAN times
 * that after the first) or --max-batch-tokens source tokens are queued, then every queued
 * request with the same settings (serve_request.key)
 * joins, up to the token budget, and the library translates them as one call, sorted by length
 * and cut into batches as attend translate does. Results never depend on the batch a
 * sentence lands in (docs/speed.md), so each request gets what attend translate would give. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

struct serve_sched {
    attend_model *m;
    const serve_options *o;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail; /* the queue, oldest first */
    int queued;             /* sentences in the queue */
    int busy;               /* sentences being translated */
    int stopping;
};

double serve_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static int is_blank(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\f' && s[i] != '\v' && s[i] != 0) return 0;
    return 1; /* as attend translate: a blank line gives a blank line, without the model */
}

/* Source tokens of a job's sentences, for the budget (a line that fails to tokenize counts 1). */
static int job_tokens(const serve_job *job) {
    int sum = 0;
    char err[256];
    for (int i = 0; i < job->req.n; i++) {
        if (is_blank(job->req.lines[i], job->req.lens[i])) continue;
        const int t = attend_count_tokens(job->m, job->req.lines[i], job->req.lens[i], err, sizeof err);
        sum += t > 0 ? t : 1;
    }
    return sum;
}

int serve_sched_submit(serve_sched *s, serve_job *job) {
    job->m = s->m;
    job->tokens = job_tokens(job); /* tokenized here, outside the lock */
    job->queued_at = serve_now();
    job->next = NULL;
    pthread_mutex_lock(&s->mu);
    const int full = s->stopping || (s->queued > 0 && s->queued + job->req.n > s->o->max_queue);
    if (!full) {
        if (s->tail) s->tail->next = job;
        else s->head = job;
        s->tail = job;
        s->queued += job->req.n;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return full ? -1 : 0;
}

int serve_sched_pending(serve_sched *s) {
    pthread_mutex_lock(&s->mu);
    const int n = s->queued + s->busy;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---------------------------------------------------------------------------------------
 * One batch: the sentences of several jobs in one attend_translate call */

typedef struct {
    serve_job *jobs; /* linked through next */
    const char **lines;
    size_t *lens;
    const char **targets; /* NULL when no job forces a translation */
    const char **prefixes; /* NULL when no job gives a prefix */
    int *job_of, *line_of, n;
} batch;

/* Collect the non-blank sentences of b's jobs. 0 or -1 (out of memory). */
static int batch_collect(batch *b, int total) {
    b->lines = malloc(sizeof(char *) * (size_t)total);
    b->lens = malloc(sizeof(size_t) * (size_t)total);
    b->targets = calloc((size_t)total, sizeof(char *));
    b->prefixes = calloc((size_t)total, sizeof(char *));
    b->job_of = malloc(sizeof(int) * (size_t)total);
    b->line_of = malloc(sizeof(int) * (size_t)total);
    if (!b->lines || !b->lens || !b->targets || !b->prefixes || !b->job_of || !b->line_of) return -1;
    int j = 0, forced = 0, prefixed = 0;
    for (serve_job *job = b->jobs; job; job = job->next, j++) {
        job->res = calloc((size_t)job->req.n, sizeof(attend_result));
        if (!job->res) return -1;
        for (int i = 0; i < job->req.n; i++) {
            if (is_blank(job->req.lines[i], job->req.lens[i])) continue;
            b->lines[b->n] = job->req.lines[i];
            b->lens[b->n] = job->req.lens[i];
            b->targets[b->n] = job->req.targets ? job->req.targets[i] : NULL;
            forced |= b->targets[b->n] != NULL;
            b->prefixes[b->n] = job->req.prefixes ? job->req.prefixes[i] : NULL;
            prefixed |= b->prefixes[b->n] != NULL;
            b->job_of[b->n] = j;
            b->line_of[b->n++] = i;
        }
    }
    if (!forced) free(b->targets), b->targets = NULL;
    if (!prefixed) free(b->prefixes), b->prefixes = NULL;
    return 0;
}

static void batch_free(batch *b) {
    free(b->lines);
    free(b->lens);
    free(b->targets);
    free(b->prefixes);
    free(b->job_of);
    free(b->line_of);
}

/* Every job of b answered with status and message (the results freed). */
static void fail_jobs(serve_job *jobs, int status, const char *message) {
    for (serve_job *job = jobs; job; job = job->next) {
        for (int i = 0; job->res && i < job->req.n; i++) attend_result_free(&job->res[i]);
        free(job->res);
        job->res = NULL;
        job->http_status = status;
        job->body = serve_response_error(message, &job->body_len);
    }
}

/* b's entries are HTML (requests with "format": "html", batched only with each other):
 * translated by attend_translate_html, each result's text the translated HTML. 0, or -1
 * with err. */
static int translate_html(serve_sched *s, batch *b, const attend_params *p, attend_result *res, char *err,
                          size_t errlen) {
    if (!b->n) return 0;
    char **html = calloc((size_t)b->n, sizeof(char *));
    int *cut = calloc((size_t)b->n, sizeof(int));
    int rc = html && cut ? attend_translate_html(s->m, b->lines, b->lens, b->n, 0, p, html, cut, err, errlen) : -1;
    if (!html || !cut) snprintf(err, errlen, "out of memory");
    for (int k = 0; !rc && k < b->n; k++) res[k].text = html[k], res[k].truncated = cut[k];
    free(html);
    free(cut);
    return rc;
}

/* Translate b's sentences with the first job's settings (what is only reported, scores and
 * attention, asked when any job asks). 0, or -1 with err. */
static int batch_translate(serve_sched *s, batch *b, char *err, size_t errlen) {
    attend_params p = b->jobs->req.p;
    for (serve_job *job = b->jobs->next; job; job = job->next) {
        p.want_scores |= job->req.p.want_scores;
        p.want_attention |= job->req.p.want_attention;
    }
    if (s->o->verbose) {
        int n = 0;
        for (serve_job *job = b->jobs; job; job = job->next) n++;
        fprintf(stderr, "attend serve: batch of %d sentence%s from %d request%s\n", b->n, b->n == 1 ? "" : "s", n,
                n == 1 ? "" : "s");
    }
    p.target_prefix = b->prefixes;
    p.batch_size = 64;
    p.batch_tokens = s->o->max_batch_tokens;
    attend_result *res = calloc((size_t)(b->n ? b->n : 1), sizeof *res);
    if (!res) return snprintf(err, errlen, "out of memory"), -1;
    const int rc = b->jobs->req.html ? translate_html(s, b, &p, res, err, errlen)
                                     : b->n ? attend_translate(s->m, b->lines, b->lens, b->n, b->targets, &p, res, err,
                                                               errlen)
                                            : 0;
    if (rc) {
        free(res);
        return -1;
    }
    serve_job **by_index = malloc(sizeof(serve_job *) * (size_t)(b->n + 1));
    int j = 0;
    for (serve_job *job = b->jobs; by_index && job; job = job->next) by_index[j++] = job;
    for (int k = 0; k < b->n; k++) { /* each result moves to its job */
        if (by_index) by_index[b->job_of[k]]->res[b->line_of[k]] = res[k];
        else attend_result_free(&res[k]);
    }
    free(by_index);
    free(res);
    return by_index ? 0 : (snprintf(err, errlen, "out of memory"), -1);
}

/* Translate the jobs (a list) together; when that fails, each alone, so one bad request does
 * not fail the others. Every job gets its answer. */
static void run_jobs(serve_sched *s, serve_job *jobs, int sentences) {
    batch b = {.jobs = jobs};
    char err[512];
    int rc = batch_collect(&b, sentences > 0 ? sentences : 1);
    if (rc) snprintf(err, sizeof err, "out of memory");
    else rc = batch_translate(s, &b, err, sizeof err);
    batch_free(&b);
    if (rc && jobs->next) {
        for (serve_job *job = jobs, *next; job; job = next) {
            next = job->next;
            for (int i = 0; job->res && i < job->req.n; i++) attend_result_free(&job->res[i]);
            free(job->res);
            job->res = NULL;
            job->next = NULL;
            run_jobs(s, job, job->req.n);
            job->next = next;
        }
        return;
    }
    if (rc) fail_jobs(jobs, 400, err);
    else
        for (serve_job *job = jobs; job; job = job->next) serve_response_job(job);
}

/* ---------------------------------------------------------------------------------------
 * The thread */

/* Source tokens queued with the head's settings (the lock held). */
static int tokens_like_head(const serve_sched *s) {
    int sum = 0;
    for (const serve_job *j = s->head; j; j = j->next)
        if (!strcmp(j->req.key, s->head->req.key)) sum += j->tokens;
    return sum;
}

/* When gathering ends: --gather-ms after the latest request, as long as requests keep
 * coming (clients answered together come back a few milliseconds apart), but at most
 * GATHER_SPAN times --gather-ms after the first (the lock held). */
#define GATHER_SPAN 8
static double gather_until(const serve_sched *s) {
    const double ms = s->o->gather_ms / 1000.0, quiet = s->tail->queued_at + ms;
    const double cap = s->head->queued_at + GATHER_SPAN * ms;
    return quiet < cap ? quiet : cap;
}

/* Wait for a job, then for others while they keep arriving (gather_until), unless the
 * budget is already queued (the lock held). 0, or -1 when stopping with nothing queued. */
static int wait_for_batch(serve_sched *s) {
    while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
    if (!s->head) return -1;
    double until;
    while (!s->stopping && serve_now() < (until = gather_until(s)) &&
           tokens_like_head(s) < s->o->max_batch_tokens) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        const double wait = until - serve_now();
        long long ns = t.tv_nsec + (long long)(wait * 1e9);
        t.tv_sec += (time_t)(ns / 1000000000);
        t.tv_nsec = (long)(ns % 1000000000);
        pthread_cond_timedwait(&s->cv, &s->mu, &t); /* a new job, or the time: look again */
    }
    return 0;
}

/* Take the head and the queued jobs with its settings, up to the token budget (the head
 * always; the lock held). Jobs that waited past --timeout are taken into *late. */
static serve_job *take_batch(serve_sched *s, int *sentences, serve_job **late) {
    serve_job *out = NULL, **end = &out, **prev = &s->head, *last = NULL;
    const char *key = s->head->req.key;
    char first_key[sizeof s->head->req.key];
    snprintf(first_key, sizeof first_key, "%s", key);
    int tokens = 0;
    const double now = serve_now();
    *sentences = 0;
    for (serve_job *j = s->head, *next; j; j = next) {
        next = j->next;
        const int late_job = now - j->queued_at > s->o->timeout;
        const int t = late_job ? 0 : !strcmp(j->req.key, first_key) ? j->tokens : -1;
        if (!late_job && (t < 0 || (out && tokens + t > s->o->max_batch_tokens))) {
            last = j;
            prev = &j->next;
            continue;
        }
        *prev = next; /* unlink */
        s->queued -= j->req.n;
        j->next = NULL;
        if (late_job) j->next = *late, *late = j;
        else *end = j, end = &j->next, tokens += t, *sentences += j->req.n;
    }
    s->tail = last;
    s->busy = *sentences;
    return out;
}

/* Hand each job back (its answer is ready). */
static void finish_jobs(serve_job *jobs) {
    for (serve_job *job = jobs, *next; job; job = next) {
        next = job->next;
        job->next = NULL;
        job->finish(job);
    }
}

static void *sched_main(void *arg) {
    serve_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    while (wait_for_batch(s) == 0) {
        int sentences;
        serve_job *late = NULL, *jobs = take_batch(s, &sentences, &late);
        pthread_mutex_unlock(&s->mu);
        fail_jobs(late, 503, "timed out waiting in the queue (see --timeout)");
        finish_jobs(late);
        if (jobs) run_jobs(s, jobs, sentences);
        finish_jobs(jobs);
        pthread_mutex_lock(&s->mu);
        s->busy = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

serve_sched *serve_sched_start(attend_model *m, const serve_options *o, char *err, size_t errlen) {
    serve_sched *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "out of memory"), NULL;
    s->m = m;
    s->o = o;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, sched_main, s)) {
        snprintf(err, errlen, "cannot start the scheduler thread");
        free(s);
        return NULL;
    }
    return s;
}

void serve_sched_stop(serve_sched *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1; /* wait_for_batch still empties the queue first */
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
}

void serve_sched_free(serve_sched *s) {
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
