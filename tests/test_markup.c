/* Tests of text/markup_parse.c and text/markup_render.c with hand-made translations and
 * word links (no model): the segments a fragment gives (block elements split them, inline
 * ones do not, entities decoded, whitespace around them dropped); the identity render (each
 * segment as its own translation) re-parsing to the same segments, keeping attributes, code
 * and comments byte for byte; where tags land when the words move; 40-odd hostile inputs,
 * each rendered balanced (tests/markup_check.h), without losing text, in bounded time; and
 * 2,000 random link sets on tagged sentences, each placed balanced with every tag once.
 * Run: build/tests/test_markup (prints "N passed, 0 failed"; exit status 1 on failure). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "markup_check.h"

static markup_doc *parse(const char *html, size_t len) {
    char err[128];
    markup_doc *d = markup_parse(html, len, 0, err, sizeof err);
    CHECKF(d != NULL, "markup_parse: %s", err);
    return d;
}

/* The segment texts of d, each followed by '|', each run of whitespace as one space when
 * squeeze (a zero-width element between words, "a <!--c--> b", leaves two spaces in its
 * segment's text, and the render keeps the space after it too: a third). */
static char *segment_texts(const markup_doc *d, int squeeze) {
    markup_buf b = {0};
    markup_buf_add(&b, "", 0);
    for (int i = 0; i < markup_segments(d); i++) {
        const markup_segment *s = markup_segment_at(d, i);
        for (size_t j = 0, k; j < s->len; j += k ? k : 1) {
            k = squeeze ? markup_space_at(s->text + j, s->len - j) : 0;
            if (k && !(b.len && b.data[b.len - 1] == ' ')) markup_buf_add(&b, " ", 1);
            if (!k) markup_buf_add(&b, s->text + j, 1);
        }
        markup_buf_add(&b, "|", 1);
    }
    return b.data ? b.data : strdup("");
}

/* ---------------------------------------------------------------------------------------
 * parse: segments and their text */

/* html as a fragment gives the segments want ("a|b|": each text followed by '|'). */
static void segments_are(const char *html, const char *want) {
    markup_doc *d = parse(html, strlen(html));
    if (!d) return;
    char *got = segment_texts(d, 0);
    CHECKF(!strcmp(got, want), "%s: segments \"%s\", want \"%s\"", html, got, want);
    free(got);
    markup_free(d);
}

static void test_parse(void) {
    const char *html = "Ich habe einen <b>Hund</b>.";
    markup_doc *d = parse(html, strlen(html));
    CHECK(markup_segments(d) == 1);
    const markup_segment *s = markup_segment_at(d, 0);
    CHECK(s->len == 20 && !strcmp(s->text, "Ich habe einen Hund."));
    CHECKF(s->n_tags == 1 && s->tags[0].begin == 15 && s->tags[0].end == 19 && s->tags[0].parent == -1,
           "tags %d, [%zu, %zu)", s->n_tags, s->n_tags ? s->tags[0].begin : 0, s->n_tags ? s->tags[0].end : 0);
    CHECK(s->n_tags == 1 && !strcmp(s->tags[0].open, "<b>") && !strcmp(s->tags[0].close, "</b>"));
    markup_free(d);
    /* block elements split segments */
    segments_are("<p>Eins</p><p>Zwei</p>", "Eins|Zwei|");
    segments_are("<ul><li>Eins</li><li>Zwei</li></ul>", "Eins|Zwei|");
    segments_are("<table><tr><td>Eins</td><td>Zwei</td></tr></table>", "Eins|Zwei|");
    segments_are("Eins<br>Zwei", "Eins|Zwei|");
    segments_are("<h1>Titel</h1>Text hier", "Titel|Text hier|");
    segments_are("vor <div>mitten</div> nach", "vor|mitten|nach|");
    /* inline elements do not */
    segments_are("a <b>b</b> <i>c</i> <a href=\"x\">d</a> <span>e</span> <em>f</em> <strong>g</strong> h",
                 "a b c d e f g h|");
    /* entities decoded; whitespace around a segment is not its text */
    segments_are("a &amp; b&nbsp;c &#x41;&#66;", "a & b\xc2\xa0" "c AB|");
    segments_are("  \n <p>  Hallo  Welt \n </p>\t ", "Hallo  Welt|");
    segments_are("&nbsp;Hallo&nbsp;", "Hallo|");
    segments_are("", "");
    segments_are("  <p> </p> ", "");
    /* the inline element's nesting */
    html = "<b>ein <i>roter</i> Hund</b>";
    d = parse(html, strlen(html));
    s = markup_segment_at(d, 0);
    CHECKF(s->n_tags == 2 && s->tags[1].parent == 0 && s->tags[1].begin == 4 && s->tags[1].end == 9,
           "nested: %d tags", s->n_tags);
    markup_free(d);
}

