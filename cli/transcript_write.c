/* Transcripts as text, OpenAI's JSON shapes, SubRip and WebVTT (transcript_write.h). */
#include "transcript_write.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "json.h"

const char *const TRANSCRIPT_FORMATS[] = {"text", "json", "verbose_json", "srt", "vtt", NULL};

#define SECONDS_PER_TOKEN 0.02 /* a timestamp token's step */

transcript_write_options transcript_default_write_options(void) {
    transcript_write_options o = {.task = "transcribe", .timestamp_begin = -1};
    return o;
}

int transcript_timestamp_begin(const attend_model *m) {
    return attend_piece_to_id(m, ATTEND_TARGET, "<|0.00|>", 8);
}

/* ---------------------------------------------------------------------------------------
 * Language names: Whisper's own (openai-whisper's tokenizer), which verbose_json answers */

static const char *const LANGUAGES[][2] = {
    {"en", "english"},    {"zh", "chinese"},     {"de", "german"},     {"es", "spanish"},     {"ru", "russian"},
    {"ko", "korean"},     {"fr", "french"},      {"ja", "japanese"},   {"pt", "portuguese"},  {"tr", "turkish"},
    {"pl", "polish"},     {"ca", "catalan"},     {"nl", "dutch"},      {"ar", "arabic"},      {"sv", "swedish"},
    {"it", "italian"},    {"id", "indonesian"},  {"hi", "hindi"},      {"fi", "finnish"},     {"vi", "vietnamese"},
    {"he", "hebrew"},     {"uk", "ukrainian"},   {"el", "greek"},      {"ms", "malay"},       {"cs", "czech"},
    {"ro", "romanian"},   {"da", "danish"},      {"hu", "hungarian"},  {"ta", "tamil"},       {"no", "norwegian"},
    {"th", "thai"},       {"ur", "urdu"},        {"hr", "croatian"},   {"bg", "bulgarian"},   {"lt", "lithuanian"},
    {"la", "latin"},      {"mi", "maori"},       {"ml", "malayalam"},  {"cy", "welsh"},       {"sk", "slovak"},
    {"te", "telugu"},     {"fa", "persian"},     {"lv", "latvian"},    {"bn", "bengali"},     {"sr", "serbian"},
    {"az", "azerbaijani"}, {"sl", "slovenian"},  {"kn", "kannada"},    {"et", "estonian"},    {"mk", "macedonian"},
    {"br", "breton"},     {"eu", "basque"},      {"is", "icelandic"},  {"hy", "armenian"},    {"ne", "nepali"},
    {"mn", "mongolian"},  {"bs", "bosnian"},     {"kk", "kazakh"},     {"sq", "albanian"},    {"sw", "swahili"},
    {"gl", "galician"},   {"mr", "marathi"},     {"pa", "punjabi"},    {"si", "sinhala"},     {"km", "khmer"},
    {"sn", "shona"},      {"yo", "yoruba"},      {"so", "somali"},     {"af", "afrikaans"},   {"oc", "occitan"},
    {"ka", "georgian"},   {"be", "belarusian"},  {"tg", "tajik"},      {"sd", "sindhi"},      {"gu", "gujarati"},
    {"am", "amharic"},    {"yi", "yiddish"},     {"lo", "lao"},        {"uz", "uzbek"},       {"fo", "faroese"},
    {"ht", "haitian creole"}, {"ps", "pashto"},  {"tk", "turkmen"},    {"nn", "nynorsk"},     {"mt", "maltese"},
    {"sa", "sanskrit"},   {"lb", "luxembourgish"}, {"my", "myanmar"},  {"bo", "tibetan"},     {"tl", "tagalog"},
    {"mg", "malagasy"},   {"as", "assamese"},    {"tt", "tatar"},      {"haw", "hawaiian"},   {"ln", "lingala"},
    {"ha", "hausa"},      {"ba", "bashkir"},     {"jw", "javanese"},   {"su", "sundanese"},   {"yue", "cantonese"},
};
#define N_LANGUAGES (sizeof LANGUAGES / sizeof LANGUAGES[0])

const char *transcript_language_name(const char *code) {
    for (size_t i = 0; code && i < N_LANGUAGES; i++)
        if (!strcmp(LANGUAGES[i][0], code)) return LANGUAGES[i][1];
    return code ? code : "";
}

