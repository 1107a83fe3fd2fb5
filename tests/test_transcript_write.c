/* Tests of cli/transcript_write.c: SubRip and WebVTT timestamps (rounding, hours past 99,
 * negative and NaN times), cues of exact bytes (blank segments left out, line breaks and
 * "-->" in the text, WebVTT's entities, invalid UTF-8), plain text, and JSON that Python's
 * json module reads back with every field.
 * Run: build/tests/test_transcript_write (the JSON check runs /usr/bin/python3). */
#include "../cli/transcript_write.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* What transcript_write writes for t in format. malloc'd. */
static char *written(const attend_transcript *t, int format, const char *file, const char *task) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    transcript_options o = {format, file, task};
    transcript_write(f, t, &o);
    fclose(f);
    return buf;
}

static void test_timestamps(void) {
    static const struct {
        double s;
        char sep;
        const char *want;
    } cases[] = {
        {0, ',', "00:00:00,000"},          {1.5, ',', "00:00:01,500"},       {59.9994, '.', "00:00:59.999"},
        {3599.9995, ',', "01:00:00,000"},  {3723.04, '.', "01:02:03.040"},    {0.0005, ',', "00:00:00,001"},
        {360000, ',', "100:00:00,000"},    {-3, ',', "00:00:00,000"},         {NAN, '.', "00:00:00.000"},
        {86399.999, '.', "23:59:59.999"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[32];
        transcript_timestamp(out, sizeof out, cases[i].s, cases[i].sep);
        CHECKF(!strcmp(out, cases[i].want), "%g: '%s', want '%s'", cases[i].s, out, cases[i].want);
    }
    CHECK(transcript_format("srt") == TRANSCRIPT_SRT && transcript_format("vtt") == TRANSCRIPT_VTT);
    CHECK(transcript_format("txt") == TRANSCRIPT_TXT && transcript_format("json") == TRANSCRIPT_JSON);
    CHECK(transcript_format("SRT") == -1 && transcript_format(NULL) == -1);
}

static int ids0[] = {50365, 440, 2068, 50415}, ids2[] = {50415, 11, 50465};

/* Three segments: plain text, a blank one, one with a line break, an arrow, markup and a
 * stray byte; two words. */
static attend_transcript sample(attend_segment *s, attend_word *w) {
    s[0] = (attend_segment){0.0, 1.5, " The cat & the <hat>.", ids0, 4, -0.25f, 0, 2};
    s[1] = (attend_segment){1.5, 2.0, "   ", NULL, 0, NAN, 2, 0};
    s[2] = (attend_segment){2.0, 3723.04, " Line one\nline two --> \xff end. ", ids2, 3, -1.5f, 2, 0};
    w[0] = (attend_word){0.0, 0.52, " The", 0.875f};
    w[1] = (attend_word){0.52, 1.0, " cat", 0.5f};
    return (attend_transcript){" The cat & the <hat>. Line one\nline two", "en", 3723.5, 3, s, 2, w};
}

static void test_cues(void) {
    attend_segment s[3];
    attend_word w[2];
    attend_transcript t = sample(s, w);
    char *srt = written(&t, TRANSCRIPT_SRT, NULL, NULL);
    const char *want_srt = "1\n00:00:00,000 --> 00:00:01,500\nThe cat & the <hat>.\n\n"
                           "2\n00:00:02,000 --> 01:02:03,040\nLine one line two -> \xef\xbf\xbd end.\n\n";
    CHECKF(!strcmp(srt, want_srt), "srt:\n%s", srt);
    char *vtt = written(&t, TRANSCRIPT_VTT, NULL, NULL);
    const char *want_vtt = "WEBVTT\n\n00:00:00.000 --> 00:00:01.500\nThe cat &amp; the &lt;hat&gt;.\n\n"
                           "00:00:02.000 --> 01:02:03.040\nLine one line two --&gt; \xef\xbf\xbd end.\n\n";
    CHECKF(!strcmp(vtt, want_vtt), "vtt:\n%s", vtt);
    char *txt = written(&t, TRANSCRIPT_TXT, NULL, NULL);
    CHECKF(!strcmp(txt, "The cat & the <hat>. Line one line two\n"), "txt: '%s'", txt);
    free(srt), free(vtt), free(txt);
    attend_transcript empty = {NULL, NULL, 0, 0, NULL, 0, NULL};
    srt = written(&empty, TRANSCRIPT_SRT, NULL, NULL);
    vtt = written(&empty, TRANSCRIPT_VTT, NULL, NULL);
    txt = written(&empty, TRANSCRIPT_TXT, NULL, NULL);
    CHECK(!strcmp(srt, "") && !strcmp(vtt, "WEBVTT\n\n") && !strcmp(txt, "\n"));
    free(srt), free(vtt), free(txt);
}

/* Python reads the JSON back: every field with its value. */
static void test_json(void) {
    attend_segment s[3];
    attend_word w[2];
    attend_transcript t = sample(s, w);
    char *json = written(&t, TRANSCRIPT_JSON, "talk.wav", "transcribe");
    FILE *py = popen("/usr/bin/python3 -c \"import json, sys\n"
                     "d = json.load(sys.stdin)\n"
                     "assert d['file'] == 'talk.wav' and d['task'] == 'transcribe' and d['language'] == 'en', d\n"
                     "assert d['duration'] == 3723.5 and d['text'] == 'The cat & the <hat>. Line one\\nline two'\n"
                     "s = d['segments']\n"
                     "assert [x['id'] for x in s] == [0, 1, 2] and s[0]['text'] == ' The cat & the <hat>.'\n"
                     "assert s[0]['tokens'] == [50365, 440, 2068, 50415] and s[0]['avg_logprob'] == -0.25\n"
                     "assert s[1]['avg_logprob'] is None and s[1]['tokens'] == [] and s[1]['end'] == 2.0\n"
                     "assert s[2]['text'] == ' Line one\\nline two --> \\ufffd end. ' and s[2]['end'] == 3723.04\n"
                     "assert d['words'] == [{'word': 'The', 'start': 0.0, 'end': 0.52, 'probability': 0.875},\n"
                     "                      {'word': 'cat', 'start': 0.52, 'end': 1.0, 'probability': 0.5}], d\n"
                     "\"",
                     "w");
    fputs(json, py);
    CHECKF(pclose(py) == 0, "Python did not read back:\n%s", json);
    free(json);
    t.n_words = 0, t.language = NULL;
    json = written(&t, TRANSCRIPT_JSON, NULL, NULL);
    CHECKF(!strstr(json, "\"words\"") && !strstr(json, "\"file\"") && strstr(json, "\"language\": null"), "%s",
           json);
    free(json);
}

int main(void) {
    test_timestamps();
    test_cues();
    test_json();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