/* ---------------------------------------------------------------------------------------
 * render with the identity translation */

/* Render html as itself; the output re-parses to the same segment texts (up to the length
 * of whitespace runs) and as many tags in each, and is balanced. The output, malloc'd (NULL on failure). */
static char *identity(const char *html) {
    markup_doc *d = parse(html, strlen(html));
    if (!d) return NULL;
    char *out = markup_render_identity(d);
    CHECKF(out != NULL, "%s: render failed", html);
    markup_doc *again = out ? parse(out, strlen(out)) : NULL;
    if (again) {
        char *a = segment_texts(d, 1), *b = segment_texts(again, 1);
        CHECKF(!strcmp(a, b), "%s -> %s: segments \"%s\" became \"%s\"", html, out, a, b);
        int same = markup_segments(d) == markup_segments(again);
        for (int i = 0; same && i < markup_segments(d); i++)
            same = markup_segment_at(d, i)->n_tags == markup_segment_at(again, i)->n_tags;
        CHECKF(same, "%s -> %s: tags per segment changed", html, out);
        const char *bad = markup_balance_error(out, strlen(out));
        CHECKF(!bad, "%s -> %s: %s", html, out, bad);
        free(a), free(b);
    }
    markup_free(again);
    markup_free(d);
    return out;
}

/* The identity render of html contains want, byte for byte. */
static void keeps(const char *html, const char *want) {
    char *out = identity(html);
    CHECKF(out && strstr(out, want), "%s -> %s: no \"%s\"", html, out ? out : "(null)", want);
    free(out);
}

static void renders_as(const char *html, const char *want) {
    char *out = identity(html);
    CHECKF(out && !strcmp(out, want), "%s -> \"%s\", want \"%s\"", html, out ? out : "(null)", want);
    free(out);
}

static void test_identity(void) {
    renders_as("Ich habe einen <b>Hund</b>.", "Ich habe einen <b>Hund</b>.");
    renders_as("<p>Eins</p>\n<p>Zwei <i>drei</i></p>", "<p>Eins</p>\n<p>Zwei <i>drei</i></p>");
    renders_as("<b>ein <i>roter</i> Hund</b>", "<b>ein <i>roter</i> Hund</b>");
    keeps("Ein <a href=\"x?a=1&amp;b=2\" class='c'>Link</a> hier", "<a href=\"x?a=1&amp;b=2\" class='c'>Link</a>");
    keeps("<IMG SRC=a.png ALT=\"x &quot; y\"> Bild", "<IMG SRC=a.png ALT=\"x &quot; y\">");
    keeps("<p>Text</p><pre>  a  &lt; b</pre>", "<pre>  a  &lt; b</pre>");
    keeps("<p>x</p><script>if (a < b && c) f(\"</p>\");</script>",
          "<script>if (a < b && c) f(\"</p>\");</script>");
    keeps("<style>p > b { color: red }</style>Text", "<style>p > b { color: red }</style>");
    keeps("Der <code>a &lt;  b</code> Wert", "<code>a &lt;  b</code>");
    keeps("<textarea>  <b>x &amp; y</textarea>", "<textarea>  <b>x &amp; y</textarea>");
    keeps("Ein <span translate=\"no\">Hund  &amp; Katze</span> hier", "<span translate=\"no\">Hund  &amp; Katze</span>");
    keeps("<div translate=no><p>Hund &amp;  Katze</p></div>", "<div translate=no><p>Hund &amp;  Katze</p></div>");
    keeps("Eins <!-- ein Kommentar --> zwei", "<!-- ein Kommentar -->");
    keeps("<p>Eins</p><!-- zwischen --><p>zwei</p>", "<!-- zwischen -->");
    renders_as("a &lt; b &amp; c", "a &lt; b &amp; c");
    renders_as("a < b & c", "a &lt; b &amp; c");
    renders_as("x &gt; y", "x &gt; y");
    char *out = identity("<svg width=\"10\"><circle r=\"1\"/></svg> Text");
    CHECKF(out && !strncmp(out, "<svg width=\"10\"><circle r=\"1\"/>", 31), "svg: %s", out);
    free(out);
}

/* ---------------------------------------------------------------------------------------
 * placement: the tags of one segment around moved words */

