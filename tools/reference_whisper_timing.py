#!/usr/bin/python3
"""Word times from Whisper's cross-attention, as Hugging Face computes them, written
independently for attend's tests (model/token_times.c is the C side).

Token timestamps: HF's WhisperGenerationMixin._extract_token_timestamps (read in
transformers' generation_whisper.py at commit 79f1fc71): the alignment heads' cross-attention
[heads, rows, frames], cropped to the frames of the audio (num_frames // 2 encoder frames when
num_frames mel frames are given), normalised over the rows (each frame's column: minus its
mean, divided by its population std), a median filter of width 7 along the frames, the mean
over the heads, dynamic time warping over minus that matrix, and each row's first frame on the
path times 0.02 s. Row r is the decoder position that predicted token r + 1 of the sequence
(prompt included), so HF's timestamps[0] is 0 and timestamps[r + 1] is row r's time.

Words: HF's pipeline (tokenization_whisper.py: _combine_tokens_into_words,
_split_tokens_on_unicode, _split_tokens_on_spaces, _merge_punctuations,
_collate_word_timestamps). Its punctuation lists are OpenAI's (timing.py's
prepend_punctuations and append_punctuations), its splitting is HF's: tokens grouped until
they decode to whole characters, a group starting with a space, a punctuation group or a
special token opens a word, then prepended punctuation joins the next word and appended
punctuation the previous one. A word's time runs from its first token's start to its last
token's end; a token's end is the next token's start. Decoding is UTF-8 with U+FFFD for
invalid bytes (WhisperTokenizer's errors="replace"); clean_up_tokenization_spaces is taken
as off."""
import numpy as np
import torch

MEDIAN_WIDTH = 7        # WhisperConfig.median_filter_width
TIME_PRECISION = 0.02   # seconds per encoder frame
PREPENDED = "\"'“¡¿([{-"
APPENDED = "\"'.。,，!！?？:：”)]}、"
ASCII_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
# languages written without spaces: words split at character boundaries only
UNICODE_SPLIT = {"zh", "ja", "th", "lo", "my", "yue"}


# --------------------------------------------------------------------------------------
# Token timestamps

def median_filter(x, width=MEDIAN_WIDTH):
    """HF's _median_filter: along the last axis, edges padded by reflection, the middle of
    each sorted window (torch sorts NaN after every number). Unchanged when the last axis has
    width // 2 values or fewer."""
    if width <= 0 or width % 2 != 1:
        raise ValueError("the median filter's width must be an odd number")
    x = torch.as_tensor(x)
    pad = width // 2
    if x.shape[-1] <= pad:
        return x
    shape = x.shape
    flat = x.reshape(1, -1, shape[-1])  # reflect padding wants [batch, channels, length]
    padded = torch.nn.functional.pad(flat, (pad, pad), mode="reflect").reshape(*shape[:-1], shape[-1] + 2 * pad)
    return padded.unfold(-1, width, 1).sort()[0][..., pad]


def dtw(matrix):
    """HF's _dynamic_time_warping of a cost matrix [rows, cols] (float64): cumulative costs
    in float32, each cell taking the diagonal only when it is strictly the smallest of the
    three, else the upper cell when it is strictly the smallest, else the left cell (so ties,
    and NaN, go left); the path traced back from the corner. Returns (row indices, column
    indices) along the path, from the start."""
    m = np.asarray(matrix, dtype=np.float64)
    rows, cols = m.shape
    cost = np.full((rows + 1, cols + 1), np.inf, dtype=np.float32)
    trace = -np.ones((rows + 1, cols + 1), dtype=np.float32)
    cost[0, 0] = 0
    with np.errstate(invalid="ignore"):  # NaN costs (columns of equal rows) are HF's too
        for j in range(1, cols + 1):
            for i in range(1, rows + 1):
                c0, c1, c2 = cost[i - 1, j - 1], cost[i - 1, j], cost[i, j - 1]
                if c0 < c1 and c0 < c2:
                    c, t = c0, 0
                elif c1 < c0 and c1 < c2:
                    c, t = c1, 1
                else:
                    c, t = c2, 2
                cost[i, j] = m[i - 1, j - 1] + c  # a float64 sum stored as float32, as numpy does
                trace[i, j] = t
    trace[0, :] = 2
    trace[:, 0] = 1
    i, j = rows, cols
    text, time = [], []
    while i > 0 or j > 0:
        text.append(i - 1)
        time.append(j - 1)
        t = trace[i, j]
        if t == 0:
            i, j = i - 1, j - 1
        elif t == 1:
            i -= 1
        else:
            j -= 1
    return np.array(text[::-1]), np.array(time[::-1])


def alignment_weights(cross, alignment_heads):
    """The alignment heads' rows out of every layer's cross-attention cross [L, H, rows, S]
    -> [len(alignment_heads), rows, S] (HF stacks cross_attentions[l][:, h] in the order of
    generation_config.alignment_heads)."""
    cross = torch.as_tensor(cross)
    return torch.stack([cross[layer, head] for layer, head in alignment_heads])


