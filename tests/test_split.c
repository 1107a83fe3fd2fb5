/* Tests of text/sentences.c and text/clauses.c: a table of German, English and other lines
 * with the sentences they must give (what must split, and the many things that must not),
 * then the clause splitter with a byte-length fits(), then invalid UTF-8 and sizes that
 * would show quadratic time.
 * Run: build/tests/test_split (prints "N passed, 0 failed"; exit status 1 on failure). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../text/sentences.h"

#include "check.h"

/* ---------------------------------------------------------------------------------------
 * the table: language, line, the sentences (at most 8, NULL after the last) */

typedef struct {
    const char *lang, *text;
    const char *want[8];
} split_case;

static const split_case german[] = {
    {"de", "Er kam am 3. Oktober. Dann ging er.", {"Er kam am 3. Oktober.", "Dann ging er."}},
    {"de", "Hallo Welt. Wie geht es dir?", {"Hallo Welt.", "Wie geht es dir?"}},
    /* a name with a small first letter and a capital inside starts a sentence */
    {"de", "Ich musste mich verabschieden. eBay gibt ein Datum an.", {"Ich musste mich verabschieden.", "eBay gibt ein Datum an."}},
    {"en", "I bought it. iPhones are expensive.", {"I bought it.", "iPhones are expensive."}},
    {"en", "He stopped. then he went on.", {"He stopped. then he went on."}},
    {"de", "Das ist gut! Wirklich.", {"Das ist gut!", "Wirklich."}},
    {"de", "Wer bist du? Ich bin es.", {"Wer bist du?", "Ich bin es."}},
    {"de", "Das ist z. B. ein Test.", {"Das ist z. B. ein Test."}},
    {"de", "Das ist z.B. ein Test.", {"Das ist z.B. ein Test."}},
    {"de", "Das heißt, d. h. Kunst ist schwer.", {"Das heißt, d. h. Kunst ist schwer."}},
    {"de", "Er traf u. a. Merkel und Scholz.", {"Er traf u. a. Merkel und Scholz."}},
    {"de", "Äpfel, Birnen usw. sind Obst.", {"Äpfel, Birnen usw. sind Obst."}},
    {"de", "Er hat bzw. sie hat Recht.", {"Er hat bzw. sie hat Recht."}},
    {"de", "Er wohnt bzw. Sie wohnen hier.", {"Er wohnt bzw. Sie wohnen hier."}},
    {"de", "Es kamen ca. 500 Leute.", {"Es kamen ca. 500 Leute."}},
    {"de", "Dr. Müller ist da.", {"Dr. Müller ist da."}},
    {"de", "Prof. Dr. Schmidt lehrt hier.", {"Prof. Dr. Schmidt lehrt hier."}},
    {"de", "Er wohnt in der Goethestr. 5 in Berlin.", {"Er wohnt in der Goethestr. 5 in Berlin."}},
    {"de", "Er wohnt in der Hauptstr. Das Haus ist alt.", {"Er wohnt in der Hauptstr.", "Das Haus ist alt."}},
    {"de", "Siehe Nr. 5 der Liste.", {"Siehe Nr. 5 der Liste."}},
    {"de", "Vgl. Kapitel drei.", {"Vgl. Kapitel drei."}},
    {"de", "Das steht dort (vgl. Kap. 3).", {"Das steht dort (vgl. Kap. 3)."}},
    {"de", "Er kommt evtl. Morgen früh.", {"Er kommt evtl. Morgen früh."}},
    {"de", "Im 19. Jh. Gab es viele Kriege.", {"Im 19. Jh. Gab es viele Kriege."}},
    {"de", "Im 19. Jahrhundert war das so.", {"Im 19. Jahrhundert war das so."}},
    {"de", "Der 1. FC Köln hat gewonnen.", {"Der 1. FC Köln hat gewonnen."}},
    {"de", "Sie spielen in der 3. Liga.", {"Sie spielen in der 3. Liga."}},
    {"de", "Am 24. Dezember ist Weihnachten.", {"Am 24. Dezember ist Weihnachten."}},
    {"de", "Er wurde 1999 geboren. Er lebt hier.", {"Er wurde 1999 geboren.", "Er lebt hier."}},
    {"de", "Das war im Jahr 1999. Dann kam 2000.", {"Das war im Jahr 1999.", "Dann kam 2000."}},
    {"de", "Es war am 3. Okt. 2020 kalt.", {"Es war am 3. Okt. 2020 kalt."}},
    {"de", "Am 5. Jan. 2021 schneite es.", {"Am 5. Jan. 2021 schneite es."}},
    {"de", "Ich traf Jan. Er war müde.", {"Ich traf Jan.", "Er war müde."}},
    {"de", "Er kam um 10.30 Uhr an.", {"Er kam um 10.30 Uhr an."}},
    {"de", "Es kostet 3.5 Euro. Das ist teuer.", {"Es kostet 3.5 Euro.", "Das ist teuer."}},
    {"de", "Es kostet 1.000,50 Euro.", {"Es kostet 1.000,50 Euro."}},
    {"de", "Es waren 10.000 Menschen da.", {"Es waren 10.000 Menschen da."}},
    {"de", "Installiere v1.2.3 jetzt.", {"Installiere v1.2.3 jetzt."}},
    {"de", "J. R. R. Tolkien schrieb Bücher.", {"J. R. R. Tolkien schrieb Bücher."}},
    {"de", "A. Merkel war Kanzlerin.", {"A. Merkel war Kanzlerin."}},
    {"de", "Er sagte ... nichts.", {"Er sagte ... nichts."}},
    {"de", "Warte... Was?", {"Warte...", "Was?"}},
    {"de", "Warte… Was ist das?", {"Warte…", "Was ist das?"}},
    {"de", "Und dann… nichts mehr.", {"Und dann… nichts mehr."}},
    {"de", "«Komm!», sagte er.", {"«Komm!», sagte er."}},
    {"de", "»Komm!«, sagte er.", {"»Komm!«, sagte er."}},
    {"de", "„Komm!“, rief sie.", {"„Komm!“, rief sie."}},
    {"de", "Er rief: „Komm!\" Dann ging er.", {"Er rief: „Komm!\"", "Dann ging er."}},
    {"de", "Er rief: „Komm!“ Dann ging er.", {"Er rief: „Komm!“", "Dann ging er."}},
    {"de", "Sie fragte: „Wer?“ und ging.", {"Sie fragte: „Wer?“ und ging."}},
    {"de", "Er schwieg. „Warum?“, fragte sie.", {"Er schwieg.", "„Warum?“, fragte sie."}},
    {"de", "Er schwieg. (Das war klug.) Dann ging er.", {"Er schwieg.", "(Das war klug.)", "Dann ging er."}},
    {"de", "Was?! Das glaube ich nicht.", {"Was?!", "Das glaube ich nicht."}},
    {"de", "Nein!!! Niemals.", {"Nein!!!", "Niemals."}},
    {"de", "Siehe www.example.com für mehr.", {"Siehe www.example.com für mehr."}},
    {"de", "Lies https://a.b/c.d?x=1 bitte.", {"Lies https://a.b/c.d?x=1 bitte."}},
    {"de", "Schreib an max@example.com. Danke.", {"Schreib an max@example.com.", "Danke."}},
    {"de", "Öffne report.pdf jetzt.", {"Öffne report.pdf jetzt."}},
    {"de", "Die Seite heißt example.de. Sie ist neu.", {"Die Seite heißt example.de.", "Sie ist neu."}},
    {"de", "1. Punkt 2. Punkt", {"1. Punkt 2. Punkt"}},
    {"de", "Er wurde 3. Er war traurig.", {"Er wurde 3. Er war traurig."}},
    {"de", "das ist klein. und das auch.", {"das ist klein. und das auch."}},
    {"de", "Er ging. Über die Straße.", {"Er ging.", "Über die Straße."}},
    {"de", "Es ist kalt. Ärger droht.", {"Es ist kalt.", "Ärger droht."}},
    {"de", "Er kam. 3 Leute folgten.", {"Er kam.", "3 Leute folgten."}},
    {"de", "Er kam.Dann ging er.", {"Er kam.Dann ging er."}},
    {"de", "Hallo  Welt.   Zweiter Satz.  ", {"Hallo  Welt.", "Zweiter Satz."}},
    {"de", "   Nur ein Satz   ", {"Nur ein Satz"}},
    {"de", "Ohne Punkt am Ende", {"Ohne Punkt am Ende"}},
    {"de", "Er kaufte Äpfel, Birnen etc. Dann ging er.", {"Er kaufte Äpfel, Birnen etc.", "Dann ging er."}},
    {"de", "Der Wert ist ggf. Zu hoch.", {"Der Wert ist ggf. Zu hoch."}},
    {"de", "Er ist geb. Müller.", {"Er ist geb. Müller."}},
    {"de", "Das ist inkl. MwSt. zu zahlen.", {"Das ist inkl. MwSt. zu zahlen."}},
    {"de", "Hr. Meier kommt.", {"Hr. Meier kommt."}},
    {"de", "Fr. Meier kommt auch.", {"Fr. Meier kommt auch."}},
    {"de", "Er lebte im 5. Jh. v. Chr. in Athen.", {"Er lebte im 5. Jh. v. Chr. in Athen."}},
    {"de", "Siehe S. 12 und Abb. 3.", {"Siehe S. 12 und Abb. 3."}},
    {"de", "Er las Bd. 2 des Werkes.", {"Er las Bd. 2 des Werkes."}},
    {"de", "Art. 3 GG gilt. Das ist klar.", {"Art. 3 GG gilt.", "Das ist klar."}},
    {"de", "Das ist o.ä. Kram.", {"Das ist o.ä. Kram."}},
    {"de", "Er kam i.d.R. Zu spät.", {"Er kam i.d.R. Zu spät."}},
    {"de", "Es gibt Tel. Nummern.", {"Es gibt Tel. Nummern."}},
    {"de", "Ist das so? Ja. Nein. Vielleicht!", {"Ist das so?", "Ja.", "Nein.", "Vielleicht!"}},
    {"de", "Mir geht's gut. Dir?", {"Mir geht's gut.", "Dir?"}},
    {"de", "Er sagte: 'Nein.' Dann ging er.", {"Er sagte: 'Nein.'", "Dann ging er."}},
    {"de", "Es ist 5 vor 12. Beeil dich.", {"Es ist 5 vor 12. Beeil dich."}},
    {"de", "Der Zug fährt um 12.15. Sei pünktlich.", {"Der Zug fährt um 12.15.", "Sei pünktlich."}},
    {"de", "Es geschah am 3.10.1990. Alle feierten.", {"Es geschah am 3.10.1990.", "Alle feierten."}},
    {"de", "Sie heißt Anna. Er heißt Ben.", {"Sie heißt Anna.", "Er heißt Ben."}},
};