/* html's one segment translated as t with links (n pairs) is exactly want. */
static void places(const char *html, const char *t, const int *links, int n, const char *want) {
    markup_doc *d = parse(html, strlen(html));
    if (!d) return;
    CHECKF(markup_segments(d) == 1, "%s: %d segments", html, markup_segments(d));
    markup_buf out = {0};
    markup_buf_add(&out, "", 0);
    int rc = markup_segments(d) == 1 ? markup_place(&out, markup_segment_at(d, 0), t, links, n) : -1;
    const char *bad = out.data ? markup_balance_error(out.data, out.len) : "no output";
    CHECKF(rc == 0 && !bad, "%s -> %s: rc %d, %s", html, out.data, rc, bad ? bad : "balanced");
    CHECKF(!want || (out.data && !strcmp(out.data, want)), "%s as \"%s\" -> \"%s\", want \"%s\"", html, t,
           out.data, want);
    free(out.data);
    markup_free(d);
}

static void test_placement(void) {
    /* reordered words: the tag goes with its word */
    places("<b>Hund</b> ist hier", "here is the dog", (int[]){0, 3, 1, 1, 2, 0}, 3, "here is the <b>dog</b>");
    /* nested elements stay nested */
    places("<b>ein <i>roter</i> Hund</b>", "a red dog", (int[]){0, 0, 1, 1, 2, 2}, 3, "<b>a <i>red</i> dog</b>");
    places("<b>ein <i>roter</i> Hund</b>", "the dog red", (int[]){0, 0, 1, 2, 2, 1}, 3, "<b>the dog <i>red</i></b>");
    /* a child aligned outside its parent is pulled in */
    places("<b>ein <i>roter</i></b> Hund", "red a dog", (int[]){0, 1, 1, 0, 2, 2}, 3, NULL);
    /* an element whose words have no link is still written, zero-width */
    places("Ich habe <b>einen</b> Hund", "I have a dog", (int[]){0, 0, 1, 1, 3, 3}, 3, "I have a <b></b> dog");
    places("Ich habe <b>einen</b> Hund", "I have a dog", NULL, 0, NULL);
    places("<b>Hund</b>", "", NULL, 0, "<b></b>");
    /* a void element lands before the word aligned to the source word after it */
    places("Hier bellt <img src=a.png> ein Hund", "a dog barks here", (int[]){0, 3, 1, 2, 2, 0, 3, 1}, 4,
           "<img src=a.png> a dog barks here");
    places("Hier <img src=a.png> bellt ein Hund", "a dog barks here", (int[]){0, 3, 1, 2, 2, 0, 3, 1}, 4,
           "a dog <img src=a.png> barks here");
    /* siblings whose aligned spans overlap come out apart */
    places("<b>A</b> <i>B</i> C", "x y z", (int[]){0, 0, 0, 2, 1, 1}, 3, NULL);
    places("<b>A</b> <i>B</i> C", "x y z", (int[]){0, 1, 1, 0, 1, 2}, 3, NULL);
    places("<b>A B</b> <i>C D</i>", "w x y z", (int[]){0, 0, 1, 2, 2, 1, 3, 3}, 4, NULL);
    /* sentence punctuation stays outside a tag closing on its word */
    places("Ich sehe den <b>Hund</b>.", "I see the dog.", (int[]){0, 0, 1, 1, 2, 2, 3, 3}, 4,
           "I see the <b>dog</b>.");
    places("<b>Hallo</b>, Welt!", "Hello, world!", (int[]){0, 0, 1, 1}, 2, "<b>Hello</b>, world!");
    /* text is escaped; links out of range are ignored */
    places("<b>a</b> b", "x<y & z", (int[]){0, 0, 1, 2, 5, 0, 0, 9, -1, 0}, 5, "<b>x&lt;y</b> &amp; z");
}

/* ---------------------------------------------------------------------------------------
 * hostile input: balanced output, no text lost, bounded time */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Parse len bytes of html (as a document when document), render it as itself: balanced, every
 * non-space character of the segments there again when the output is parsed, within 5 s. */
static void hostile(const char *name, const char *html, size_t len, int document) {
    const double t0 = now();
    char err[128];
    markup_doc *d = markup_parse(html, len, document, err, sizeof err);
    CHECKF(d != NULL, "%s: %s", name, err);
    if (!d) return;
    char *out = markup_render_identity(d);
    CHECKF(out != NULL, "%s: render failed", name);
    const double dt = now() - t0;
    const char *bad = out ? markup_balance_error(out, strlen(out)) : NULL;
    CHECKF(!bad, "%s: %s in \"%.300s\"", name, bad, out);
    markup_doc *again = out ? markup_parse(out, strlen(out), document, err, sizeof err) : NULL;
    if (again) {
        char *a = markup_nonspace(d), *b = markup_nonspace(again);
        size_t i = 0;
        while (a[i] && a[i] == b[i]) i++;
        CHECKF(!a[i] && !b[i], "%s: text differs at %zu: \"%.40s\" became \"%.40s\"", name, i, a + i, b + i);
        free(a), free(b);
    }
    CHECKF(dt < 5, "%s: %.2f s", name, dt);
    markup_free(again), markup_free(d), free(out);
}

