/* API keys and request limits of attend serve (serve.h), as LibreTranslate has them, all off
 * unless asked for: --api-keys FILE (every translation, detect and file request carries a
 * known "api_key": else 403), --req-limit N (requests per client address per minute: else
 * 429 with Retry-After; a key with its own limit is held to that instead), --char-limit N
 * (characters of q per request: else 400).
 *
 * The rate is a token bucket per address, or per key with its own limit: N tokens, refilled
 * continuously at N per minute, one taken per request. A client may send a burst of N, then
 * one every 60/N seconds; there is no minute boundary to send 2N across. A key's bucket lives
 * with the key (the keys are few, from a file); the addresses' table is bounded
 * (SERVE_LIMIT_SUBJECTS): when it is full the bucket used longest ago is dropped (a full one
 * first: dropping it loses nothing), so a flood from many addresses costs a fixed amount of
 * memory and cannot reset a key's bucket. One mutex guards both: the HTTP side may call from
 * several threads. */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define KEY_MAX 256 /* bytes of one key */

#define SUBJECT_MAX 80 /* bytes of an address's name in the table */

/* A token bucket: tokens left at time `at` (seconds, monotonic); per_minute 0 when unused. */
typedef struct {
    double tokens, at;
    int per_minute;
} bucket;

typedef struct {
    char *key;
    int per_minute; /* 0: none of its own (the address limit applies) */
    bucket b;       /* its own: a key's bucket is never dropped (the keys are few, from a file) */
} api_key;

typedef struct {
    char subject[SUBJECT_MAX]; /* the client's address */
    bucket b;
} address;

struct serve_limits {
    api_key *keys;
    int n_keys, keys_on;
    int req_limit, char_limit; /* 0: none */
    pthread_mutex_t mu;
    address *buckets;
    int n_buckets, cap;
};

/* ---------------------------------------------------------------------------------------
 * The keys file */

/* One line of the keys file into l (blank and # lines skipped). 0, or -1 with err. */
static int read_key_line(serve_limits *l, char *line, const char *path, int lineno, char *err, size_t errlen) {
    char *hash = strchr(line, '#');
    if (hash) *hash = 0;
    char *save = NULL, *key = strtok_r(line, " \t\r\n", &save), *limit = strtok_r(NULL, " \t\r\n", &save);
    if (!key) return 0;
    if (strtok_r(NULL, " \t\r\n", &save))
        return snprintf(err, errlen, "--api-keys %s:%d: more than a key and a limit on the line", path, lineno), -1;
    if (strlen(key) >= KEY_MAX)
        return snprintf(err, errlen, "--api-keys %s:%d: the key is longer than %d bytes", path, lineno, KEY_MAX - 1),
               -1;
    long n = 0;
    if (limit) {
        char *end = NULL;
        errno = 0;
        n = strtol(limit, &end, 10);
        if (errno || *end || end == limit || n < 1 || n > 1000000)
            return snprintf(err, errlen, "--api-keys %s:%d: \"%s\" is not a request limit (an integer from 1 to "
                                         "1000000 per minute)", path, lineno, limit), -1;
    }
    for (int i = 0; i < l->n_keys; i++)
        if (!strcmp(l->keys[i].key, key))
            return snprintf(err, errlen, "--api-keys %s:%d: the key is given twice", path, lineno), -1;
    api_key *grown = realloc(l->keys, sizeof *grown * (size_t)(l->n_keys + 1));
    if (!grown) return snprintf(err, errlen, "out of memory"), -1;
    l->keys = grown;
    memset(&l->keys[l->n_keys], 0, sizeof l->keys[0]);
    if (!(l->keys[l->n_keys].key = strdup(key))) return snprintf(err, errlen, "out of memory"), -1;
    l->keys[l->n_keys++].per_minute = (int)n;
    return 0;
}

/* Read --api-keys FILE. 0, or -1 with err naming the line. */
static int read_keys(serve_limits *l, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return snprintf(err, errlen, "--api-keys %s: %s", path, strerror(errno)), -1;
    char line[1024];
    int lineno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f))
            rc = (snprintf(err, errlen, "--api-keys %s:%d: the line is longer than %zu bytes", path, lineno,
                           sizeof line - 2), -1);
        else
            rc = read_key_line(l, line, path, lineno, err, errlen);
    }
    if (!rc && ferror(f)) rc = (snprintf(err, errlen, "--api-keys %s: cannot be read", path), -1);
    if (!rc && !l->n_keys) rc = (snprintf(err, errlen, "--api-keys %s: no key in the file", path), -1);
    fclose(f);
    return rc;
}

serve_limits *serve_limits_new(const char *keys_path, int req_limit, int char_limit, int cap, char *err,
                               size_t errlen) {
    serve_limits *l = calloc(1, sizeof *l);
    if (!l) return snprintf(err, errlen, "out of memory"), NULL;
    l->req_limit = req_limit > 0 ? req_limit : 0;
    l->char_limit = char_limit > 0 ? char_limit : 0;
    l->cap = cap > 0 ? cap : SERVE_LIMIT_SUBJECTS;
    pthread_mutex_init(&l->mu, NULL);
    l->keys_on = keys_path != NULL;
    l->buckets = calloc((size_t)l->cap, sizeof *l->buckets);
    if (!l->buckets) snprintf(err, errlen, "out of memory");
    if (!l->buckets || (keys_path && read_keys(l, keys_path, err, errlen))) {
        serve_limits_free(l);
        return NULL;
    }
    return l;
}

