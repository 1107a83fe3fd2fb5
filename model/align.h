/* align: reduce cross-attention to a view, merge pieces into words, and read off hard word
 * alignments in Pharaoh format. Works on the raw matrices attend_translate returns
 * (attend_result.cross, [layers, heads, n_tgt, n_src]); nothing is reduced before asked.
 *
 *   attend_view v;
 *   if (attend_view_parse("penultimate:avg", &v, err, sizeof err)) ...;
 *   char *pharaoh = attend_alignment(&result, attend_get_config(m), &v, err, sizeof err);
 *   printf("%s ||| %s\n", result.text, pharaoh);    // "0-0 1-2 2-1"
 *   free(pharaoh);
 *
 * Views (layers and heads are 0-based; "last" = decoder_layers-1, "penultimate" = one before;
 * the default is the model's own, see ATTEND_ALIGNMENT_VIEW_KEY):
 *   last:0          head 0 of the last decoder layer. OPUS-MT transformer-align models are
 *                   trained with guided alignment on exactly this head (Marian's
 *                   --guided-alignment, alignment head = head 0 of the last layer), and it is
 *                   what Marian (--alignment) and CTranslate2 (return_attention) report.
 *   penultimate:avg the average of all heads of the second-to-last layer: Garg et al. 2019,
 *                   "Jointly Learning to Align and Translate with Transformer Models" (EMNLP),
 *                   found the penultimate layer's averaged attention aligns best.
 *   L:avg,shift     layer L averaged, read one step later: Chen et al. 2020, "Accurate Word
 *                   Alignment Induction from Neural Machine Translation" (EMNLP, "Shift-Att").
 *                   Row t of the cross-attention is computed while the decoder reads y_{t-1}
 *                   and predicts y_t; shift-att aligns y_t with the row where y_t is the
 *                   decoder's input, i.e. row t+1. The last target token has no such row and
 *                   gets no alignment (it is normally </s>, which is never aligned anyway).
 *   all:avg         the average over every layer and head.
 *   L:H[,L:H...]    explicit heads; several items are averaged. An item "L:avg" stands for
 *                   all heads of L; "all:H" for head H of every layer. "shift" may be added
 *                   as an item to any view. Each (layer, head) pair counts once.
 *   ...,words       the item "words" reads links off whole words (below): the weight of a
 *                   (target word, source word) pair is the sum over both words' pieces.
 *   ...,mutual      link a row and a column only when each is the other's largest weight
 *                   (mutual argmax: SimAlign's "ArgMax", Jalili Sabet et al. 2020), so rows
 *                   may stay unlinked; without it every row links to its largest column.
 *   ...,grow        mutual, then grown as grow-diag grows the intersection of two
 *                   directions (Koehn et al. 2005), the view's rows and columns standing for
 *                   the two directions: a neighbour of a link (eight around it) joins when
 *                   it holds more than half of its row's or of its column's weight and its
 *                   row or column has no link yet; repeated until none joins.
 *
 * Hard alignment: links are read off a grid, pieces (rows: target pieces, columns: source
 * pieces) or with "words" whole words; </s> and other special tokens are in neither (attention
 * mass parked on </s> is ignored). By default each row (target piece or word) links to the
 * column with its highest weight, so every real target piece gets exactly one link; "mutual"
 * and "grow" choose as above. Pieces merge into words at SentencePiece's "▁" word-start
 * marker; two words are aligned if any of their pieces are. Pharaoh output: "i-j" with i the 0-based source word and j the
 * 0-based target word, sorted by i then j.
 *
 * Thread safety: all functions are pure; no shared state. */
#ifndef ATTEND_ALIGN_H
#define ATTEND_ALIGN_H

#include <stddef.h>

#include "attend.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTEND_VIEW_MAX 64
/* The longest view text a model file may record, NUL included. */
#define ATTEND_VIEW_TEXT_MAX 512

/* How a model file says how to align it: this metadata key holds a view in the syntax below
 * (written by `attend align --calibrate` or by training; checked against the model's layers
 * and heads when the file loads). attend_config.alignment_view is the view in use: the
 * file's, else attend_default_view's. A view given explicitly always wins. */
#define ATTEND_ALIGNMENT_VIEW_KEY "attend.alignment.view"
/* The prefix of a trained alignment head's keys (.layer, .width) and tensors (align_head.q.weight
 * ...; weights/FORMAT.md): a view names the head as the item `align`. */
#define ATTEND_ALIGN_HEAD_KEY "attend.align_head"
#define ATTEND_ALIGN_HEAD_TENSORS "align_head"