/* s repeated n times, then tail: malloc'd, its length in *len. */
static char *repeat(const char *head, const char *s, size_t n, const char *tail, size_t *len) {
    const size_t h = strlen(head), k = strlen(s), t = strlen(tail);
    char *r = malloc(h + k * n + t + 1);
    memcpy(r, head, h);
    for (size_t i = 0; i < n; i++) memcpy(r + h + i * k, s, k);
    memcpy(r + h + k * n, tail, t + 1);
    *len = h + k * n + t;
    return r;
}

static const char *const hostile_cases[] = {
    "<b>unclosed", "<b><i>zwei offen", "Text</b> stray", "</b></i></p></div>", "<b><i>misnested</b></i> tail",
    "<b>x <i>y</b> z</i> w", "a < b and a lone & here &; &#; &#xZZ; &unknown;", "<b><p>block in inline</p></b>",
    "<a href=x><div>x</div></a>", "<table><b>fostered</b></table>", "<table></table><table><td>cell",
    "<tr><td>no table</td></tr>", "<ul><li>one<li>two<b>bold<li>three</ul>",
    "<script>never closed <b>", "<!-- never closed <b>x</b>", "<![CDATA[x<b>]]> after",
    "<svg><b>x</b></svg>", "<svg><circle/><foreignObject><p>in <b>svg</b></p></foreignObject></svg>",
    "<math><mi>x</mi><b>y</b></math>", "<B>UPPER</B> <I><U>case</I></U> <P>Para</P>",
    "<a href=unquoted title=a&b class=x>attr</a>", "<a href=\"never closed>text</a>", "<b <i>weird</b>",
    "<b/>self-closing <i/> x", "</br> and </p> stray", "<p>one<p>two<div>three</p>four",
    "<select><option>a<option>b</select> x", "<title>T &amp; <b></title><b>x",
    "<noscript><b>x</noscript>", "<xmp><b></xmp> <plaintext><b>rest", "<template><b>t</b></template> x",
    "<button><b>press</button> x</b>", "<label>a<input>b</label>", "<h1><h2>headings</h1></h2>",
    "<dl><dt>a<dd>b<dt>c</dl>", "<form><form>x</form></form>", "<nobr><nobr>x</nobr>", "<frameset><frame>",
    "<iframe><b>x</iframe>y", "<image src=x> <isindex>", "x <wbr> y <br/> z <hr> w",
    "<span><span><span>deep</span>", "<a><a>nested links</a></a>", "<em>a<p>b</em>c</p>",
    "<ruby>漢<rt>kan</rt>字<rt>ji</rt></ruby>", "<svg>!b>y</b></svg> <pre>a</b>b</i> c</pre>",
    "a <b>y c<!-- never closed, inside <b", "<code>x <!-- never closed</code> y", "<?php echo 1 ?> <!x> a", "<b>\xff\xfe invalid \xc3 utf-8 \xe2\x82</b>",
};

/* The big ones: 10,000-deep nesting, 10,000 siblings, 1 MB attributes and text. */
static void hostile_big(void) {
    size_t len;
    char *s = repeat("", "<b>", 10000, "deep", &len);
    hostile("10,000 nested <b>", s, len, 0), free(s);
    s = repeat("", "<b>x ", 10000, "deep", &len);
    hostile("10,000 nested <b> with words", s, len, 0), free(s);
    s = repeat("", "<div>", 10000, "deep", &len);
    hostile("10,000 nested <div>", s, len, 0), free(s);
    s = repeat("", "<span>", 10000, "deep", &len);
    hostile("10,000 nested <span>", s, len, 0), free(s);
    s = repeat("<p>", "<b>w</b> ", 10000, "</p>", &len);
    hostile("10,000 sibling <b>", s, len, 0), free(s);
    s = repeat("<a href=\"", "x", 1 << 20, "\">Link</a> Text", &len);
    hostile("1 MB attribute", s, len, 0), free(s);
    s = repeat("<p>", "Wort ", 1 << 18, "</p>", &len);
    hostile("1 MB text", s, len, 0), free(s);
    s = repeat("<p><b>", "Wort ", 1 << 18, "</b></p>", &len);
    hostile("1 MB text in <b>", s, len, 0), free(s);
    s = repeat("<script>", "x", 1 << 20, "", &len);
    hostile("1 MB <script> never closed", s, len, 0), free(s);
}