static const split_case english[] = {
    {"en", "Hello world. How are you?", {"Hello world.", "How are you?"}},
    {"en", "I was born in 1999. The year was good.", {"I was born in 1999.", "The year was good."}},
    {"en", "Mr. Smith went to Washington.", {"Mr. Smith went to Washington."}},
    {"en", "Mrs. Smith and Ms. Jones came.", {"Mrs. Smith and Ms. Jones came."}},
    {"en", "Dr. Who is here.", {"Dr. Who is here."}},
    {"en", "He lives on St. James Street.", {"He lives on St. James Street."}},
    {"en", "Use a tool, e.g. a hammer.", {"Use a tool, e.g. a hammer."}},
    {"en", "Use a tool, e.g. Hammer brand.", {"Use a tool, e.g. Hammer brand."}},
    {"en", "It is big, i.e. Huge.", {"It is big, i.e. Huge."}},
    {"en", "Apples, pears, etc. are fruit.", {"Apples, pears, etc. are fruit."}},
    {"en", "He bought apples, pears, etc. Then he left.", {"He bought apples, pears, etc.", "Then he left."}},
    {"en", "It was Ali vs. Frazier.", {"It was Ali vs. Frazier."}},
    {"en", "The U.S. Army is large.", {"The U.S. Army is large."}},
    {"en", "He lives in the U.K. and works there.", {"He lives in the U.K. and works there."}},
    {"en", "See No. 5 on the list.", {"See No. 5 on the list."}},
    {"en", "The answer is No. Then he left.", {"The answer is No.", "Then he left."}},
    {"en", "It happened on Jan. 5, 2020.", {"It happened on Jan. 5, 2020."}},
    {"en", "It opened on Dec. 24 at noon.", {"It opened on Dec. 24 at noon."}},
    {"en", "I met Jan. She was tired.", {"I met Jan.", "She was tired."}},
    {"en", "It costs 3.50 dollars. That is cheap.", {"It costs 3.50 dollars.", "That is cheap."}},
    {"en", "We had 10,000 visitors. Great.", {"We had 10,000 visitors.", "Great."}},
    {"en", "Meet me at 10.30 tomorrow.", {"Meet me at 10.30 tomorrow."}},
    {"en", "Version v1.2.3 is out.", {"Version v1.2.3 is out."}},
    {"en", "J. R. R. Tolkien wrote books.", {"J. R. R. Tolkien wrote books."}},
    {"en", "George W. Bush spoke.", {"George W. Bush spoke."}},
    {"en", "He said ... nothing.", {"He said ... nothing."}},
    {"en", "Wait... What?", {"Wait...", "What?"}},
    {"en", "\"Come here!\" she said.", {"\"Come here!\" she said."}},
    {"en", "He shouted: \"Come!\" Then he left.", {"He shouted: \"Come!\"", "Then he left."}},
    {"en", "He said, “Stop.” Then he left.", {"He said, “Stop.”", "Then he left."}},
    {"en", "She asked, “Why?” and left.", {"She asked, “Why?” and left."}},
    {"en", "What?! No way.", {"What?!", "No way."}},
    {"en", "No!!! Never.", {"No!!!", "Never."}},
    {"en", "Visit www.example.com for more.", {"Visit www.example.com for more."}},
    {"en", "Go to https://a.b/c.d?x=1 now.", {"Go to https://a.b/c.d?x=1 now."}},
    {"en", "Mail john.doe@example.com today.", {"Mail john.doe@example.com today."}},
    {"en", "Open report.pdf now.", {"Open report.pdf now."}},
    {"en", "I like example.com. It is fast.", {"I like example.com.", "It is fast."}},
    {"en", "1. First item", {"1. First item"}},
    {"en", "He finished 3. Then he rested.", {"He finished 3.", "Then he rested."}},
    {"en", "He came in 3. Oktober was cold.", {"He came in 3.", "Oktober was cold."}},
    {"en", "the end. then more.", {"the end. then more."}},
    {"en", "It was 5 p.m. and dark.", {"It was 5 p.m. and dark."}},
    {"en", "It was 5 a.m. Then it rained.", {"It was 5 a.m. Then it rained."}},
    {"en", "Smith et al. found this.", {"Smith et al. found this."}},
    {"en", "See Fig. 3 for details.", {"See Fig. 3 for details."}},
    {"en", "Read pp. 10-12 first.", {"Read pp. 10-12 first."}},
    {"en", "Prof. Jones teaches. Students listen.", {"Prof. Jones teaches.", "Students listen."}},
    {"en", "He is a Ph.D. student.", {"He is a Ph.D. student."}},
    {"en", "It was cold. (Very cold.) We left.", {"It was cold.", "(Very cold.)", "We left."}},
    {"en", "Is it? Yes. No. Maybe!", {"Is it?", "Yes.", "No.", "Maybe!"}},
    {"en", "He left.She stayed.", {"He left.She stayed."}},
    {"en", "Yahoo! is a company.", {"Yahoo! is a company."}},
    {"en", "The Jr. team won.", {"The Jr. team won."}},
    {"en", "Martin Luther King Jr. spoke.", {"Martin Luther King Jr. spoke."}},
    {"en", "Apple Inc. makes phones.", {"Apple Inc. makes phones."}},
    {"en", "He ran 5 km. I walked.", {"He ran 5 km.", "I walked."}},
    {"en", "Where? Here. Now.", {"Where?", "Here.", "Now."}},
    {"en", "It's 'fine.' Really.", {"It's 'fine.'", "Really."}},
    {"en", "He spoke with Capt. Hook.", {"He spoke with Capt. Hook."}},
    {"en", "She lives on Main Ave. near us.", {"She lives on Main Ave. near us."}},
    {"en", "cf. the earlier chapter.", {"cf. the earlier chapter."}},
    {"en", "Vol. 2 is out.", {"Vol. 2 is out."}},
    {"en", "We met in 2020. In 2021 we married.", {"We met in 2020.", "In 2021 we married."}},
    {"en", "A sentence. ¿Qué pasa? Nothing.", {"A sentence.", "¿Qué pasa?", "Nothing."}},
};

