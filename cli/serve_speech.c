/* The worker of one speech model (serve.h): audio requests wait in a bounded queue
 * (--max-audio-queue; more get 503 at once) and are transcribed one at a time on this
 * thread, never on the HTTP thread: the upload decoded and turned into features exactly as
 * attend transcribe reads a file (speech_input.h), transcribed with timestamps (segments
 * with their times, whatever the format asked), then written in the format asked
 * (transcript_write.h). One at a time, because a transcription already uses every thread
 * of the model's pool; a job that waited past --timeout gets 503. At shutdown the
 * transcription running is stopped (attend_params.stop) and the queue answered 503. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "speech_input.h"
#include "transcript_write.h"

struct serve_speech {
    attend_model *m;
    const serve_options *o;
    int timestamp_begin; /* <|0.00|>, for verbose_json's seek */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    serve_audio_job *head, *tail; /* the queue, oldest first */
    int queued, busy, stopping;
    volatile int stop;  /* read by the library between steps: set once at shutdown */
};

/* ---------------------------------------------------------------------------------------
 * One job */

/* The answer of a transcript: job->answer in job->format. 0, or 500 with job->error. */
static int write_answer(serve_speech *s, serve_audio_job *job, const attend_transcript *t, double seconds) {
    transcript_write_options w = transcript_default_write_options();
    w.task = job->task == ATTEND_TASK_TRANSLATE ? "translate" : "transcribe";
    w.duration = seconds;
    w.words = job->words;
    w.timestamp_begin = s->timestamp_begin;
    FILE *f = open_memstream(&job->answer, &job->answer_len);
    if (!f || transcript_write(f, t, job->format, &w) || fclose(f)) {
        if (f) fclose(f);
        free(job->answer), job->answer = NULL;
        return serve_oai_fail(&job->error, 500, NULL, NULL, "out of memory");
    }
    const int json = strstr(job->format, "json") != NULL;
    job->type = json ? "application/json; charset=utf-8"
                : !strcmp(job->format, "vtt") ? "text/vtt; charset=utf-8"
                                              : "text/plain; charset=utf-8";
    return 0;
}

/* The audio's features (the upload freed once read). 0, or 400 with job->error. */
static int read_upload(serve_speech *s, serve_audio_job *job, float **mel, int *frames, double *seconds) {
    char err[512];
    *mel = speech_features(s->m, NULL, job->file, job->file_len, s->o->max_audio_seconds, frames, seconds, err,
                           sizeof err);
    free(job->body);
    job->body = NULL, job->file = NULL;
    if (*mel) return 0;
    if (strstr(err, "longer than the limit"))
        return serve_oai_fail(&job->error, 400, "file", "audio_too_long", "the audio is too long: %s (see "
                                                                         "--max-audio-seconds)", err);
    if (!strcmp(err, "out of memory")) return serve_oai_fail(&job->error, 500, NULL, NULL, "out of memory");
    return serve_oai_fail(&job->error, 400, "file", "invalid_audio", "the file could not be read as audio: %s", err);
}

/* OpenAI's API's temperature: above 0 that one alone; 0, openai-whisper's fallback list
 * and thresholds (docs/whisper.md). t must outlive sp. */
static void speech_openai_temperature(attend_speech_params *sp, const float *t) {
    static const float fallback[] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
    if (*t > 0) {
        sp->temperatures = t, sp->n_temperatures = 1;
        return;
    }
    sp->temperatures = fallback, sp->n_temperatures = 6;
    sp->use_compression_ratio = sp->use_logprob = sp->use_no_speech = 1;
    sp->compression_ratio_threshold = 2.4f, sp->logprob_threshold = -1.0f, sp->no_speech_threshold = 0.6f;
}

/* Transcribe job; its answer or its error filled. */
static void run_job(serve_speech *s, serve_audio_job *job) {
    float *mel = NULL;
    int frames = 0;
    double seconds = 0;
    if (read_upload(s, job, &mel, &frames, &seconds)) return;
    attend_speech_params sp = attend_default_speech_params();
    sp.language = job->language[0] ? job->language : NULL;
    sp.task = job->task;
    sp.timestamps = 1; /* segments with their times, for every format */
    speech_openai_temperature(&sp, &job->temperature);
    sp.word_timestamps = job->words;
    if (seconds <= 30) sp.audio_frames = (int)(seconds * 16000 + 0.5) / 160; /* HF's num_frames */
    attend_params p = attend_default_params();
    p.threads = s->o->common.threads;
    p.num_beams = s->o->common.beams;
    p.want_scores = 1;
    p.stop = &s->stop;
    attend_transcript t;
    char err[512];
    if (attend_transcribe_features(s->m, mel, frames, &sp, &p, &t, err, sizeof err)) {
        if (s->stop) serve_oai_fail(&job->error, 503, NULL, NULL, "the server is stopping; retry");
        else serve_oai_fail(&job->error, 500, NULL, NULL, "the transcription failed: %s", err);
    } else {
        write_answer(s, job, &t, seconds);
        attend_transcript_free(&t);
    }
    free(mel);
}

/* ---------------------------------------------------------------------------------------
 * The queue and the thread */

int serve_speech_submit(serve_speech *s, serve_audio_job *job) {
    job->queued_at = serve_now();
    job->next = NULL;
    pthread_mutex_lock(&s->mu);
    const int full = s->stopping || s->queued >= s->o->max_audio_queue;
    if (!full) {
        if (s->tail) s->tail->next = job;
        else s->head = job;
        s->tail = job;
        s->queued++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return full ? -1 : 0;
}

int serve_speech_pending(serve_speech *s) {
    pthread_mutex_lock(&s->mu);
    const int n = s->queued + s->busy;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* The oldest job, or NULL when stopping (the lock held). */
static serve_audio_job *take(serve_speech *s) {
    while (!s->head && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
    serve_audio_job *job = s->head;
    if (!job) return NULL;
    s->head = job->next;
    if (!s->head) s->tail = NULL;
    job->next = NULL;
    s->queued--;
    return job;
}

static void *speech_main(void *arg) {
    serve_speech *s = arg;
    pthread_mutex_lock(&s->mu);
    for (serve_audio_job *job; (job = take(s));) {
        const int stopping = s->stopping;
        s->busy = 1;
        pthread_mutex_unlock(&s->mu);
        if (stopping) serve_oai_fail(&job->error, 503, NULL, NULL, "the server is stopping; retry");
        else if (serve_now() - job->queued_at > s->o->timeout)
            serve_oai_fail(&job->error, 503, NULL, NULL, "timed out waiting in the queue (see --timeout)");
        else run_job(s, job);
        job->finish(job); /* the job is the HTTP side's from here on */
        pthread_mutex_lock(&s->mu);
        s->busy = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

serve_speech *serve_speech_start(attend_model *m, const serve_options *o, char *err, size_t errlen) {
    serve_speech *s = calloc(1, sizeof *s);
    if (!s) return snprintf(err, errlen, "out of memory"), NULL;
    s->m = m, s->o = o;
    s->timestamp_begin = transcript_timestamp_begin(m);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, speech_main, s)) {
        snprintf(err, errlen, "cannot start the speech worker thread");
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->cv);
        free(s);
        return NULL;
    }
    return s;
}

void serve_speech_stop(serve_speech *s) {
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    s->stop = 1; /* the transcription running stops within a step */
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
}

void serve_speech_free(serve_speech *s) {
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}