static void test_hostile(void) {
    int n = 0;
    for (size_t i = 0; i < sizeof hostile_cases / sizeof *hostile_cases; i++, n++) {
        hostile(hostile_cases[i], hostile_cases[i], strlen(hostile_cases[i]), 0);
        hostile(hostile_cases[i], hostile_cases[i], strlen(hostile_cases[i]), 1);
    }
    static const char nul[] = "<b>a\0b</b> <i\0>c\0</i> \0 <p>d</p>";
    hostile("NUL bytes", nul, sizeof nul - 1, 0), n++;
    static const char doc[] = "<!DOCTYPE html><html><head><title>T</title></head><body><p>Hallo <b>Welt</b></p>";
    hostile("a document", doc, sizeof doc - 1, 1), n++;
    hostile_big();
    CHECKF(n + 9 >= 30, "only %d hostile cases", n + 9);
}

/* ---------------------------------------------------------------------------------------
 * random links */

static uint64_t rng = 88172645463325252ull;
static unsigned next_rand(unsigned n) { /* xorshift64: the same trials on every machine */
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (unsigned)(rng % n);
}

static const char *const tagged[] = {
    "Ich habe <b class=t0>einen <i class=t1>roten</i> Hund</b> und <a href=t2>eine Katze</a>.",
    "<span class=t0>Der</span> <em class=t1>Hund <img src=t2> bellt</em> <!--t3--> laut <strong class=t4></strong>.",
    "<b class=t0><i class=t1><u class=t2>tief</u></i></b> geschachtelt <code class=t3>x&lt;y</code> hier",
    "<a href=t0>Eins</a><a href=t1>zwei</a> <b class=t2>drei <i class=t3>vier</i> <i class=t4>fünf</i></b>, sechs!",
};

/* A random translation of T words (some ending in punctuation) and links over S source words;
 * the place's output balanced, each tag there once, the words there in order. */
static int random_trial(const markup_segment *s, int S) {
    static const char *const ends[] = {"", "", "", ".", ",", "!", "..."};
    char t[256] = "", want[256] = "";
    const int T = (int)next_rand(13);
    for (int j = 0; j < T; j++) {
        char w[16];
        snprintf(w, sizeof w, "w%d%s", j, ends[next_rand(7)]);
        strcat(t, j ? " " : ""), strcat(t, w), strcat(want, w);
    }
    int links[2 * 40], n = (int)next_rand(40);
    for (int k = 0; k < 2 * n; k += 2)
        links[k] = (int)next_rand((unsigned)S + 1), links[k + 1] = (int)next_rand((unsigned)T + 2) - 1;
    markup_buf out = {0};
    markup_buf_add(&out, "", 0);
    int ok = markup_place(&out, s, t, links, n) == 0 && out.data && !markup_balance_error(out.data, out.len);
    /* every tag once; what is left without the tags and spaces is the translation's words */
    for (int k = 0; ok && k < s->n_tags; k++) {
        char *at = strstr(out.data, s->tags[k].open);
        ok = at && !strstr(at + 1, s->tags[k].open);
        if (ok) memset(at, ' ', strlen(s->tags[k].open));
        char *c = s->tags[k].close ? strstr(out.data, s->tags[k].close) : NULL;
        if (c) memset(c, ' ', strlen(s->tags[k].close));
    }
    size_t m = 0;
    for (size_t i = 0; ok && i < out.len; i++)
        if (out.data[i] != ' ') out.data[m++] = out.data[i];
    ok = ok && m == strlen(want) && !memcmp(out.data, want, m);
    if (!ok) fprintf(stderr, "random trial: \"%s\" with %d links\n", t, n);
    free(out.data);
    return ok;
}

static void test_random_links(void) {
    int trials = 0, good = 0;
    for (size_t c = 0; c < sizeof tagged / sizeof *tagged; c++) {
        markup_doc *d = parse(tagged[c], strlen(tagged[c]));
        CHECKF(d && markup_segments(d) == 1, "%s", tagged[c]);
        if (!d || markup_segments(d) != 1) continue;
        const markup_segment *s = markup_segment_at(d, 0);
        const int S = markup_word_count(s->text, s->len);
        for (int i = 0; i < 500; i++, trials++) good += random_trial(s, S);
        markup_free(d);
    }
    CHECKF(good == trials && trials == 2000, "%d of %d random trials good", good, trials);
}

int main(void) {
    test_parse();
    test_identity();
    test_placement();
    test_hostile();
    test_random_links();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
