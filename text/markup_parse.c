/* text/markup_parse.c: HTML -> an output plan of raw pieces and segments (markup.h). gumbo
 * builds the tree (browsers' rules: unclosed, stray and misnested tags repaired); one walk,
 * with an explicit stack so that deep nesting costs heap, not C stack, writes the plan. */
#include <gumbo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "markup.h"

typedef struct {
    int segment;      /* -1: raw bytes */
    char *raw;
    size_t len, cap;
} plan_piece;

struct markup_doc {
    plan_piece *pieces;
    int n_pieces, cap_pieces;
    markup_segment *segs;
    int n_segs, cap_segs;
};

/* ---------------------------------------------------------------------------------------
 * growing buffers */

static void add_bytes(markup_buf *b, const char *s, size_t n) {
    if (b->oom || n == 0) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->len + n + 1) cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d) {
            b->oom = 1;
            return;
        }
        b->data = d, b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

/* A NUL byte goes in as U+FFFD, as browsers read it in a tag, a comment or a script: the
 * plan's pieces and the output are C strings, and a NUL inside a tag (<i\0>) cut it short
 * there, leaving the tag unterminated. */
void markup_buf_add(markup_buf *b, const char *s, size_t n) {
    const char *z;
    while (n && (z = memchr(s, 0, n))) {
        add_bytes(b, s, (size_t)(z - s));
        add_bytes(b, "\xef\xbf\xbd", 3);
        n -= (size_t)(z - s) + 1, s = z + 1;
    }
    add_bytes(b, s, n);
}

void markup_buf_text(markup_buf *b, const char *s, size_t n) {
    size_t from = 0;
    for (size_t i = 0; i < n; i++) {
        const char *e = s[i] == '&' ? "&amp;" : s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;" : NULL;
        if (!e) continue;
        markup_buf_add(b, s + from, i - from);
        markup_buf_add(b, e, strlen(e));
        from = i + 1;
    }
    markup_buf_add(b, s + from, n - from);
}