/* language unknown (NULL), other languages, scripts without case or without spaces */
static const split_case others[] = {
    {NULL, "Er kam am 3. Oktober. Dann ging er.", {"Er kam am 3. Oktober.", "Dann ging er."}},
    {NULL, "Mr. Smith met Dr. Müller z. B. gestern.", {"Mr. Smith met Dr. Müller z. B. gestern."}},
    {NULL, "Hello world. Hallo Welt.", {"Hello world.", "Hallo Welt."}},
    {"zh", "今天很好。明天见！", {"今天很好。", "明天见！"}},
    {"zh", "你好吗？我很好。谢谢！", {"你好吗？", "我很好。", "谢谢！"}},
    {"zh", "他说：「好。」然后走了。", {"他说：「好。」", "然后走了。"}},
    {"ja", "これはペンです。あれは本です。", {"これはペンです。", "あれは本です。"}},
    {"ja", "東京は大きい。 大阪も。", {"東京は大きい。", "大阪も。"}},
    {"ar", "كيف حالك؟ أنا بخير.", {"كيف حالك؟", "أنا بخير."}},
    {"hi", "मैं घर जा रहा हूँ। तुम कहाँ हो?", {"मैं घर जा रहा हूँ।", "तुम कहाँ हो?"}},
    {"ru", "Привет. Как дела?", {"Привет.", "Как дела?"}},
    {"ru", "Это т. е. пример. а это нет.", {"Это т. е. пример. а это нет."}},
    {"ru", "Я пришёл. Он ушёл.", {"Я пришёл.", "Он ушёл."}},
    {"el", "Γεια σου. Τι κάνεις;", {"Γεια σου.", "Τι κάνεις;"}},
    {"el", "Καλά. είμαι εδώ.", {"Καλά. είμαι εδώ."}},
    {"el", "Τι κάνεις\xcd\xbe Καλά.", {"Τι κάνεις\xcd\xbe", "Καλά."}},
    {"fr", "Bonjour. Ça va?", {"Bonjour.", "Ça va?"}},
    {"fr", "Il a dit «Non!». Puis il est parti.", {"Il a dit «Non!».", "Puis il est parti."}},
    {"fr", "Dr. Dupont arrive. Il est là.", {"Dr. Dupont arrive.", "Il est là."}},
    {"de_DE", "Er kam am 3. Oktober. Dann ging er.", {"Er kam am 3. Oktober.", "Dann ging er."}},
    {"deu_Latn", "Im 19. Jahrhundert. Dann", {"Im 19. Jahrhundert.", "Dann"}},
    {"eng_Latn", "He came in 3. Then he left.", {"He came in 3.", "Then he left."}},
    {"xx", "Er kam am 3. Oktober.", {"Er kam am 3.", "Oktober."}},
    {"en", "", {NULL}},
    {"en", "   \t  ", {NULL}},
    {"de", ".", {"."}},
    {"de", "...", {"..."}},
    {"de", ". Hallo", {".", "Hallo"}},
    {"de", "Hallo Welt . Wie geht es ?", {"Hallo Welt .", "Wie geht es ?"}},
    {"de", "Ein\xc2\xa0Satz.\xc2\xa0Zwei.", {"Ein\xc2\xa0Satz.", "Zwei."}},
    {"de", "Eins.\xe3\x80\x80Zwei.", {"Eins.", "Zwei."}},
    {"de", "Eins.\tZwei.", {"Eins.", "Zwei."}},
};