void serve_limits_free(serve_limits *l) {
    if (!l) return;
    for (int i = 0; i < l->n_keys; i++) free(l->keys[i].key);
    free(l->keys);
    free(l->buckets);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* ---------------------------------------------------------------------------------------
 * Token buckets */

/* b's tokens at time now. */
static double tokens_now(const bucket *b, double now) {
    const double t = b->tokens + (now - b->at) * b->per_minute / 60.0;
    return t < b->per_minute ? t : b->per_minute;
}

/* Take a token from b (per_minute a minute; a new or changed bucket starts full). 0, or -1
 * with *retry_after: whole seconds until the next token (at least 1). Under l->mu. */
static int take(bucket *b, int per_minute, double now, int *retry_after) {
    if (b->per_minute != per_minute) b->per_minute = per_minute, b->tokens = per_minute, b->at = now;
    b->tokens = tokens_now(b, now), b->at = now;
    if (b->tokens >= 1.0) return b->tokens -= 1.0, 0;
    *retry_after = (int)ceil((1.0 - b->tokens) * 60.0 / per_minute - 1e-9);
    if (*retry_after < 1) *retry_after = 1;
    return -1;
}

/* The slot for subject: its own, else a free one, else the one to drop (a full one first:
 * dropping it loses nothing; else the one used longest ago). Never NULL (cap >= 1). */
static address *find_address(serve_limits *l, const char *subject, double now) {
    address *victim = NULL;
    int victim_full = 0;
    for (int i = 0; i < l->n_buckets; i++) {
        address *a = &l->buckets[i];
        if (!strcmp(a->subject, subject)) return a;
        const int full = tokens_now(&a->b, now) >= a->b.per_minute;
        if (!victim || (full && !victim_full) || (full == victim_full && a->b.at < victim->b.at))
            victim = a, victim_full = full;
    }
    address *a = l->n_buckets < l->cap ? &l->buckets[l->n_buckets++] : victim;
    memset(a, 0, sizeof *a);
    snprintf(a->subject, sizeof a->subject, "%s", subject);
    return a;
}

int serve_limits_take(serve_limits *l, const char *subject, int per_minute, double now, int *retry_after) {
    *retry_after = 0;
    if (per_minute <= 0) return 0;
    pthread_mutex_lock(&l->mu);
    const int rc = take(&find_address(l, subject, now)->b, per_minute, now, retry_after);
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int serve_limits_subjects(serve_limits *l) {
    pthread_mutex_lock(&l->mu);
    const int n = l->n_buckets;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* ---------------------------------------------------------------------------------------
 * The check on a request */

/* Unicode code points of a UTF-8 string (continuation bytes not counted). */
static long long code_points(const char *s) {
    long long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Characters of q (a string, or the strings of a list). */
static long long q_chars(const cJSON *root) {
    const cJSON *q = cJSON_GetObjectItemCaseSensitive(root, "q"), *e;
    if (cJSON_IsString(q)) return code_points(q->valuestring);
    long long n = 0;
    if (cJSON_IsArray(q)) cJSON_ArrayForEach(e, q) if (cJSON_IsString(e)) n += code_points(e->valuestring);
    return n;
}

static api_key *find_key(serve_limits *l, const char *key) {
    for (int i = 0; i < l->n_keys; i++)
        if (!strcmp(l->keys[i].key, key)) return &l->keys[i];
    return NULL;
}

/* The key and the rate: 0, 403 or 429 (with *retry_after). */
static int check_rate(serve_limits *l, const char *client, const cJSON *root, int *retry_after, char *err,
                      size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "api_key");
    const char *given = cJSON_IsString(v) && *v->valuestring ? v->valuestring : NULL;
    api_key *key = given ? find_key(l, given) : NULL;
    if (l->keys_on && !given)
        return snprintf(err, errlen, "Invalid API key: this server asks for an \"api_key\" with every request"), 403;
    if (l->keys_on && !key) return snprintf(err, errlen, "Invalid API key"), 403;
    const int own = key && key->per_minute, limit = own ? key->per_minute : l->req_limit;
    int rc = 0;
    if (own) {
        pthread_mutex_lock(&l->mu);
        rc = take(&key->b, limit, serve_now(), retry_after);
        pthread_mutex_unlock(&l->mu);
    } else {
        rc = serve_limits_take(l, client, limit, serve_now(), retry_after);
    }
    if (!rc) return 0;
    snprintf(err, errlen, "Slowdown: %d per 1 minute%s (retry in %d s)", limit,
             own ? " for this API key" : "", *retry_after);
    return 429;
}

/* No key, rate or size limit is on: the gate reads nothing. */
static int limits_off(const serve_limits *l) {
    return !l || (!l->keys_on && !l->req_limit && !l->char_limit);
}

int serve_limits_check_json(serve_limits *l, const char *client, const cJSON *root, int *retry_after, char *err,
                            size_t errlen) {
    *retry_after = 0;
    if (limits_off(l)) return 0;
    if (!cJSON_IsObject(root)) return snprintf(err, errlen, "the body must be a JSON object"), 400;
    int rc = check_rate(l, client, root, retry_after, err, errlen);
    const long long chars = rc ? 0 : q_chars(root);
    if (!rc && l->char_limit && chars > l->char_limit) {
        snprintf(err, errlen, "Invalid request: request (%lld) exceeds text limit (%d)", chars, l->char_limit);
        rc = 400;
    }
    return rc;
}

int serve_limits_check(serve_limits *l, const char *client, const char *body, size_t len, int *retry_after,
                       char *err, size_t errlen) {
    *retry_after = 0;
    if (limits_off(l)) return 0;
    cJSON *root = cJSON_ParseWithLength(body, len);
    const int rc = serve_limits_check_json(l, client, root, retry_after, err, errlen);
    cJSON_Delete(root);
    return rc;
}