const char *transcript_language_code(const char *name) {
    for (size_t i = 0; name && i < N_LANGUAGES; i++)
        if (!strcasecmp(LANGUAGES[i][0], name) || !strcasecmp(LANGUAGES[i][1], name)) return LANGUAGES[i][0];
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * Text and OpenAI's JSON */

/* The text without the leading space of its first word (and without leading spaces at all). */
static const char *trimmed(const char *s) {
    while (s && (*s == ' ' || *s == '\t')) s++;
    return s ? s : "";
}

/* s on one line: newlines and carriage returns as spaces. */
static void put_one_line(FILE *f, const char *s) {
    for (; *s; s++) fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
}

/* Where segment i's window started, in 10 ms frames (openai-whisper's "seek"): its start
 * less the offset its first timestamp token gives; without one, its start. */
static long segment_seek(const attend_segment *s, int tb) {
    double at = s->start;
    if (tb >= 0 && s->n_ids > 0 && s->ids[0] >= tb) at -= (s->ids[0] - tb) * SECONDS_PER_TOKEN;
    return at > 0 ? lround(at * 100) : 0;
}

static void write_segment(FILE *f, const attend_transcript *t, int i, const transcript_write_options *o) {
    const attend_segment *s = &t->segments[i];
    fprintf(f, "%s{\"id\":%d,\"seek\":%ld,\"start\":%.2f,\"end\":%.2f,\"text\":", i ? "," : "", i,
            segment_seek(s, o->timestamp_begin), s->start, s->end);
    json_str(f, s->text ? s->text : "");
    fputs(",\"tokens\":[", f);
    for (int k = 0; k < s->n_ids; k++) fprintf(f, "%s%d", k ? "," : "", s->ids[k]);
    fprintf(f, "],\"temperature\":%g,\"avg_logprob\":%.6g,\"compression_ratio\":%.6g,\"no_speech_prob\":%.6g}",
            (double)s->temperature, (double)s->avg_logprob, (double)s->compression_ratio, (double)s->no_speech_prob);
}

static void write_words(FILE *f, const attend_transcript *t) {
    fputs(",\"words\":[", f);
    for (int i = 0; i < t->n_words; i++) {
        const attend_word *w = &t->words[i];
        fputs(i ? ",{\"word\":" : "{\"word\":", f);
        json_str(f, trimmed(w->word));
        fprintf(f, ",\"start\":%.2f,\"end\":%.2f}", w->start, w->end);
    }
    fputc(']', f);
}

static void write_verbose(FILE *f, const attend_transcript *t, const transcript_write_options *o) {
    fputs("{\"task\":", f);
    json_str(f, o->task ? o->task : "transcribe");
    fputs(",\"language\":", f);
    json_str(f, transcript_language_name(t->language));
    fprintf(f, ",\"duration\":%.3f,\"text\":", o->duration > 0 ? o->duration : t->duration);
    json_str(f, trimmed(t->text));
    fputs(",\"segments\":[", f);
    for (int i = 0; i < t->n_segments; i++) write_segment(f, t, i, o);
    fputc(']', f);
    if (o->words) write_words(f, t);
    fputs("}\n", f);
}

/* ---------------------------------------------------------------------------------------
 * Subtitles */

/* HH:MM:SS followed by sep and milliseconds. */
static void put_time(FILE *f, double seconds, char sep) {
    long long ms = llround((seconds > 0 ? seconds : 0) * 1000.0);
    fprintf(f, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

/* A cue's text: stripped of surrounding white space, one line, "-->" written "->" (a cue
 * cannot hold its own arrow). */
static void put_cue_text(FILE *f, const char *text) {
    const char *s = trimmed(text);
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == '\t')) n--;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && !memcmp(s + i, "-->", 3)) {
            fputs("->", f);
            i += 2;
        } else {
            fputc(s[i] == '\n' || s[i] == '\r' ? ' ' : s[i], f);
        }
    }
}

static void write_subtitles(FILE *f, const attend_transcript *t, int vtt) {
    if (vtt) fputs("WEBVTT\n\n", f);
    for (int i = 0; i < t->n_segments; i++) {
        const attend_segment *s = &t->segments[i];
        if (!vtt) fprintf(f, "%d\n", i + 1);
        put_time(f, s->start, vtt ? '.' : ',');
        fputs(" --> ", f);
        put_time(f, s->end, vtt ? '.' : ',');
        fputc('\n', f);
        put_cue_text(f, s->text ? s->text : "");
        fputs("\n\n", f);
    }
}

int transcript_write(FILE *f, const attend_transcript *t, const char *format, const transcript_write_options *o) {
    const transcript_write_options dflt = transcript_default_write_options();
    if (!o) o = &dflt;
    if (!strcmp(format, "text")) {
        put_one_line(f, trimmed(t->text));
        fputc('\n', f);
    } else if (!strcmp(format, "json")) {
        fputs("{\"text\":", f);
        json_str(f, trimmed(t->text));
        fputs("}\n", f);
    } else if (!strcmp(format, "verbose_json")) {
        write_verbose(f, t, o);
    } else if (!strcmp(format, "srt") || !strcmp(format, "vtt")) {
        write_subtitles(f, t, !strcmp(format, "vtt"));
    } else {
        return -1;
    }
    return 0;
}