/* ---------------------------------------------------------------------------------------
 * running the table */

static void check_case(const split_case *c) {
    attend_span *s = NULL;
    char err[128];
    int n = attend_split_sentences(c->text, strlen(c->text), c->lang, &s, err, sizeof err);
    int want = 0;
    while (want < 8 && c->want[want]) want++;
    int same = n == want;
    for (int i = 0; same && i < n; i++)
        same = strlen(c->want[i]) == s[i].end - s[i].begin && !memcmp(c->want[i], c->text + s[i].begin, s[i].end - s[i].begin);
    CHECKF(same, "[%s] %s", c->lang ? c->lang : "NULL", c->text);
    if (!same) {
        for (int i = 0; i < want; i++) fprintf(stderr, "    want: %s\n", c->want[i]);
        for (int i = 0; i < n; i++) fprintf(stderr, "    got:  %.*s\n", (int)(s[i].end - s[i].begin), c->text + s[i].begin);
    }
    free(s);
}

static int table_cases;

static void run_table(const split_case *t, size_t n) {
    for (size_t i = 0; i < n; i++) check_case(&t[i]);
    table_cases += (int)n;
}

/* ---------------------------------------------------------------------------------------
 * what every split must keep: spans in order, not empty, trimmed, and only whitespace
 * (here: ASCII blanks and NUL, or bytes of multi-byte characters) between them */

