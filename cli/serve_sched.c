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

#include "output.h" /* cli_is_blank: a blank line gives a blank line, without the model */
#include "serve.h"

struct serve_sched {
    attend_model *m;
    const serve_options *o;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_job *head, *tail; /* the queue, oldest first */
    int queued;             /* sentences in the queue */
    long long queued_tokens; /* their source tokens */
    int busy;               /* sentences being translated */
    int busy_tokens;        /* their source tokens */
    double rate;            /* source tokens translated a second, measured (0 until then) */
    int stopping;
};

double serve_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Source tokens of a job's sentences, for the budget (a line that fails to tokenize counts 1). */
static int job_tokens(const serve_job *job) {
    int sum = 0;
    char err[256];
    for (int i = 0; i < job->req.n; i++) {
        if (cli_is_blank(job->req.lines[i], job->req.lens[i])) continue;
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
    const int full = s->stopping || (s->queued > 0 && s->queued + job->req.n > s->o->max_queue) ||
                     (s->queued > 0 && s->rate > 0 && (s->queued_tokens + s->busy_tokens) / s->rate > s->o->max_wait);
    if (!full) {
        if (s->tail) s->tail->next = job;
        else s->head = job;
        s->tail = job;
        s->queued += job->req.n;
        s->queued_tokens += job->tokens;
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
 * One batch: the sentences of several jobs in one attend_translate call. The library hands
 * results over batch by batch (attend_params.on_batch, SERVE_BATCH_SENTENCES sentences each, shortest
 * first): a job is answered as soon as its last sentence is done, so the short requests of a
 * large gathering do not wait for the long ones. */

/* Sentences per library batch: past this, batching gains little on a compute-bound step
 * (BENCHMARKS.md "Serving"), and a smaller batch answers its requests sooner. */
#define SERVE_BATCH_SENTENCES 32

typedef struct {
    serve_job **jobs; /* [n_jobs] */
    int n_jobs;
    int *left;        /* [n_jobs] sentences of job j not yet handed over */
    char *answered;   /* [n_jobs] job j handed back already: never touched again */
    const char **lines;
    size_t *lens;
    const char **targets;  /* NULL when no job forces a translation */
    const char **prefixes; /* NULL when no job gives a prefix */
    int *job_of, *line_of, n;
    attend_result *res;    /* [n] the library's results, moved to their jobs */
} batch;

/* Collect the non-blank sentences of b's jobs. 0 or -1 (out of memory). */
static int batch_collect(batch *b, int total) {
    b->lines = malloc(sizeof(char *) * (size_t)total);
    b->lens = malloc(sizeof(size_t) * (size_t)total);
    b->targets = calloc((size_t)total, sizeof(char *));
    b->prefixes = calloc((size_t)total, sizeof(char *));
    b->job_of = malloc(sizeof(int) * (size_t)total);
    b->line_of = malloc(sizeof(int) * (size_t)total);
    b->left = calloc((size_t)b->n_jobs, sizeof(int));
    b->answered = calloc((size_t)b->n_jobs, 1);
    if (!b->lines || !b->lens || !b->targets || !b->prefixes || !b->job_of || !b->line_of || !b->left ||
        !b->answered)
        return -1;
    int forced = 0, prefixed = 0;
    for (int j = 0; j < b->n_jobs; j++) {
        serve_job *job = b->jobs[j];
        job->res = calloc((size_t)job->req.n, sizeof(attend_result));
        if (!job->res) return -1;
        for (int i = 0; i < job->req.n; i++) {
            if (cli_is_blank(job->req.lines[i], job->req.lens[i])) continue;
            b->lines[b->n] = job->req.lines[i];
            b->lens[b->n] = job->req.lens[i];
            b->targets[b->n] = job->req.targets ? job->req.targets[i] : NULL;
            forced |= b->targets[b->n] != NULL;
            b->prefixes[b->n] = job->req.prefixes ? job->req.prefixes[i] : NULL;
            prefixed |= b->prefixes[b->n] != NULL;
            b->job_of[b->n] = j;
            b->line_of[b->n++] = i;
            b->left[j]++;
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
    free(b->left);
    free(b->answered);
    free(b->res);
}

/* Job j's answer made and the job handed back (it belongs to the HTTP side from now on). */
static void answer(batch *b, int j) {
    serve_response_job(b->jobs[j]);
    b->answered[j] = 1;
    b->jobs[j]->finish(b->jobs[j]);
}

/* Move result k to its job; answer the job when it was its last. */
static void hand_over(batch *b, int k) {
    const int j = b->job_of[k];
    b->jobs[j]->res[b->line_of[k]] = b->res[k];
    memset(&b->res[k], 0, sizeof b->res[k]);
    b->job_of[k] = -1; /* moved */
    if (--b->left[j] == 0) answer(b, j);
}

/* attend_params.on_batch: these results are complete. */
static int batch_done(void *user, const int *index, int n) {
    batch *b = user;
    for (int i = 0; i < n; i++) hand_over(b, index[i]);
    return 0;
}

/* Job j's results freed, for an error answer or a retry. */
static void drop_results(serve_job *job) {
    for (int i = 0; job->res && i < job->req.n; i++) attend_result_free(&job->res[i]);
    free(job->res);
    job->res = NULL;
}

/* Every job of b not answered yet answered with status and message, and handed back. */
static void fail_jobs(batch *b, int status, const char *message) {
    for (int j = 0; j < b->n_jobs; j++) {
        if (b->answered[j]) continue;
        serve_job *job = b->jobs[j];
        drop_results(job);
        job->http_status = status;
        job->body = serve_response_error(message, &job->body_len);
        b->answered[j] = 1;
        job->finish(job);
    }
}

/* b's entries are HTML (requests with "format": "html", batched only with each other):
 * translated by attend_translate_html, each result's text the translated HTML. 0, or -1
 * with err. */
static int translate_html(serve_sched *s, batch *b, const attend_params *p, char *err, size_t errlen) {
    if (!b->n) return 0;
    char **html = calloc((size_t)b->n, sizeof(char *));
    int *cut = calloc((size_t)b->n, sizeof(int));
    int rc = html && cut ? attend_translate_html(s->m, b->lines, b->lens, b->n, 0, p, html, cut, err, errlen) : -1;
    if (!html || !cut) snprintf(err, errlen, "out of memory");
    for (int k = 0; !rc && k < b->n; k++) b->res[k].text = html[k], b->res[k].truncated = cut[k];
    free(html);
    free(cut);
    return rc;
}

/* Translate b's sentences with the first job's settings (what is only reported, scores and
 * attention, asked when any job asks), answering each job once its sentences are done.
 * 0, or -1 with err (the jobs not answered still to be). */
static int batch_translate(serve_sched *s, batch *b, char *err, size_t errlen) {
    attend_params p = b->jobs[0]->req.p;
    for (int j = 1; j < b->n_jobs; j++) {
        p.want_scores |= b->jobs[j]->req.p.want_scores;
        p.want_attention |= b->jobs[j]->req.p.want_attention;
    }
    if (s->o->verbose)
        fprintf(stderr, "attend serve: batch of %d sentence%s from %d request%s\n", b->n, b->n == 1 ? "" : "s",
                b->n_jobs, b->n_jobs == 1 ? "" : "s");
    p.target_prefix = b->prefixes;
    p.batch_size = SERVE_BATCH_SENTENCES;
    p.batch_tokens = s->o->max_batch_tokens;
    p.on_batch = batch_done;
    p.user = b;
    if (!(b->res = calloc((size_t)(b->n ? b->n : 1), sizeof *b->res)))
        return snprintf(err, errlen, "out of memory"), -1;
    for (int j = 0; j < b->n_jobs; j++)
        if (!b->left[j]) answer(b, j); /* blank lines only */
    const int html = b->jobs[0]->req.html;
    const int rc = html ? translate_html(s, b, &p, err, errlen)
                        : b->n ? attend_translate(s->m, b->lines, b->lens, b->n, b->targets, &p, b->res, err, errlen)
                               : 0;
    for (int k = 0; !rc && k < b->n; k++) /* what on_batch did not hand over (the HTML path) */
        if (b->job_of[k] >= 0) hand_over(b, k);
    return rc;
}

/* Translate the jobs together; when that fails, each unanswered one alone, so one bad request
 * does not fail the others. Every job gets its answer and is handed back. */
static void run_jobs(serve_sched *s, serve_job **jobs, int n_jobs, int sentences) {
    batch b = {.jobs = jobs, .n_jobs = n_jobs};
    char err[512];
    int rc = batch_collect(&b, sentences > 0 ? sentences : 1);
    if (rc) snprintf(err, sizeof err, "out of memory");
    else rc = batch_translate(s, &b, err, sizeof err);
    if (rc && n_jobs > 1 && b.answered) {
        for (int j = 0; j < n_jobs; j++) {
            if (b.answered[j]) continue;
            drop_results(jobs[j]);
            b.answered[j] = 1;
            run_jobs(s, &jobs[j], 1, jobs[j]->req.n);
        }
    } else if (rc && b.answered) {
        fail_jobs(&b, 400, err);
    } else if (rc) { /* out of memory before anything was answered */
        for (int j = 0; j < n_jobs; j++) {
            drop_results(jobs[j]);
            jobs[j]->http_status = 500;
            jobs[j]->body = serve_response_error("out of memory", &jobs[j]->body_len);
            jobs[j]->finish(jobs[j]);
        }
    }
    batch_free(&b);
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
        s->queued_tokens -= j->tokens;
        j->next = NULL;
        if (late_job) j->next = *late, *late = j;
        else *end = j, end = &j->next, tokens += t, *sentences += j->req.n;
    }
    s->tail = last;
    s->busy = *sentences;
    s->busy_tokens = tokens;
    return out;
}

/* Jobs that waited past --timeout: answered 503 and handed back. */
static void answer_late(serve_job *late) {
    for (serve_job *job = late, *next; job; job = next) {
        next = job->next;
        job->next = NULL;
        job->http_status = 503;
        job->body = serve_response_error("timed out waiting in the queue (see --timeout)", &job->body_len);
        job->finish(job);
    }
}

/* Translate a list of jobs (from take_batch): each is answered and handed back. */
static void run_list(serve_sched *s, serve_job *list, int sentences) {
    int n = 0;
    for (serve_job *j = list; j; j = j->next) n++;
    serve_job **jobs = malloc(sizeof *jobs * (size_t)(n ? n : 1));
    n = 0;
    for (serve_job *j = list, *next; j; j = next) {
        next = j->next;
        j->next = NULL;
        if (jobs) jobs[n++] = j;
        else { /* out of memory: each alone, with the array of one on the stack */
            serve_job *one[1] = {j};
            run_jobs(s, one, 1, j->req.n);
        }
    }
    if (jobs && n) run_jobs(s, jobs, n, sentences);
    free(jobs);
}

static void *sched_main(void *arg) {
    serve_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    while (wait_for_batch(s) == 0) {
        int sentences;
        serve_job *late = NULL, *jobs = take_batch(s, &sentences, &late);
        pthread_mutex_unlock(&s->mu);
        answer_late(late);
        const double t0 = serve_now();
        if (jobs) run_list(s, jobs, sentences);
        const double took = serve_now() - t0;
        pthread_mutex_lock(&s->mu);
        if (s->busy_tokens > 0 && took > 0) /* a moving average: the rate follows the load's mix */
            s->rate = s->rate > 0 ? 0.7 * s->rate + 0.3 * s->busy_tokens / took : s->busy_tokens / took;
        s->busy = s->busy_tokens = 0;
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