/* Room for one more item of size sz in *arr (n used, *cap allocated). 0 or -1. */
static int grow(void **arr, int n, int *cap, size_t sz) {
    if (n < *cap) return 0;
    const int c = *cap ? *cap * 2 : 16;
    void *a = realloc(*arr, sz * (size_t)c);
    if (!a) return -1;
    *arr = a, *cap = c;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * what an element is */

static int tag_in(GumboTag t, const GumboTag *set, int n) {
    for (int i = 0; i < n; i++)
        if (set[i] == t) return 1;
    return 0;
}

/* Inline elements: their text stays in the sentence around them. Unknown (custom) elements
 * display inline in a browser, so they are inline here too. */
static int is_inline(GumboTag t) {
    static const GumboTag set[] = {GUMBO_TAG_A,      GUMBO_TAG_ABBR,   GUMBO_TAG_ACRONYM, GUMBO_TAG_B,
                                   GUMBO_TAG_BDI,    GUMBO_TAG_BDO,    GUMBO_TAG_BIG,     GUMBO_TAG_CITE,
                                   GUMBO_TAG_DATA,   GUMBO_TAG_DEL,    GUMBO_TAG_DFN,     GUMBO_TAG_EM,
                                   GUMBO_TAG_FONT,   GUMBO_TAG_I,      GUMBO_TAG_INS,     GUMBO_TAG_LABEL,
                                   GUMBO_TAG_MARK,   GUMBO_TAG_NOBR,   GUMBO_TAG_Q,       GUMBO_TAG_RUBY,
                                   GUMBO_TAG_RB,     GUMBO_TAG_RP,     GUMBO_TAG_RT,      GUMBO_TAG_RTC,
                                   GUMBO_TAG_S,      GUMBO_TAG_SMALL,  GUMBO_TAG_SPAN,    GUMBO_TAG_STRIKE,
                                   GUMBO_TAG_STRONG, GUMBO_TAG_SUB,    GUMBO_TAG_SUP,     GUMBO_TAG_TIME,
                                   GUMBO_TAG_TT,     GUMBO_TAG_U,      GUMBO_TAG_VAR,     GUMBO_TAG_UNKNOWN,
                                   GUMBO_TAG_IMG,    GUMBO_TAG_WBR,    GUMBO_TAG_INPUT,   GUMBO_TAG_CODE,
                                   GUMBO_TAG_KBD,    GUMBO_TAG_SAMP};
    return tag_in(t, set, (int)(sizeof set / sizeof *set));
}

/* Elements without content or end tag (the obsolete <frame>, <basefont>, <bgsound> too). */
static int is_void(GumboTag t) {
    static const GumboTag set[] = {GUMBO_TAG_AREA,  GUMBO_TAG_BASE,  GUMBO_TAG_BR,    GUMBO_TAG_COL,
                                   GUMBO_TAG_EMBED, GUMBO_TAG_HR,    GUMBO_TAG_IMG,   GUMBO_TAG_INPUT,
                                   GUMBO_TAG_LINK,  GUMBO_TAG_META,  GUMBO_TAG_PARAM, GUMBO_TAG_SOURCE,
                                   GUMBO_TAG_TRACK, GUMBO_TAG_WBR,   GUMBO_TAG_KEYGEN, GUMBO_TAG_FRAME,
                                   GUMBO_TAG_BASEFONT, GUMBO_TAG_BGSOUND};
    return tag_in(t, set, (int)(sizeof set / sizeof *set));
}

/* Copied byte for byte, never translated: code, scripts, preformatted text, form text,
 * foreign content (SVG, MathML), templates, and whatever says translate="no"; also the raw
 * text of <iframe>, <noembed> and <noframes>, which browsers never show (escaped as
 * translated text, it read back as other text). */
static int is_untouched(const GumboNode *n) {
    static const GumboTag set[] = {GUMBO_TAG_SCRIPT, GUMBO_TAG_STYLE, GUMBO_TAG_PRE,      GUMBO_TAG_TEXTAREA,
                                   GUMBO_TAG_CODE,   GUMBO_TAG_KBD,   GUMBO_TAG_SAMP,     GUMBO_TAG_SVG,
                                   GUMBO_TAG_MATH,   GUMBO_TAG_TEMPLATE, GUMBO_TAG_XMP,   GUMBO_TAG_LISTING,
                                   GUMBO_TAG_PLAINTEXT, GUMBO_TAG_IFRAME, GUMBO_TAG_NOEMBED, GUMBO_TAG_NOFRAMES};
    const GumboElement *e = &n->v.element;
    if (n->type == GUMBO_NODE_TEMPLATE || e->tag_namespace != GUMBO_NAMESPACE_HTML) return 1;
    if (tag_in(e->tag, set, (int)(sizeof set / sizeof *set))) return 1;
    const GumboAttribute *a = gumbo_get_attribute(&e->attributes, "translate");
    return a && !strcmp(a->value, "no");
}

/* The element's name as its end tag spells it ("" when there is none to find). */
static GumboStringPiece tag_name(const GumboElement *e) {
    GumboStringPiece s = {gumbo_normalized_tagname(e->tag), 0};
    s.length = strlen(s.data);
    if (s.length || !e->original_tag.length) return s;
    s = e->original_tag;
    gumbo_tag_from_original_text(&s);
    /* as a browser reads the start tag tag_bytes writes: the name ends at a control character */
    for (size_t i = 0; i < s.length; i++)
        if ((s.data[i] > 0 && s.data[i] < 0x20) || s.data[i] == 0x7f) s.length = i;
    return s;
}

/* Whether the end tag t ("</name ...>") names name. */
static int end_tag_names(GumboStringPiece t, GumboStringPiece name) {
    size_t n = 0;
    while (2 + n < t.length && !memchr(" \t\n\f\r/>", t.data[2 + n], 7)) n++;
    return t.length > 2 && n == name.length && !strncasecmp(t.data + 2, name.data, n);
}

/* Is the name one that every reader ends where gumbo did (letters, digits, '-', '_', ':', '.',
 * bytes of non-ASCII letters, NUL written as U+FFFD)? Names of byte soup ("f<", "d<t") are read differently by
 * other parsers, so such an element is kept as it is, untranslated. */
static int plain_name(GumboStringPiece n) {
    for (size_t i = 0; i < n.length; i++) {
        const unsigned char c = (unsigned char)n.data[i];
        if (!(c >= 0x80 || c == 0 || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == ':' || c == '.'))
            return 0;
    }
    return n.length > 0;
}

/* The end tag to write for e when its start was written: the source's when it names e, else
 * "</name>". gumbo records as an element's end tag whichever end tag closed it, one that
 * closed it implicitly too (</ul> for an open <li>, </h1> for an <h2>), and gives elements it
 * implied (<tbody>, a <p> made from a stray </p>) the end tag but no start: writing those
 * unbalanced the output. */
static void end_tag(markup_buf *b, const GumboElement *e) {
    GumboStringPiece name = tag_name(e);
    if (!e->original_tag.length || is_void(e->tag) || !name.length) return;
    if (end_tag_names(e->original_end_tag, name)) {
        markup_buf_add(b, e->original_end_tag.data, e->original_end_tag.length);
        return;
    }
    markup_buf_add(b, "</", 2);
    markup_buf_add(b, name.data, name.length);
    markup_buf_add(b, ">", 1);
}

/* ---------------------------------------------------------------------------------------
 * an untouched subtree, as the source wrote it (missing end tags added) */

typedef struct {
    const GumboNode *node;
    unsigned child;
} frame;

static const GumboVector *children_of(const GumboNode *n) {
    if (n->type == GUMBO_NODE_DOCUMENT) return &n->v.document.children;
    if (n->type == GUMBO_NODE_ELEMENT || n->type == GUMBO_NODE_TEMPLATE) return &n->v.element.children;
    return NULL;
}

/* A comment as the source wrote it when that is "<!--...-->", else rebuilt from its text as
 * "<!--text-->": one the source never closed ran to the source's end, and written where its
 * words land it swallowed all that follows it in the output. (Bogus comments, <?x> and <!x>,
 * are rebuilt too.) */
static void comment(markup_buf *b, const GumboNode *c) {
    const GumboStringPiece o = c->v.text.original_text;
    if (o.length >= 7 && !memcmp(o.data, "<!--", 4) && !memcmp(o.data + o.length - 3, "-->", 3)) {
        markup_buf_add(b, o.data, o.length);
        return;
    }
    markup_buf_add(b, "<!--", 4);
    markup_buf_add(b, c->v.text.text, strlen(c->v.text.text));
    markup_buf_add(b, "-->", 3);
}

/* A text node of an untouched subtree (parent: its element), as the source wrote it. But
 * gumbo's source bytes of a text run also hold the tags it ignored inside the run (the stray
 * </b> of "<svg>!b>y</b></svg>"), which would come out unbalanced: a run outside raw text
 * (<script>, <textarea>...) holding a '<' is written from its decoded text, escaped. */
static void raw_text(markup_buf *b, const GumboNode *parent, const GumboNode *c) {
    static const GumboTag raw[] = {GUMBO_TAG_SCRIPT,  GUMBO_TAG_STYLE,   GUMBO_TAG_XMP,      GUMBO_TAG_IFRAME,
                                   GUMBO_TAG_NOEMBED, GUMBO_TAG_NOFRAMES, GUMBO_TAG_PLAINTEXT, GUMBO_TAG_TEXTAREA,
                                   GUMBO_TAG_TITLE};
    const GumboStringPiece o = c->v.text.original_text;
    const GumboElement *e = &parent->v.element;
    if (c->type == GUMBO_NODE_COMMENT)
        comment(b, c);
    else if ((c->type == GUMBO_NODE_TEXT || c->type == GUMBO_NODE_WHITESPACE) && memchr(o.data, '<', o.length) &&
        !(e->tag_namespace == GUMBO_NAMESPACE_HTML && tag_in(e->tag, raw, (int)(sizeof raw / sizeof *raw))))
        markup_buf_text(b, c->v.text.text, strlen(c->v.text.text));
    else
        markup_buf_add(b, o.data, o.length);
}

/* A start tag as the source wrote it, but for control characters other than the HTML
 * spaces, written as spaces: gumbo ends a tag name at a vertical tab (<i\v>: an <i>), a
 * browser does not, and the two would read the output's tags differently. */
static void tag_bytes(markup_buf *b, GumboStringPiece t) {
    size_t from = 0;
    if (!t.length) return; /* a tag the parser made: no bytes (and maybe no pointer) */
    for (size_t i = 0; i < t.length; i++) {
        const unsigned char c = (unsigned char)t.data[i];
        if ((c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == 0) continue;
        markup_buf_add(b, t.data + from, i - from);
        markup_buf_add(b, " ", 1);
        from = i + 1;
    }
    markup_buf_add(b, t.data + from, t.length - from);
}

/* e's start tag as the source wrote it (tag_bytes), and the newline after it that the parser
 * drops at the start of <pre>, <textarea> and <listing> (src_end: the end of the source). */
static void start_tag(markup_buf *b, const GumboElement *e, const char *src_end) {
    const GumboStringPiece t = e->original_tag;
    tag_bytes(b, t);
    if (t.length && t.data + t.length < src_end && t.data[t.length] == '\n' &&
        (e->tag == GUMBO_TAG_PRE || e->tag == GUMBO_TAG_TEXTAREA || e->tag == GUMBO_TAG_LISTING))
        markup_buf_add(b, "\n", 1);
}

/* Append root's source bytes to b, rebuilt from the tree (so that tags gumbo ignored inside
 * it never come out), with the newline right after <pre>, <textarea> or <listing> that the
 * parser drops kept. 0 or -1 (out of memory). */
static int raw_subtree(markup_buf *b, const GumboNode *root, const char *src_end) {
    int cap = 64, n = 1;
    frame *st = malloc(sizeof *st * (size_t)cap);
    if (!st) return -1;
    st[0] = (frame){root, 0};
    start_tag(b, &root->v.element, src_end);
    while (n > 0 && !b->oom) {
        frame *f = &st[n - 1];
        const GumboVector *kids = children_of(f->node);
        if (!kids || f->child >= kids->length) {
            if (kids) end_tag(b, &f->node->v.element);
            n--;
            continue;
        }
        const GumboNode *c = kids->data[f->child++];
        if (c->type == GUMBO_NODE_ELEMENT || c->type == GUMBO_NODE_TEMPLATE) {
            if (grow((void **)&st, n, &cap, sizeof *st)) break;
            st[n++] = (frame){c, 0};
            start_tag(b, &c->v.element, src_end);
        } else {
            raw_text(b, f->node, c);
        }
    }
    const int bad = n > 0 || b->oom;
    free(st);
    return bad ? -1 : 0;
}

/* ---------------------------------------------------------------------------------------
 * the plan */

typedef struct {
    markup_doc *d;
    markup_buf text;     /* the current segment's text */
    markup_inline *tags; /* its inline elements */
    int n_tags, cap_tags;
    int *open;           /* the inline elements open now (indices into tags), outer first */
    int n_open, cap_open;
    int oom;
    const char *src_end; /* the end of the source: start_tag looks one byte past a tag */
} builder;

/* Append raw bytes to the plan (merged with raw bytes just before). */
static void add_raw(builder *b, const char *s, size_t n) {
    markup_doc *d = b->d;
    if (n == 0 || b->oom) return;
    plan_piece *last = d->n_pieces ? &d->pieces[d->n_pieces - 1] : NULL;
    if (!last || last->segment >= 0) {
        if (grow((void **)&d->pieces, d->n_pieces, &d->cap_pieces, sizeof *d->pieces)) {
            b->oom = 1;
            return;
        }
        last = &d->pieces[d->n_pieces++];
        *last = (plan_piece){-1, NULL, 0, 0};
    }
    markup_buf m = {last->raw, last->len, last->cap, 0};
    markup_buf_add(&m, s, n);
    if (m.oom) b->oom = 1;
    last->raw = m.data, last->len = m.len, last->cap = m.cap;
}

/* A new inline element of the current segment, starting here; its index or -1. */
static int add_tag(builder *b, char *open, char *close) {
    if (!open || grow((void **)&b->tags, b->n_tags, &b->cap_tags, sizeof *b->tags)) {
        free(open), free(close);
        return b->oom = 1, -1;
    }
    const int parent = b->n_open ? b->open[b->n_open - 1] : -1;
    b->tags[b->n_tags] = (markup_inline){parent, b->text.len, b->text.len, open, close, 0, 0};
    return b->n_tags++;
}

/* s[0..n) as a C string (NUL bytes as U+FFFD, markup_buf_add), or NULL. */
static char *copy(const char *s, size_t n) {
    markup_buf c = {0};
    markup_buf_add(&c, s, n);
    if (!c.data && !c.oom) c.data = calloc(1, 1);
    if (c.oom) free(c.data), c.data = NULL;
    return c.data;
}

size_t markup_space_at(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (n >= 1 && (u[0] == ' ' || (u[0] >= '\t' && u[0] <= '\r'))) return 1;
    if (n >= 2 && u[0] == 0xc2 && u[1] == 0xa0) return 2;                   /* U+00A0 */
    if (n < 3) return 0;
    if (u[0] == 0xe2 && u[1] == 0x80 && (u[2] <= 0x8a || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf))
        return 3;                                                           /* U+2000..200A, 2028, 2029, 202F */
    if ((u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) || (u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80) ||
        (u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80))
        return 3;                                                           /* U+205F, U+3000, U+1680 */
    return 0;
}

/* The bytes of whitespace at the end of s[0..n). */
static size_t trailing_space(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t k = 0;
        for (size_t w = 1; w <= 3 && w <= end && !k; w++)
            if (markup_space_at(s + end - w, w) == w) k = w;
        if (!k) break;
        end -= k;
    }
    return n - end;
}

/* The segment's inline elements, shifted to its trimmed text [lead, lead + len) of t[0..n). */
static void shift_tags(markup_inline *tags, int n_tags, const char *t, size_t n, size_t lead, size_t len) {
    for (int i = 0; i < n_tags; i++) {
        tags[i].space_before = tags[i].begin > 0 && (t[tags[i].begin - 1] == ' ' || t[tags[i].begin - 1] == '\n');
        tags[i].space_after = tags[i].end < n && markup_space_at(t + tags[i].end, n - tags[i].end) > 0;
        tags[i].begin = tags[i].begin < lead ? 0 : tags[i].begin - lead > len ? len : tags[i].begin - lead;
        tags[i].end = tags[i].end < lead ? 0 : tags[i].end - lead > len ? len : tags[i].end - lead;
    }
}

/* Inline elements still open when a block starts inside them (<a><div>...</div></a>) go on
 * in the next segment as copies of themselves, so every segment's tags nest. */
static void reopen(builder *b, const markup_inline *old) {
    const int n = b->n_open;
    b->n_open = 0;
    for (int i = 0; i < n && !b->oom; i++) {
        const markup_inline *t = &old[b->open[i]];
        const int k = add_tag(b, copy(t->open, strlen(t->open)), t->close ? copy(t->close, strlen(t->close)) : NULL);
        if (k >= 0) b->open[b->n_open++] = k;
    }
}

/* End the current segment: the whitespace around its text goes out raw; its text and
 * inline elements become a segment (whitespace alone, without elements, is raw). */
static void flush(builder *b) {
    const char *t = b->text.data ? b->text.data : "";
    size_t n = b->text.len, lead = 0, k;
    while (lead < n && (k = markup_space_at(t + lead, n - lead))) lead += k;
    const size_t trail = trailing_space(t + lead, n - lead), len = n - lead - trail;
    for (int i = 0; i < b->n_open; i++) b->tags[b->open[i]].end = n;
    add_raw(b, t, lead);
    markup_doc *d = b->d;
    if (len || b->n_tags) {
        if (grow((void **)&d->segs, d->n_segs, &d->cap_segs, sizeof *d->segs) ||
            grow((void **)&d->pieces, d->n_pieces, &d->cap_pieces, sizeof *d->pieces)) {
            b->oom = 1;
            return;
        }
        markup_segment *s = &d->segs[d->n_segs];
        *s = (markup_segment){copy(t + lead, len), len, b->tags, b->n_tags};
        if (!s->text) b->oom = 1;
        shift_tags(s->tags, s->n_tags, t, n, lead, len);
        d->pieces[d->n_pieces++] = (plan_piece){d->n_segs++, NULL, 0, 0};
        b->tags = NULL, b->n_tags = b->cap_tags = 0;
        add_raw(b, t + lead + len, trail);
        b->text.len = 0;
        reopen(b, s->tags);
        return;
    }
    b->text.len = 0;
}

/* "<name>" or "</name>" for an element whose source tag is missing. */
static char *made_tag(const GumboElement *e, int end) {
    GumboStringPiece name = tag_name(e);
    markup_buf s = {0};
    markup_buf_add(&s, end ? "</" : "<", 1 + (size_t)end);
    markup_buf_add(&s, name.data, name.length); /* a NUL of the source's name as U+FFFD */
    markup_buf_add(&s, ">", 1);
    if (s.oom) free(s.data), s.data = NULL;
    return s.data;
}

enum { FRAME_OTHER, FRAME_INLINE, FRAME_BLOCK };
typedef struct {
    const GumboNode *node;
    unsigned child;
    int kind;
} walk_frame;

/* An element met in the walk: what it adds to the plan; *kind says whether its children
 * are walked (FRAME_INLINE or FRAME_BLOCK) or not (FRAME_OTHER). */
static void element(builder *b, const GumboNode *n, int *kind) {
    const GumboElement *e = &n->v.element;
    *kind = FRAME_OTHER;
    /* a <title> inside an open inline element (only in a malformed body) holds plain text:
     * inline tags reopened in it would read back as text, so it stays in its sentence as it
     * is, untranslated (and parses back to the same place) */
    /* a <title> in an open inline element, or an element whose name cannot be written back */
    const int title_inline = (e->tag == GUMBO_TAG_TITLE && b->n_open > 0) || !plain_name(tag_name(e));
    if (is_untouched(n) || title_inline) {
        markup_buf raw = {0};
        if (raw_subtree(&raw, n, b->src_end) || raw.oom) b->oom = 1;
        if (is_inline(e->tag) || title_inline) add_tag(b, raw.data ? raw.data : copy("", 0), NULL); /* in the sentence, not translated */
        else flush(b), add_raw(b, raw.data, raw.len), free(raw.data);
        return;
    }
    markup_buf tag = {0};
    tag_bytes(&tag, e->original_tag);
    char *open = e->original_tag.length ? (tag.oom ? NULL : tag.data) : made_tag(e, 0);
    if (!e->original_tag.length) free(tag.data);
    if (is_inline(e->tag) && is_void(e->tag)) {
        add_tag(b, open, NULL);
    } else if (is_inline(e->tag)) {
        const int k = add_tag(b, open, made_tag(e, 1));
        if (k < 0 || grow((void **)&b->open, b->n_open, &b->cap_open, sizeof *b->open)) return;
        b->open[b->n_open++] = k;
        *kind = FRAME_INLINE;
    } else {
        flush(b);
        if (is_void(e->tag) && !e->original_tag.length) add_raw(b, open, open ? strlen(open) : 0); /* </br>: a <br> */
        else if (e->original_tag.length) add_raw(b, open, open ? strlen(open) : 0); /* not one the parser implied */
        free(open);
        *kind = is_void(e->tag) ? FRAME_OTHER : FRAME_BLOCK;
    }
}

/* A frame's children are done. */
static void leave(builder *b, const walk_frame *f) {
    if (f->kind == FRAME_INLINE) {
        b->tags[b->open[--b->n_open]].end = b->text.len;
    } else if (f->kind == FRAME_BLOCK) {
        flush(b);
        markup_buf end = {0};
        end_tag(&end, &f->node->v.element);
        add_raw(b, end.data, end.len);
        free(end.data);
    }
}

/* A comment: between blocks (nothing but whitespace before it in its segment) it is copied
 * where it is; inside text it is a zero-width element of the sentence. */
static void add_comment(builder *b, const GumboNode *c) {
    markup_buf m = {0};
    comment(&m, c);
    if (m.oom) free(m.data), m.data = NULL;
    size_t k, at = 0;
    while (at < b->text.len && (k = markup_space_at(b->text.data + at, b->text.len - at))) at += k;
    if (at == b->text.len && b->n_tags == 0 && m.data) {
        flush(b);
        add_raw(b, m.data, m.len);
        free(m.data);
    } else {
        add_tag(b, m.data, NULL);
    }
}

/* Walk the tree under root into the plan. */
static void walk(builder *b, const GumboNode *root) {
    int cap = 64, n = 1;
    walk_frame *st = malloc(sizeof *st * (size_t)cap);
    if (!st) return (void)(b->oom = 1);
    st[0] = (walk_frame){root, 0, FRAME_OTHER};
    while (n > 0 && !b->oom) {
        walk_frame *f = &st[n - 1];
        const GumboVector *kids = children_of(f->node);
        if (!kids || f->child >= kids->length) {
            leave(b, f);
            n--;
            continue;
        }
        const GumboNode *c = kids->data[f->child++];
        int kind = FRAME_OTHER;
        if (c->type == GUMBO_NODE_ELEMENT || c->type == GUMBO_NODE_TEMPLATE) element(b, c, &kind);
        else if (c->type == GUMBO_NODE_COMMENT)
            add_comment(b, c);
        else
            markup_buf_add(&b->text, c->v.text.text, strlen(c->v.text.text));
        if (b->text.oom) b->oom = 1;
        if (kind == FRAME_OTHER) continue;
        if (grow((void **)&st, n, &cap, sizeof *st)) b->oom = 1;
        else st[n++] = (walk_frame){c, 0, kind};
    }
    free(st);
}

/* The doctype as "<!DOCTYPE name ...>" and a newline (gumbo keeps its fields, not its bytes). */
static void doctype(builder *b, const GumboDocument *doc) {
    markup_buf m = {0};
    markup_buf_add(&m, "<!DOCTYPE ", 10);
    markup_buf_add(&m, doc->name, strlen(doc->name));
    const char *pub = doc->public_identifier, *sys = doc->system_identifier;
    if (*pub) markup_buf_add(&m, " PUBLIC \"", 9), markup_buf_add(&m, pub, strlen(pub)), markup_buf_add(&m, "\"", 1);
    if (*sys && !*pub) markup_buf_add(&m, " SYSTEM", 7);
    if (*sys) markup_buf_add(&m, " \"", 2), markup_buf_add(&m, sys, strlen(sys)), markup_buf_add(&m, "\"", 1);
    markup_buf_add(&m, ">\n", 2);
    if (m.oom) b->oom = 1;
    add_raw(b, m.data, m.len);
    free(m.data);
}

/* A copy of s[0..n) with the control characters other than the HTML spaces (and NUL, read
 * as U+FFFD) as spaces: gumbo and browsers disagree about them inside tags (gumbo ends a
 * tag name at a vertical tab, a browser does not), and in text they are spaces to the model
 * anyway. NULL when out of memory. */
static char *without_controls(const char *s, size_t n) {
    char *c = malloc(n + 1);
    for (size_t i = 0; c && i < n; i++) {
        const unsigned char x = (unsigned char)s[i];
        c[i] = (x && x < 0x20 && x != '\t' && x != '\n' && x != '\f' && x != '\r') || x == 0x7f ? ' ' : s[i];
    }
    return c;
}

markup_doc *markup_parse(const char *html, size_t len, int document, char *err, size_t errlen) {
    GumboOptions o = kGumboDefaultOptions;
    o.max_errors = 0; /* hostile pages make many: none are kept */
    if (!html) len = 0;
    char *src = without_controls(html ? html : "", len);
    GumboOutput *g = src ? gumbo_parse_with_options(&o, src, len) : NULL;
    markup_doc *d = calloc(1, sizeof *d);
    builder b = {d, {0}, NULL, 0, 0, NULL, 0, 0, !g || !d, src ? src + len : NULL};
    if (!b.oom && document && g->document->v.document.has_doctype) doctype(&b, &g->document->v.document);
    if (!b.oom) walk(&b, g->document);
    if (!b.oom) flush(&b);
    for (int i = 0; i < b.n_tags; i++) free(b.tags[i].open), free(b.tags[i].close);
    free(b.tags), free(b.open), free(b.text.data);
    if (g) gumbo_destroy_output(&o, g);
    free(src);
    if (b.oom) {
        markup_free(d);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return d;
}

void markup_free(markup_doc *d) {
    if (!d) return;
    for (int i = 0; i < d->n_pieces; i++) free(d->pieces[i].raw);
    for (int i = 0; i < d->n_segs; i++) {
        for (int k = 0; k < d->segs[i].n_tags; k++) free(d->segs[i].tags[k].open), free(d->segs[i].tags[k].close);
        free(d->segs[i].tags);
        free(d->segs[i].text);
    }
    free(d->pieces), free(d->segs), free(d);
}

int markup_segments(const markup_doc *d) { return d->n_segs; }
const markup_segment *markup_segment_at(const markup_doc *d, int i) { return &d->segs[i]; }

char *markup_render(const markup_doc *d, const char *const *translations, const int *const *links,
                    const int *n_links, char *err, size_t errlen) {
    markup_buf out = {0};
    markup_buf_add(&out, "", 0);
    for (int i = 0; i < d->n_pieces && !out.oom; i++) {
        const plan_piece *p = &d->pieces[i];
        if (p->segment < 0) markup_buf_add(&out, p->raw, p->len);
        else if (markup_place(&out, &d->segs[p->segment], translations[p->segment],
                              links ? links[p->segment] : NULL, n_links ? n_links[p->segment] : 0))
            out.oom = 1;
    }
    if (!out.oom && !out.data) out.data = copy("", 0);
    if (out.oom || !out.data) {
        free(out.data);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return out.data;
}