static int ascii_blank(unsigned char c) {
    return c == ' ' || (c >= '\t' && c <= '\r') || c == 0;
}

static int is_partition(const char *t, size_t len, const attend_span *s, int n) {
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].begin < at || s[i].end <= s[i].begin || s[i].end > len) return 0;
        if (ascii_blank((unsigned char)t[s[i].begin]) || ascii_blank((unsigned char)t[s[i].end - 1])) return 0;
        for (size_t j = at; j < s[i].begin; j++)
            if ((unsigned char)t[j] < 0x80 && !ascii_blank((unsigned char)t[j])) return 0;
        at = s[i].end;
    }
    for (size_t j = at; j < len; j++)
        if ((unsigned char)t[j] < 0x80 && !ascii_blank((unsigned char)t[j])) return 0;
    return 1;
}

/* Random lines over an alphabet of stops, quotes, cases, digits, spaces and broken UTF-8. */
static void test_random_lines(void) {
    static const char *const parts[] = {".", "!", "?", " ", "  ", "a", "Ab", "z", "3", "19", "\xff", "\xc3",
                                        "\xc2\xa0", "。", "…", "\"", "»", "(", ")", "Dr", "e.g", "\0", "Ü",
                                        "\xe3\x80", "www", "\t", "?!", "и", "Я"};
    const int np = sizeof parts / sizeof *parts;
    unsigned seed = 12345;
    char buf[512];
    int bad = 0;
    for (int round = 0; round < 20000; round++) {
        size_t len = 0;
        int k = (int)((seed = seed * 1103515245u + 12345u) >> 16) % 40;
        for (int i = 0; i < k; i++) {
            const char *p = parts[((seed = seed * 1103515245u + 12345u) >> 16) % (unsigned)np];
            size_t pl = p[0] ? strlen(p) : 1;
            memcpy(buf + len, p, pl);
            len += pl;
        }
        const char *langs[] = {"de", "en", NULL, "zh"};
        attend_span *s;
        int n = attend_split_sentences(buf, len, langs[round % 4], &s, NULL, 0);
        if (n < 0 || !is_partition(buf, len, s, n)) bad++;
        free(s);
    }
    CHECKF(bad == 0, "%d random lines split into something other than trimmed, ordered spans", bad);
}

