/* transcript_write: transcripts as txt, SubRip, WebVTT or verbose JSON (transcript_write.h). */
#include "transcript_write.h"

#include <math.h>
#include <string.h>

#include "json.h"

int transcript_format(const char *name) {
    static const char *const names[] = {"txt", "srt", "vtt", "json"};
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

void transcript_timestamp(char *out, size_t n, double seconds, char sep) {
    const long long ms = seconds > 0 && isfinite(seconds) ? llround(seconds * 1000.0) : 0;
    snprintf(out, n, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

/* ---------------------------------------------------------------------------------------
 * Cue text */

enum { CUE_SRT, CUE_VTT };

/* s[0..n) written for a cue: invalid UTF-8 as U+FFFD, line breaks as spaces; srt: "-->"
 * as "->"; vtt: &, <, > as entities. */
static void write_cue_text(FILE *f, const char *s, size_t n, int kind) {
    const unsigned char *p = (const unsigned char *)s, *e = p + n;
    while (p < e) {
        if (kind == CUE_SRT && e - p >= 3 && !memcmp(p, "-->", 3)) {
            fputs("->", f);
            p += 3;
        } else if (*p == '\n' || *p == '\r') {
            fputc(' ', f), p++;
        } else if (kind == CUE_VTT && (*p == '&' || *p == '<' || *p == '>')) {
            fputs(*p == '&' ? "&amp;" : *p == '<' ? "&lt;" : "&gt;", f), p++;
        } else {
            const int k = json_utf8_len(p);
            if (k == 0 || p + k > e) fputs("\xef\xbf\xbd", f), p++;
            else fwrite(p, 1, (size_t)k, f), p += k;
        }
    }
}

static int is_blank(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* The cues of t's segments (those with text), numbered from 1 for srt. */
static void write_cues(FILE *f, const attend_transcript *t, int kind) {
    const char sep = kind == CUE_SRT ? ',' : '.';
    if (kind == CUE_VTT) fputs("WEBVTT\n\n", f);
    for (int i = 0, cue = 0; i < t->n_segments; i++) {
        const attend_segment *s = &t->segments[i];
        const char *text = s->text ? s->text : "";
        size_t lo = 0, hi = strlen(text);
        while (lo < hi && is_blank((unsigned char)text[lo])) lo++;
        while (hi > lo && is_blank((unsigned char)text[hi - 1])) hi--;
        if (lo == hi) continue; /* no text, no cue */
        char a[32], b[32];
        transcript_timestamp(a, sizeof a, s->start, sep);
        transcript_timestamp(b, sizeof b, s->end, sep);
        if (kind == CUE_SRT) fprintf(f, "%d\n", ++cue);
        fprintf(f, "%s --> %s\n", a, b);
        write_cue_text(f, text + lo, hi - lo, kind);
        fputs("\n\n", f);
    }
}

/* ---------------------------------------------------------------------------------------
 * Plain text and JSON */

static const char *skip_spaces(const char *s) {
    while (s && *s == ' ') s++;
    return s ? s : "";
}

static void write_text(FILE *f, const attend_transcript *t) {
    const char *s = skip_spaces(t->text);
    write_cue_text(f, s, strlen(s), -1); /* line breaks as spaces, valid UTF-8 */
    fputc('\n', f);
}

static void json_number(FILE *f, double x, const char *format) {
    if (isfinite(x)) fprintf(f, format, x);
    else fputs("null", f);
}

static void write_json_segment(FILE *f, const attend_segment *s, int id) {
    fprintf(f, "%s{\"id\": %d, \"start\": ", id ? ", " : "", id);
    json_number(f, s->start, "%.3f");
    fputs(", \"end\": ", f);
    json_number(f, s->end, "%.3f");
    fputs(", \"text\": ", f);
    json_str(f, s->text ? s->text : "");
    fputs(", \"tokens\": [", f);
    for (int k = 0; k < s->n_ids; k++) fprintf(f, "%s%d", k ? ", " : "", s->ids[k]);
    fputs("], \"avg_logprob\": ", f);
    json_number(f, s->avg_logprob, "%.6g");
    fputc('}', f);
}

static void write_json_words(FILE *f, const attend_transcript *t) {
    fputs(", \"words\": [", f);
    for (int i = 0; i < t->n_words; i++) {
        const attend_word *w = &t->words[i];
        fputs(i ? ", {\"word\": " : "{\"word\": ", f);
        json_str(f, skip_spaces(w->word));
        fputs(", \"start\": ", f);
        json_number(f, w->start, "%.3f");
        fputs(", \"end\": ", f);
        json_number(f, w->end, "%.3f");
        fputs(", \"probability\": ", f);
        json_number(f, w->probability, "%.4f");
        fputc('}', f);
    }
    fputc(']', f);
}

static void write_json(FILE *f, const attend_transcript *t, const transcript_options *o) {
    fputc('{', f);
    if (o->file) fputs("\"file\": ", f), json_str(f, o->file), fputs(", ", f);
    if (o->task) fputs("\"task\": ", f), json_str(f, o->task), fputs(", ", f);
    fputs("\"language\": ", f);
    if (t->language) json_str(f, t->language);
    else fputs("null", f);
    fputs(", \"duration\": ", f);
    json_number(f, t->duration, "%.3f");
    fputs(", \"text\": ", f);
    json_str(f, skip_spaces(t->text));
    fputs(", \"segments\": [", f);
    for (int i = 0; i < t->n_segments; i++) write_json_segment(f, &t->segments[i], i);
    fputc(']', f);
    if (t->n_words > 0) write_json_words(f, t);
    fputs("}\n", f);
}

void transcript_write(FILE *f, const attend_transcript *t, const transcript_options *o) {
    switch (o->format) {
    case TRANSCRIPT_SRT: write_cues(f, t, CUE_SRT); break;
    case TRANSCRIPT_VTT: write_cues(f, t, CUE_VTT); break;
    case TRANSCRIPT_JSON: write_json(f, t, o); break;
    default: write_text(f, t); break;
    }
}
