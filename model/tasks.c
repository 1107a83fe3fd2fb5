/* Task prefixes (T5's config.task_specific_params, recorded as <family>.tasks and
 * <family>.task_prefixes): the text a named task writes before each source, e.g.
 * translation_en_to_de -> "translate English to German: ". Optional keys; checked at load. */
#include "load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_TASKS = 256, MAX_NAME = 64, MAX_PREFIX = 1024 };

/* Element i of string array kv as a NUL-terminated copy, refused when empty (names only),
 * longer than max or holding NUL bytes, control bytes or (names) spaces. */
static char *task_string(const gguf_kv *kv, const char *key, uint64_t i, int name, int max, char *err,
                         size_t errlen) {
    const gguf_str s = kv->strings[i];
    int bad = s.len > (uint64_t)max || (name && s.len == 0) || memchr(s.ptr, 0, s.len) != NULL;
    for (uint64_t k = 0; name && !bad && k < s.len; k++) bad = (unsigned char)s.ptr[k] <= ' ';
    if (bad) {
        char b[48];
        s2s_fail(err, errlen, "key %s: entry %llu '%s' is %s", key, (unsigned long long)i,
                 s2s_shown(b, sizeof b, s),
                 name ? "empty, longer than 64 bytes or holds spaces or control bytes"
                      : "longer than 1024 bytes or holds a NUL byte");
        return NULL;
    }
    char *out = strndup(s.ptr, s.len);
    if (!out) s2s_fail(err, errlen, "out of memory");
    return out;
}

int s2s_tasks_load(s2s_model *m, char *err, size_t errlen) {
    char nk[80], pk[80];
    snprintf(nk, sizeof nk, "%s.tasks", m->c.family->name);
    snprintf(pk, sizeof pk, "%s.task_prefixes", m->c.family->name);
    const int has_n = gguf_find_kv(m->file, nk) != NULL, has_p = gguf_find_kv(m->file, pk) != NULL;
    if (!has_n && !has_p) return 0;
    const gguf_kv *names = gguf_get_array(m->file, nk, GGUF_STRING, err, errlen);
    const gguf_kv *prefixes = names ? gguf_get_array(m->file, pk, GGUF_STRING, err, errlen) : NULL;
    if (!prefixes) return -1;
    if (names->count != prefixes->count || names->count > MAX_TASKS) {
        s2s_fail(err, errlen, "key %s: %llu tasks for %llu prefixes (at most %d)", nk,
                 (unsigned long long)names->count, (unsigned long long)prefixes->count, MAX_TASKS);
        return -1;
    }
    const int n = (int)names->count;
    m->task_name = calloc((size_t)n + 1, sizeof(char *));
    m->task_prefix = calloc((size_t)n + 1, sizeof(char *));
    if (!m->task_name || !m->task_prefix) {
        s2s_fail(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++, m->n_tasks++) {
        if (!(m->task_name[i] = task_string(names, nk, (uint64_t)i, 1, MAX_NAME, err, errlen))) return -1;
        if (!(m->task_prefix[i] = task_string(prefixes, pk, (uint64_t)i, 0, MAX_PREFIX, err, errlen))) {
            free(m->task_name[i]);
            m->task_name[i] = NULL;
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (!strcmp(m->task_name[j], m->task_name[i])) {
                s2s_fail(err, errlen, "key %s: task '%s' appears twice", nk, m->task_name[i]);
                m->n_tasks++;
                return -1;
            }
    }
    return 0;
}

const char *s2s_task_prefix(const s2s_model *m, const char *name) {
    for (int i = 0; i < m->n_tasks; i++)
        if (!strcmp(m->task_name[i], name)) return m->task_prefix[i];
    return NULL;
}

void s2s_tasks_free(s2s_model *m) {
    for (int i = 0; i < m->n_tasks; i++) {
        free(m->task_name[i]);
        free(m->task_prefix[i]);
    }
    free(m->task_name);
    free(m->task_prefix);
}