def alignment_matrix(weights, num_frames=None, width=MEDIAN_WIDTH):
    """The matrix DTW runs on (before its sign flip): weights [heads, rows, S] float32,
    cropped to num_frames // 2 columns, normalised per column over the rows (population
    std: unbiased=False), median-filtered along the columns, averaged over the heads."""
    w = torch.as_tensor(weights, dtype=torch.float32)
    if num_frames is not None:
        w = w[..., : num_frames // 2]
    std = torch.std(w, dim=-2, keepdim=True, unbiased=False)
    mean = torch.mean(w, dim=-2, keepdim=True)
    w = (w - mean) / std  # a column with one row, or equal rows, gives NaN (0 / 0) as in HF
    return median_filter(w, width).mean(dim=0)


def token_timestamps(weights, num_frames=None, width=MEDIAN_WIDTH, precision=TIME_PRECISION):
    """HF's timestamps of one sequence: float32 [rows + 1], 0 first, then for each row the
    time of its first column on the DTW path (column * precision)."""
    matrix = alignment_matrix(weights, num_frames, width)
    text, time = dtw(-matrix.double().numpy())
    jumps = np.pad(np.diff(text), (1, 0), constant_values=1).astype(bool)
    out = np.zeros(matrix.shape[0] + 1, dtype=np.float32)
    out[1:] = time[jumps] * precision
    return out


# --------------------------------------------------------------------------------------
# Words

def decode(data):
    """Bytes as WhisperTokenizer decodes them: UTF-8, U+FFFD for each invalid stretch."""
    return bytes(data).decode("utf-8", errors="replace")


def split_on_unicode(token_bytes):
    """HF's _split_tokens_on_unicode over the tokens' bytes: (texts, index lists). A group
    closes when its text has no U+FFFD, or its first U+FFFD stands at a place where the whole
    text has one too (the bytes are invalid in any case); tokens still open at the end are
    dropped, as HF drops them."""
    full = decode(b"".join(token_bytes))
    words, indices, current, offset = [], [], [], 0
    for k in range(len(token_bytes)):
        current.append(k)
        text = decode(b"".join(token_bytes[i] for i in current))
        bad = text.find("\ufffd")
        if bad < 0 or offset + bad >= len(full) or full[offset + bad] == "\ufffd":
            words.append(text)
            indices.append(current)
            current = []
            offset += len(text)
    return words, indices


def split_on_spaces(token_bytes, special=None):
    """HF's _split_tokens_on_spaces: the unicode groups, each opening a new word when it is a
    special token (special[k] true for its first token), starts with a space, or is
    punctuation once stripped (a piece of ASCII_PUNCTUATION, the empty string included)."""
    groups, group_indices = split_on_unicode(token_bytes)
    words, indices = [], []
    for text, idx in zip(groups, group_indices):
        opens = (special is not None and special[idx[0]]) or text.startswith(" ") or \
            text.strip() in ASCII_PUNCTUATION or not words
        if opens:
            words.append(text)
            indices.append(list(idx))
        else:
            words[-1] += text
            indices[-1].extend(idx)
    return words, indices


def merge_punctuations(words, indices, prepended=PREPENDED, appended=APPENDED):
    """HF's _merge_punctuations, in place: from the end, a word that starts with a space and
    is (a piece of) prepended once stripped joins the word after it; from the start, a word
    that is (a piece of) appended joins the word before it unless that one ends with a
    space; emptied words go."""
    i, j = len(words) - 2, len(words) - 1
    while i >= 0:
        if words[i].startswith(" ") and words[i].strip() in prepended:
            words[j] = words[i] + words[j]
            indices[j] = indices[i] + indices[j]
            words[i], indices[i] = "", []
        else:
            j = i
        i -= 1
    i, j = 0, 1
    while j < len(words):
        if not words[i].endswith(" ") and words[j] in appended:
            words[i] += words[j]
            indices[i] += indices[j]
            words[j], indices[j] = "", []
        else:
            i = j
        j += 1
    keep = [k for k in range(len(words)) if indices[k]]
    words[:] = [words[k] for k in keep]
    indices[:] = [indices[k] for k in keep]


def combine_into_words(token_bytes, language="en", special=None):
    """HF's _combine_tokens_into_words: (words, token index lists) of a sequence of tokens
    given as bytes. language: a code; those in UNICODE_SPLIT split at characters only."""
    if language in UNICODE_SPLIT:
        words, indices = split_on_unicode(token_bytes)
    else:
        words, indices = split_on_spaces(token_bytes, special)
    merge_punctuations(words, indices)
    return words, indices


def word_times(token_bytes, starts, ends, language="en"):
    """HF's _collate_word_timestamps: [{word, start, end, tokens: [first, last + 1)}] with
    start the first token's start and end the last token's end."""
    words, indices = combine_into_words(token_bytes, language)
    return [{"word": w, "start": float(starts[idx[0]]), "end": float(ends[idx[-1]]),
             "tokens": [idx[0], idx[-1] + 1]} for w, idx in zip(words, indices)]