/* The default view of a model whose file records none, for L decoder layers: "all:avg,grow",
 * every head of every layer averaged, links read by "grow", whatever L. Without a head
 * trained to align, no single layer is known to align; the average was better than last:0 on
 * every trained model measured (the shipped one and two earlier ones, 3 and 5 decoder layers),
 * where a fixed shifted layer (Shift-Att's lower-middle one) was best on one model and worst
 * on another, and "grow" improved the average on all three (AER 0.43 / 0.52 / 0.69 against
 * all:avg's 0.50 / 0.56 / 0.71 and last:0's 0.61 / 0.63 / 0.75, docs/alignment-and-attention.md).
 * Writes the text into buf. */
ATTEND_API void attend_default_view(int L, char *buf, size_t n);

/* Copy the model file in_path to out_path with view recorded under ATTEND_ALIGNMENT_VIEW_KEY
 * (replacing one already there; written as attend_view_name writes it). The input is checked
 * as attend_load checks it, and the view against its layers and heads; tensors and the other
 * keys are copied as they are. 0, or ATTEND_E_USAGE (a bad view), ATTEND_E_MODEL (input not a
 * valid model), ATTEND_E_MEMORY or ATTEND_E_IO (writing) with err. */
ATTEND_API int attend_record_view(const char *in_path, const char *out_path, const char *view, char *err,
                                  size_t errlen);

/* Symbolic layers (and the one symbolic head) a view item may name before it is resolved
 * against a model's sizes. Non-negative values are plain 0-based indices. */
enum { ATTEND_LAYER_LAST = -1, ATTEND_LAYER_PENULTIMATE = -2, ATTEND_LAYER_ALL = -3 };
/* A view's layer (an index, ATTEND_LAYER_LAST / _PENULTIMATE, or counted from the end) as an
 * index into L decoder layers; -1 when it names none (ATTEND_LAYER_ALL included). */
ATTEND_API int attend_resolve_layer(int layer, int L);
enum { ATTEND_HEAD_AVG = -1 };
/* attend_view.links: each row's argmax (the default), mutual argmax, or mutual grown
 * ("mutual" and "grow" in a view's text). */
enum { ATTEND_LINKS_ARGMAX = 0, ATTEND_LINKS_MUTUAL = 1, ATTEND_LINKS_GROW = 2 };

typedef struct {
    int n;                              /* items */
    int layer[ATTEND_VIEW_MAX];         /* index, or ATTEND_LAYER_* */
    int head[ATTEND_VIEW_MAX];          /* index, or ATTEND_HEAD_AVG */
    int shift;                          /* read row t+1 for target token t (shift-att) */
    int words;                          /* align whole words: sum the weights of their pieces */
    int links;                          /* how links are read off: ATTEND_LINKS_* */
    int align;                          /* the item `align`: the file's trained alignment head
                                         * (attend_result.align_head), averaged with the items */
} attend_view;

/* Parse a view ("last:0", "penultimate:avg", "3:avg,shift", "4:1,5:0", "all:avg"). 0, or -1
 * with err. Layer indices may also be negative (-1 = last). */
ATTEND_API int attend_view_parse(const char *spec, attend_view *v, char *err, size_t errlen);
/* A view for one head of one layer (head may be ATTEND_HEAD_AVG). */
ATTEND_API attend_view attend_view_single(int layer, int head);
/* Write the view back as text ("5:0", "penultimate:avg,shift") into buf. */
ATTEND_API void attend_view_name(const attend_view *v, char *buf, size_t n);

/* Check that every layer and head v names exists in a model of L decoder layers and H
 * heads, and that its link rule is one of ATTEND_LINKS_*. 0, or -1 with err. */
ATTEND_API int attend_view_check(const attend_view *v, int L, int H, char *err, size_t errlen);

/* Reduce cross [L, H, T, S] to out [T, S]: the mean of the selected heads, shifted if asked
 * (the shifted view's last row is all zero). 0, or -1 with err when a layer or head does
 * not exist in a model of L layers and H heads. */
ATTEND_API int attend_view_reduce(const attend_view *v, const float *cross, int L, int H, int T, int S,
                       float *out, char *err, size_t errlen);
/* The same with the trained alignment head's rows head [T, S] (attend_result.align_head) as
 * one more item when v->align (then head must not be NULL; -1 with err). */
ATTEND_API int attend_view_reduce_head(const attend_view *v, const float *cross, const float *head, int L, int H,
                                       int T, int S, float *out, char *err, size_t errlen);

/* Pieces -> words. word_of[p] is the word of piece p, or -1 for pieces that belong to no
 * word (</s>, <pad>, <s>, <mask> and language tokens: mBART-50's `de_DE`, M2M-100's
 * `__de__`). words[w] is the word's text with "▁" removed. */