/* ---------------------------------------------------------------------------------------
 * time: linear in the text */

static double seconds_to_split(const char *t, size_t len, const char *lang, int *n) {
    attend_span *s;
    clock_t c0 = clock();
    *n = attend_split_sentences(t, len, lang, &s, NULL, 0);
    double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
    CHECKF(*n >= 0 && is_partition(t, len, s, *n), "a big text split badly");
    free(s);
    return dt;
}

static void test_big_texts(void) {
    const size_t mb = 1 << 20;
    char *t = malloc(3 * 100000 + mb);
    int n;
    memset(t, 'a', mb);
    for (size_t i = 7; i < mb; i += 8) t[i] = ' ';
    double dt = seconds_to_split(t, mb, "de", &n);
    CHECKF(n == 1 && dt < 2, "1 MB without a stop: %d sentences in %.2f s", n, dt);
    for (size_t i = 0; i < 100000; i++) memcpy(t + 3 * i, "a. ", 3);
    dt = seconds_to_split(t, 300000, "en", &n);
    CHECKF(n == 1 && dt < 2, "100,000 times 'a. ': %d sentences in %.2f s", n, dt);
    for (size_t i = 0; i < 100000; i++) memcpy(t + 3 * i, "A! ", 3);
    dt = seconds_to_split(t, 300000, NULL, &n);
    CHECKF(n == 100000 && dt < 2, "100,000 times 'A! ': %d sentences in %.2f s", n, dt);
    memset(t, '.', 100000);
    dt = seconds_to_split(t, 100000, "de", &n);
    CHECKF(n == 1 && dt < 2, "100,000 dots: %d sentences in %.2f s", n, dt);
    memset(t, 0xff, mb);
    dt = seconds_to_split(t, mb, NULL, &n);
    CHECKF(n == 1 && dt < 2, "1 MB of invalid UTF-8: %d sentences in %.2f s", n, dt);
    for (size_t i = 0; i + 3 <= mb; i += 3) memcpy(t + i, i % 30 == 27 ? "。" : "好", 3);
    dt = seconds_to_split(t, mb / 3 * 3, "zh", &n);
    CHECKF(n == (int)(mb / 30) + 1 && dt < 2, "1 MB of Chinese: %d sentences in %.2f s", n, dt);
    memset(t, ' ', mb);
    for (size_t i = mb / 2; i < mb; i += 4) memcpy(t + i, "Z. ", 3);
    dt = seconds_to_split(t, mb, "de", &n);
    CHECKF(n == 1 && dt < 2, "0.5 MB of spaces, then initials: %d sentences in %.2f s", n, dt);
    free(t);
}

