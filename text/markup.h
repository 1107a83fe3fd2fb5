/* markup: HTML in, the text to translate out, and the translation put back with its tags.
 *
 * markup_parse reads a fragment or a document with gumbo (the HTML5 tree-building rules
 * browsers use, so malformed markup is repaired as a browser would) into an output plan:
 * raw pieces copied as they are (block tags, comments, <script>, <pre>, translate="no", the
 * whitespace between blocks) and segments, the text runs between block boundaries, each with
 * the inline elements (<b>, <a href=...>, <img>...) inside it as byte ranges of its plain
 * text. markup_render writes the plan back with each segment's translation, every inline
 * element around the target words aligned to the source words it covered.
 *
 *   markup_doc *d = markup_parse(html, len, 0, err, sizeof err);
 *   for (int i = 0; i < markup_segments(d); i++) translate markup_segment(d, i)->text;
 *   char *out = markup_render(d, translations, links, n_links, err, sizeof err);
 *
 * Pure functions of their arguments; a doc is read-only after markup_parse. */
#ifndef ATTEND_TEXT_MARKUP_H
#define ATTEND_TEXT_MARKUP_H

#include <stddef.h>

/* An inline element of a segment. Elements come in document order, so a parent comes
 * before its children. */
typedef struct {
    int parent;        /* index of the enclosing inline element, -1: none */
    size_t begin, end; /* the bytes of the segment's text it covers (begin == end: empty) */
    char *open;        /* its start tag as the source wrote it (attributes byte for byte); for a
                        * comment or an untouched element (<code>, translate="no") all of it */
    char *close;       /* "</name>", or NULL for a void element (<img>, <wbr>, a comment) */
    int space_before;  /* whitespace right before it in the source text, */
    int space_after;   /* and right after it: kept around it where it lands between words */
} markup_inline;

/* A run of text between block boundaries: one text to translate. */
typedef struct {
    char *text;        /* plain text, entities decoded, whitespace around it removed */
    size_t len;
    markup_inline *tags;
    int n_tags;
} markup_segment;

typedef struct markup_doc markup_doc;

/* Parse len bytes of HTML (any bytes; invalid UTF-8 is read as U+FFFD, as browsers do): a
 * fragment (document 0: elements the parser implies, <html>, <head>, <body>, are not written
 * back) or a whole document (document 1: its doctype written back too). NULL with err only
 * when out of memory. */
markup_doc *markup_parse(const char *html, size_t len, int document, char *err, size_t errlen);
void markup_free(markup_doc *d);

int markup_segments(const markup_doc *d);
const markup_segment *markup_segment_at(const markup_doc *d, int i);

/* The document with segment i's text replaced by translations[i] and its tags placed by
 * links[i]: n_links[i] pairs (source word, target word) as 2 * n_links[i] ints, words being
 * the whitespace-separated tokens of the segment's text and of the translation (links and
 * n_links may be NULL: no alignment, every tag of the segment then lands at its end). Text
 * is escaped (& < >); every tag of the source comes back, nested and closed. malloc'd, or
 * NULL with err (out of memory). */
char *markup_render(const markup_doc *d, const char *const *translations, const int *const *links,
                    const int *n_links, char *err, size_t errlen);

/* The bytes of the whitespace character at s (ASCII space and controls \t..\r, U+00A0,
 * U+1680, U+2000..200A, U+2028, U+2029, U+202F, U+205F, U+3000), or 0. */
size_t markup_space_at(const char *s, size_t n);

/* Place one segment's tags: the translation's bytes with the tags put in, appended to out
 * (a growing buffer, markup_buf). Exposed for tests. 0 or -1 (out of memory). */
typedef struct {
    char *data;
    size_t len, cap;
    int oom;
} markup_buf;
void markup_buf_add(markup_buf *b, const char *s, size_t n);
void markup_buf_text(markup_buf *b, const char *s, size_t n); /* escaped: & < > */
int markup_place(markup_buf *out, const markup_segment *s, const char *translation, const int *links,
                 int n_links);

#endif