typedef struct {
    int n_pieces, n_words;
    int *word_of;  /* [n_pieces] */
    char **words;  /* [n_words] */
} attend_words;

/* Fill w from n pieces. 0, or -1 when out of memory. Free with attend_words_free. */
ATTEND_API int attend_words_from_pieces(const char *const *pieces, int n, attend_words *w);
ATTEND_API void attend_words_free(attend_words *w);

/* For each target piece t: the source piece with the largest weight in row t of A [T, S]
 * among source pieces that belong to a word, or -1 when t belongs to no word or its row is
 * all zero (or there is no source word). best[T] is written. */
ATTEND_API void attend_align_argmax(const float *A, int T, int S, const attend_words *src,
                         const attend_words *tgt, int *best);

/* best[] as view v says: attend_align_argmax, or with v->words, for each target word the
 * source word with the largest sum of weights over both words' pieces (ties to the first),
 * each of the target word's pieces pointing at that source word's first piece. 0, or -1 when
 * out of memory. */
ATTEND_API int attend_view_best(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                                const attend_words *tgt, int *best);

/* Word links from per-piece argmaxes: a sorted, duplicate-free list of (src word, tgt word)
 * pairs, written to links as 2*k ints. Returns k (links must hold 2*T ints). */
ATTEND_API int attend_align_links(const int *best, int T, const attend_words *src, const attend_words *tgt,
                       int *links);

/* The word links of view v read off A [T, S] (v->words: per word; v->links: argmax, mutual
 * or grow; see the top of this file): *links is a malloc'd, sorted, duplicate-free list of
 * (src word, tgt word) pairs, 2*k ints (free it). Returns k, or -1 when out of memory. */
ATTEND_API int attend_view_links(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                                 const attend_words *tgt, int **links);

/* Word links two translation directions agree on (issue 38). A [T, S] is a forward model's
 * view of a pair (rows: target pieces tgt, columns: source pieces src); B [T2, S2] a reverse
 * model's view of the same pair the other way round (rows: its target pieces rtgt, the forward
 * source's text; columns: its source pieces rsrc, the forward target's). Each is summed to
 * words and row-normalised (P(source word | target word), P(target word | source word)); their
 * sum is read as v->links says (argmax, mutual or grow; v's items are not used). Returns k and
 * *links as attend_view_links does, -1 when out of memory, -2 when the two models split the
 * text into different numbers of words (no links then). */
ATTEND_API int attend_links_both(const attend_view *v, const float *A, int T, int S, const attend_words *src,
                                 const attend_words *tgt, const float *B, int T2, int S2,
                                 const attend_words *rsrc, const attend_words *rtgt, int **links);

/* Word-level view [tgt words, src words]: a target word's row is the mean of its pieces'
 * rows; a source word's column is the sum of its pieces' columns (so rows still sum to at
 * most 1). out must hold tgt->n_words * src->n_words floats. */
ATTEND_API void attend_words_matrix(const float *A, int T, int S, const attend_words *src,
                         const attend_words *tgt, float *out);

/* Pharaoh text "0-0 1-2" for k links (malloc'd; "" for none). NULL when out of memory. */
ATTEND_API char *attend_pharaoh(const int *links, int k);

/* All of the above for one translated sentence: the Pharaoh alignment of r under view v
 * (NULL: c->alignment_view, the model's own). r must have been translated with
 * want_attention. malloc'd string, or NULL with err. */
ATTEND_API char *attend_alignment(const attend_result *r, const attend_config *c, const attend_view *v,
                       char *err, size_t errlen);

/* The same for two results of one pair (issue 38): r from a forward model (view v, NULL: its
 * own), rr from a reverse model that read r's target as its source and r's source as its
 * target (view rv, NULL: its own); the links are attend_links_both's, read as v says. NULL with
 * err when the two models split the text into different words, or out of memory. */
ATTEND_API char *attend_alignment_both(const attend_result *r, const attend_config *c, const attend_view *v,
                                       const attend_result *rr, const attend_config *rc, const attend_view *rv,
                                       char *err, size_t errlen);
/* attend_alignment_both's links themselves, as attend_view_links gives them for one view:
 * *links a malloc'd, sorted, duplicate-free list of (src word, tgt word) pairs, 2*k ints (free
 * it). Returns k, or -1 with err (and *links NULL). */
ATTEND_API int attend_alignment_both_links(const attend_result *r, const attend_config *c, const attend_view *v,
                                           const attend_result *rr, const attend_config *rc,
                                           const attend_view *rv, int **links, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