/* ---------------------------------------------------------------------------------------
 * clauses */

static int fits_bytes(void *user, const char *s, size_t n) {
    (void)s;
    return n <= *(size_t *)user;
}

/* Cut text at limit bytes; check the pieces against want (NULL: only the properties). */
static void clauses(const char *lang, const char *text, size_t limit, const char *const *want) {
    attend_span *s;
    char err[128];
    size_t len = strlen(text);
    int n = attend_split_clauses(text, len, lang, fits_bytes, &limit, &s, err, sizeof err);
    CHECKF(n >= 0 && is_partition(text, len, s, n), "clauses of '%s' at %zu: not a partition", text, limit);
    for (int i = 0; n > 0 && i < n; i++) {
        int has_space = memchr(text + s[i].begin, ' ', s[i].end - s[i].begin) != NULL;
        /* whitespace is always a cut left: a piece too long has none */
        CHECKF(s[i].end - s[i].begin <= limit || !has_space, "clause '%.*s' of '%s' is over %zu bytes",
               (int)(s[i].end - s[i].begin), text + s[i].begin, text, limit);
    }
    if (!want) {
        free(s);
        return;
    }
    int k = 0;
    while (want[k]) k++;
    int same = n == k;
    for (int i = 0; same && i < n; i++)
        same = strlen(want[i]) == s[i].end - s[i].begin && !memcmp(want[i], text + s[i].begin, strlen(want[i]));
    CHECKF(same, "clauses of '%s' at %zu bytes", text, limit);
    if (!same) {
        for (int i = 0; i < k; i++) fprintf(stderr, "    want: %s\n", want[i]);
        for (int i = 0; i < n; i++) fprintf(stderr, "    got:  %.*s\n", (int)(s[i].end - s[i].begin), text + s[i].begin);
    }
    free(s);
}

#define PIECES(...) ((const char *const[]){__VA_ARGS__, NULL})

static void test_clauses(void) {
    clauses("de", "Er kam, sah und siegte; dann ging er nach Hause.", 30,
            PIECES("Er kam, sah und siegte;", "dann ging er nach Hause."));
    clauses("de", "Er sagte: Ich komme, wenn ich kann.", 25, PIECES("Er sagte:", "Ich komme, wenn ich kann."));
    clauses("de", "Ich bleibe heute, weil es regnet und stürmt", 30,
            PIECES("Ich bleibe heute,", "weil es regnet und stürmt"));
    clauses("de", "Ich bleibe zu Hause weil es regnet", 20, PIECES("Ich bleibe zu Hause", "weil es regnet"));
    clauses("de", "Er las das Buch und sie sah den Film", 20, PIECES("Er las das Buch", "und sie sah den Film"));
    clauses("en", "I will come tomorrow because I have time", 25,
            PIECES("I will come tomorrow", "because I have time"));
    clauses("en", "This is the house which Jack built", 20, PIECES("This is the house", "which Jack built"));
    clauses("en", "aaaa, bbbb, cccc, dddd", 12, PIECES("aaaa, bbbb,", "cccc, dddd"));
    clauses("en", "aaaa bbbb cccc dddd", 10, PIECES("aaaa bbbb", "cccc dddd"));
    clauses("en", "aaaa bbbb cccc dddd", 4, PIECES("aaaa", "bbbb", "cccc", "dddd"));
    clauses("en", "aaaaaaaaaaaaaaaaaaaa", 5, PIECES("aaaaaaaaaaaaaaaaaaaa"));
    clauses("en", "  fits whole  ", 100, PIECES("fits whole"));
    clauses("en", "a; b: c, d", 3, PIECES("a;", "b:", "c,", "d"));
    clauses("en", "one, two; three, four", 15, PIECES("one, two;", "three, four"));
    clauses("en", "It costs 1,5 at 10:30 today", 14, PIECES("It costs 1,5", "at 10:30 today"));
    clauses("en", "He came - and then he left us", 14, PIECES("He came -", "and then", "he left us"));
    clauses("de", "Er kam – sie ging – alle lachten", 16, PIECES("Er kam –", "sie ging –", "alle lachten"));
    clauses("en", "Android phones and tablets", 15, PIECES("Android phones", "and tablets"));
    clauses("zh", "今天很好，明天见，后天也好", 20, PIECES("今天很好，", "明天见，", "后天也好"));
    clauses("en", "   ", 5, NULL);
    attend_span *s;
    size_t limit = 5;
    CHECK(attend_split_clauses("   ", 3, "en", fits_bytes, &limit, &s, NULL, 0) == 0);
    free(s);
    /* properties on longer generated text, every limit */
    static char buf[4096];
    size_t len = 0;
    const char *words[] = {"Der", "Hund,", "und", "weil", "lief;", "schnell:", "–", "\xff", "Katze", "die"};
    for (unsigned i = 0; len + 20 < sizeof buf; i++) len += (size_t)sprintf(buf + len, "%s ", words[(i * 7 + i / 3) % 10]);
    for (size_t lim = 1; lim < 200; lim += 7) clauses("de", buf, lim, NULL);
}

/* A 1 MB sentence of words cut into 100-byte pieces: n log n at worst. */
static void test_big_clauses(void) {
    const size_t mb = 1 << 20;
    char *t = malloc(mb);
    for (size_t i = 0; i < mb; i++) t[i] = i % 6 == 5 ? ' ' : i % 600 == 4 ? ',' : 'a';
    size_t limit = 100;
    attend_span *s;
    clock_t c0 = clock();
    int n = attend_split_clauses(t, mb, "en", fits_bytes, &limit, &s, NULL, 0);
    double dt = (double)(clock() - c0) / CLOCKS_PER_SEC;
    CHECKF(n > (int)(mb / 100) && dt < 3 && is_partition(t, mb, s, n), "1 MB into clauses: %d pieces in %.2f s", n, dt);
    free(s);
    free(t);
}

int main(void) {
    run_table(german, sizeof german / sizeof *german);
    run_table(english, sizeof english / sizeof *english);
    run_table(others, sizeof others / sizeof *others);
    CHECKF(table_cases >= 150, "only %d table cases", table_cases);
    test_random_lines();
    test_big_texts();
    test_clauses();
    test_big_clauses();
    printf("%d table cases\n", table_cases);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
