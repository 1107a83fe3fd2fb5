#!/usr/bin/python3
"""Whisper's generation as Hugging Face's WhisperForConditionalGeneration.generate() runs it,
written independently for attend's tests on top of reference_whisper.py's forward pass.

Read from transformers' generation_whisper.py at commit 79f1fc71 (the version with
time_precision_features) and logits_process.py; each rule below names the HF function it
follows. Batch size 1, no KV cache (every step recomputes the decoder over the whole prefix).

- The decoder prompt (_retrieve_init_tokens): <|startoftranscript|>, then for multilingual
  models the language (given, or detected on the first window: detect_language, the
  likeliest language token at the first step), the task when one is given (or, with a
  language given and no task, <|transcribe|>; forced_decoder_ids of the generation config
  fill both as HF reads them), and <|notimestamps|> unless timestamps are asked for.
  Note: with neither language nor task given and no forced_decoder_ids in the config, HF adds
  no task token at all; pass task="transcribe" to get it.
- The logits processors, in HF's order (_retrieve_logit_processors prepends each):
  WhisperNoSpeechDetection (observes only), SuppressTokensAtBegin (only when the input holds
  begin_index ids), SuppressTokens, WhisperTimeStampLogitsProcessor (with timestamps).
  Sampling (temperature > 0) adds HF's warpers after them: temperature, then top-k 50
  (GenerationConfig's default top_k).
- Searches: greedy (argmax of the processed logits), sampling, and beam search with HF's
  bookkeeping (reference.py's beam_step and BeamHypotheses: log_softmax, the processors on the
  log-probabilities, 2 * num_beams candidates, length_penalty 1.0 and early_stopping False as
  Whisper's generation config leaves them). The cross-attention of a result is the decoder's
  rows along its own path (the prompt's rows, then one per generated token but the last):
  with beams this is the chosen hypothesis teacher-forced. HF's _extract_token_timestamps
  instead picks row P-1+k from the beam that produced token k-1 (its beam_indices shifted by
  the prompt length P) and keeps one row more; attend takes the path's own rows.
- Long-form audio (> 3000 frames) and every call: HF's loop over windows with its seek rule
  (_retrieve_segment): segments cut after each pair of consecutive timestamp tokens; a window
  ending in a single timestamp is done whole (seek += its frames); otherwise seek moves to the
  first timestamp of the last pair (2 frames per timestamp step) and what follows is decoded
  again; a window without a pair is one segment to its last timestamp (or to its end), and
  seek moves past the whole window. OpenAI's transcribe() differs: it seeks to the last pair's
  timestamp as well but clips windows differently (clip_timestamps, the 'last speech
  timestamp' with word timestamps, and a window's last single timestamp as the segment end),
  and decodes with a beam search that has patience and best_of sampling. This file follows HF.
- Temperature fallback (generate_with_fallback, _need_fallback): each temperature in turn
  while the window's zlib compression ratio of its token ids (2 bytes each, little-endian)
  is above compression_ratio_threshold or its average log-probability (HF's
  _retrieve_avg_logprobs: log_softmax of the recorded scores times the temperature, the end
  token counted) is below logprob_threshold; a window whose average is below that threshold
  and whose no-speech probability (softmax of the raw logits at <|startoftranscript|>, token
  <|nospeech|> = <|notimestamps|> - 1) is above no_speech_threshold is skipped. With
  condition_on_prev_tokens the decoder input starts with <|startofprev|> (the config's
  prev_sot_token_id, else HF's suppress_tokens[-2]) and the last 223 tokens of the segments
  so far (a segment ending in two timestamps loses its last one for good, as HF edits it).
- Token timestamps and words: reference_whisper_timing.py.

Command line: reference_whisper_generate.py CHECKPOINT FEATURES.npy [options] prints one JSON
object: language, prompt, tokens (HF's sequences: the segments' tokens end to end), text,
segments (id, seek, start, end, tokens, text, avg_logprob, no_speech_prob, temperature,
compression_ratio, and token_times with --token-timestamps), windows (what each call of the
search produced: seek, frames, prompt, tokens, logprobs, token_timestamps) and words with
--word-timestamps."""
import argparse
import json
import math
import os
import sys
import zlib
from dataclasses import dataclass, field

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as B  # noqa: E402  (HF's beam search bookkeeping)
import reference_whisper as W  # noqa: E402
import reference_whisper_timing as TT  # noqa: E402

INPUT_STRIDE = 2        # conv1 stride * conv2 stride: mel frames per encoder frame
TIME_PRECISION = 0.02   # seconds per timestamp step
FRAME_SECONDS = 0.01    # seconds per mel frame (HF's time_precision_features)
NEG_INF = float("-inf")


# --------------------------------------------------------------------------------------
# Settings from the checkpoint

@dataclass
class Settings:
    """What generate() reads from config.json and generation_config.json."""
    eot: int
    sot: int
    no_timestamps: int
    timestamp_begin: int
    suppress: list
    begin_suppress: list
    max_initial_timestamp_index: object
    max_length: int
    lang_to_id: dict
    task_to_id: dict
    alignment_heads: list
    median_filter_width: int
    vocab_size: int
    max_target_positions: int
    forced_decoder_ids: object = None
    prev_sot: object = None
    id_to_lang: dict = field(default_factory=dict)

    @property
    def nospeech(self):
        return self.no_timestamps - 1  # WhisperNoSpeechDetection's no_speech_token


def settings_of(config, gen):
    """Settings from a config dict and a generation_config dict (HF's key names)."""
    multilingual = gen.get("is_multilingual", config["vocab_size"] >= 51865) and "lang_to_id" in gen
    suppress = list(gen.get("suppress_tokens") or [])
    prev_sot = gen.get("prev_sot_token_id")
    if prev_sot is None and len(suppress) >= 2:
        prev_sot = suppress[-2]  # HF's fallback in _prepare_decoder_input_ids
    lang_to_id = dict(gen.get("lang_to_id", {})) if multilingual else {}
    return Settings(
        eot=gen["eos_token_id"], sot=gen["decoder_start_token_id"], no_timestamps=gen["no_timestamps_token_id"],
        timestamp_begin=gen["no_timestamps_token_id"] + 1, suppress=suppress,
        begin_suppress=list(gen.get("begin_suppress_tokens") or []),
        max_initial_timestamp_index=gen.get("max_initial_timestamp_index"),
        max_length=int(gen.get("max_length", config["max_target_positions"])), lang_to_id=lang_to_id,
        task_to_id=dict(gen.get("task_to_id", {})) if multilingual else {},
        alignment_heads=[list(h) for h in gen.get("alignment_heads", [])],
        median_filter_width=int(config.get("median_filter_width", TT.MEDIAN_WIDTH)),
        vocab_size=config["vocab_size"], max_target_positions=config["max_target_positions"],
        forced_decoder_ids=gen.get("forced_decoder_ids"), prev_sot=prev_sot,
        id_to_lang={v: k.strip("<|>") for k, v in lang_to_id.items()})


def gpt2_byte_decoder():
    """Byte-level BPE's character -> byte map (the inverse of GPT-2's bytes_to_unicode)."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    out, k = {}, 0
    for b in range(256):
        if b in keep:
            out[chr(b)] = b
        else:
            out[chr(256 + k)] = b
            k += 1
    return out


def token_bytes_table(path):
    """id -> bytes of an HF Whisper tokenizer folder: vocab.json's byte-level pieces as their
    bytes, added tokens (added_tokens.json) as their text."""
    dec = gpt2_byte_decoder()
    table = {}
    with open(os.path.join(path, "vocab.json"), encoding="utf-8") as f:
        for piece, i in json.load(f).items():
            table[i] = bytes(dec[c] for c in piece) if all(c in dec for c in piece) else piece.encode()
    added = os.path.join(path, "added_tokens.json")
    if os.path.exists(added):
        with open(added, encoding="utf-8") as f:
            for piece, i in json.load(f).items():
                table[i] = piece.encode()
    return table


def cache_cross_projections(model):
    """Speed only: each decoder layer's cross-attention keys and values are computed once per
    encoder output (the same tensor object) instead of at every step. Returns model."""
    def cached(linear):
        plain, memo = linear.forward, {}

        def forward(x):
            if memo.get("x") is not x:
                memo["x"], memo["y"] = x, plain(x)
            return memo["y"]
        linear.forward = forward

    for layer in model.model.decoder.layers:
        cached(layer.encoder_attn.k_proj)
        cached(layer.encoder_attn.v_proj)
    return model


def load(path):
    """(model, Settings, token bytes table) of an HF Whisper checkpoint folder."""
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(path, "generation_config.json")) as f:
        gen = json.load(f)
    return cache_cross_projections(W.load_checkpoint(path)), \
        settings_of(dict(W.WHISPER_DEFAULT_CONFIG, **config), gen), token_bytes_table(path)


# --------------------------------------------------------------------------------------
# The decoder prompt and language detection

@torch.no_grad()
def detect_language(model, s, window):
    """HF's detect_language: the logits after <|startoftranscript|> on one window, every
    token but the languages at -inf, the argmax (the first on ties)."""
    logits = model.decode(model.encode(window), [s.sot])[0][-1].clone()
    keep = torch.zeros_like(logits, dtype=torch.bool)
    keep[list(s.lang_to_id.values())] = True
    logits[~keep] = NEG_INF
    return int(torch.argmax(logits))


def language_id(s, language):
    """A language given as "de", "<|de|>" (HF also takes names; attend passes codes)."""
    token = language if language.startswith("<|") else f"<|{language.lower()}|>"
    if token not in s.lang_to_id:
        raise ValueError(f"{language} is not one of this model's languages")
    return s.lang_to_id[token]


def init_tokens(s, language=None, task=None, timestamps=False, detect=None):
    """HF's _retrieve_init_tokens for one input. detect() gives the language id when none is
    given and the model has languages. English-only models take neither language nor task."""
    if not s.lang_to_id and (language or task):
        raise ValueError("Cannot specify `task` or `language` for an English-only model")
    forced = s.forced_decoder_ids if language is None and task is None else None
    tokens = [s.sot]
    for k, (pos, tok) in enumerate(forced or []):
        if pos != k + 1:
            raise ValueError("forced_decoder_ids do not follow Whisper's prompt pattern")
        tokens.append(tok)
    lang_undefined = len(tokens) <= 1 or tokens[1] is None
    lang = None
    if language is not None:
        lang = language_id(s, language)
    elif s.lang_to_id and lang_undefined:
        lang = detect()
    if lang is not None:
        if len(tokens) > 1:
            tokens[1] = lang
        else:
            tokens.append(lang)
    if task is not None:
        tokens.append(s.task_to_id[task])  # HF appends; its replace_or_add result is dropped
    elif language is not None and s.task_to_id and not any(t in tokens for t in s.task_to_id.values()):
        tokens.append(s.task_to_id["transcribe"])
    if not timestamps and tokens[-1] != s.no_timestamps:
        tokens.append(s.no_timestamps)
    elif timestamps and tokens[-1] == s.no_timestamps:
        tokens = tokens[:-1]
    return [t for t in tokens if t is not None]


# --------------------------------------------------------------------------------------
# Logits processors

def timestamp_rules(s, ids, begin_index, scores):
    """HF's WhisperTimeStampLogitsProcessor on one row (scores: 1-D, changed in place)."""
    tb = s.timestamp_begin
    scores[s.no_timestamps] = NEG_INF            # <|notimestamps|> is the prompt's business
    seq = ids[begin_index:]
    last_ts = len(seq) >= 1 and seq[-1] >= tb
    penultimate_ts = len(seq) < 2 or seq[-2] >= tb
    if last_ts:
        if penultimate_ts:
            scores[tb:] = NEG_INF                # a pair (or the first) closed: text next
        else:
            scores[: s.eot] = NEG_INF            # an opening timestamp: no text next
    stamps = [t for t in seq if t >= tb]
    if stamps:
        # timestamps never decrease; after a pair (or text) the same one is not repeated
        last = stamps[-1] if last_ts and not penultimate_ts else stamps[-1] + 1
        scores[tb:last] = NEG_INF
    if len(ids) == begin_index:                  # the first token is a timestamp, at most max_initial
        scores[:tb] = NEG_INF
        if s.max_initial_timestamp_index is not None:
            scores[tb + s.max_initial_timestamp_index + 1:] = NEG_INF
    logprobs = torch.log_softmax(scores.float(), dim=-1)
    if logprobs[tb:].logsumexp(dim=-1) > logprobs[:tb].max():
        scores[:tb] = NEG_INF                    # all timestamps together beat every other token
    return scores


class Processors:
    """HF's Whisper logits processors for one window, in HF's order."""

    def __init__(self, s, begin_index, timestamps):
        self.s, self.begin_index, self.timestamps = s, begin_index, timestamps

    def __call__(self, ids, scores):
        """Processed copy of one row of scores (raw logits, or log-probabilities in beam
        search) given the decoder input ids so far."""
        s = self.s
        out = scores.clone()
        # WhisperNoSpeechDetection would run here: it only reads (see no_speech_prob)
        if len(ids) == self.begin_index and s.begin_suppress:  # SuppressTokensAtBegin
            out[s.begin_suppress] = NEG_INF
        if s.suppress:                                         # SuppressTokens
            out[s.suppress] = NEG_INF
        if self.timestamps:                                    # WhisperTimeStampLogitsProcessor
            timestamp_rules(s, ids, self.begin_index, out)
        return out


def warp(scores, temperature, top_k=50):
    """HF's sampling warpers after the processors: divide by the temperature, then keep the
    top_k scores (ties at the k-th kept), the rest -inf."""
    scores = scores / temperature
    k = min(top_k, scores.shape[-1])
    kth = torch.topk(scores, k)[0][-1]
    return scores.masked_fill(scores < kth, NEG_INF)


# --------------------------------------------------------------------------------------
# Searches

@dataclass
class Search:
    tokens: list            # generated ids, <|endoftext|> last when the output ended
    scores: list            # per generated token, the row of scores HF records for it
    score: float = 0.0      # beams: HF's sequence score; else the sum of log-probabilities


@torch.no_grad()
def last_logits(model, memory, ids):
    """The logits [V] after ids (the decoder over the whole prefix; the output projection on
    the last position only)."""
    states = model.decode(memory, ids, states=True)[0]
    return states[-1] @ model.model.decoder.embed_tokens.weight.T


@torch.no_grad()
def greedy_or_sample(model, memory, prompt, procs, max_length, eot, temperature=0.0, generator=None):
    """HF's greedy search (argmax, first on ties) or, with a temperature, its sampling
    (torch.multinomial over the warped scores); until <|endoftext|> or max_length ids."""
    ids, scores = list(prompt), []
    while len(ids) < max_length:
        row = procs(ids, last_logits(model, memory, ids))
        if temperature > 0:
            row = warp(row, temperature)
            tok = int(torch.multinomial(torch.softmax(row, dim=-1), 1, generator=generator))
        else:
            tok = int(torch.argmax(row))
        scores.append(row)
        ids.append(tok)
        if tok == eot:
            break
    logp = sum(float(torch.log_softmax(r, -1)[t]) for r, t in zip(scores, ids[len(prompt):]))
    return Search(ids[len(prompt):], scores, logp)


@torch.no_grad()
def beam_search(model, memory, prompt, procs, num_beams, max_length, eot, length_penalty=1.0,
                early_stopping=False):
    """HF's beam search for Whisper: each beam's log_softmax through the processors, then
    reference.py's beam_step (HF's candidates, finished hypotheses and stopping rule). The
    result's scores are the processed log-probabilities of the beam each token came from."""
    nb = int(num_beams)
    ties = B.NearTies()
    hyps = B.BeamHypotheses(nb, length_penalty, B.parse_early_stopping(early_stopping), max_length, ties,
                            len(prompt))
    beams = [list(prompt) for _ in range(nb)]
    running = torch.full((nb,), -1e9, dtype=torch.float32)
    running[0] = 0.0
    history = [[] for _ in range(nb)]
    steps, done = [], False
    while True:
        logp = torch.stack([torch.log_softmax(last_logits(model, memory, b), -1) for b in beams])
        logp = torch.stack([procs(b, logp[k]) for k, b in enumerate(beams)])
        steps.append(logp)
        beams, history, running, done = B.beam_step(logp, running, beams, eot, hyps, ties,
                                                    f"step {len(steps)}", history)
        if done or len(beams[0]) >= max_length:
            break
    if not done:
        for b in range(nb):
            hyps.add(beams[b][1:], float(running[b]), generated_len=len(beams[b]) - len(prompt),
                     beam_indices=history[b])
    score, ids, path, _ = hyps.best(1)[0]
    tokens = list(ids[len(prompt) - 1:])  # hypotheses hold the ids after the first
    return Search(tokens, [steps[k][b] for k, b in enumerate(path[: len(tokens)])], score)


@torch.no_grad()
def path_cross_attention(model, memory, ids):
    """Every layer's cross-attention rows [L, H, len(ids) - 1, S] of a decoded sequence
    (prompt + generated): the rows that predicted ids[1:]."""
    return model.decode(memory, ids[:-1])[2]


# --------------------------------------------------------------------------------------
# One window with temperature fallback

def compression_ratio(tokens, vocab_size):
    """HF's _retrieve_compression_ratio: token ids as int(log2(V) / 8) + 1 little-endian
    bytes each, their length over their zlib-compressed length."""
    width = int(math.log2(vocab_size) / 8) + 1
    raw = b"".join(int(t).to_bytes(width, "little") for t in tokens)
    return len(raw) / len(zlib.compress(raw)) if raw else 0.0


def avg_logprob(scores, tokens, temperature):
    """HF's _retrieve_avg_logprobs: log_softmax(score row * temperature) at each token,
    summed, over the number of tokens (the end token included)."""
    if not tokens or not scores:
        return 0.0
    rows = torch.stack(scores)
    tokens = list(tokens)
    if rows.shape[0] > len(tokens):
        rows = rows[: len(tokens)]
    else:
        tokens = tokens[-rows.shape[0]:]
    logp = torch.log_softmax(rows * (temperature if temperature > 0 else 1), dim=-1)
    return float(sum(logp[i, t] for i, t in enumerate(tokens))) / len(tokens)


@dataclass
class Options:
    """generate()'s arguments (HF's names)."""
    language: object = None
    task: object = None
    timestamps: bool = False
    num_beams: int = 1
    length_penalty: float = 1.0
    early_stopping: object = False
    temperatures: tuple = (0.0,)
    compression_ratio_threshold: object = None
    logprob_threshold: object = None
    no_speech_threshold: object = None
    condition_on_prev_tokens: bool = False
    token_timestamps: bool = False
    num_frames: object = None
    max_length: object = None
    seed: int = 0


@dataclass
class Window:
    seek: int
    frames: int
    prompt: list
    tokens: list            # generated, <|endoftext|> included when it ended
    scores: list
    temperature: float
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    skip: bool
    token_timestamps: object = None  # HF's array: rows + 1 values


@torch.no_grad()
def no_speech_prob(model, memory, prompt, s, begin_index, init_len):
    """WhisperNoSpeechDetection's probability: softmax of the raw logits at the position of
    <|startoftranscript|> (begin_index - len(init tokens)), at <|nospeech|>."""
    logits = model.decode(memory, prompt)[0][begin_index - init_len]
    return float(torch.softmax(logits.float(), -1)[s.nospeech])


def run_search(model, memory, prompt, s, o, temperature, generator):
    procs = Processors(s, len(prompt), o.timestamps)
    ml = o.max_length or s.max_length
    if temperature > 0:
        return greedy_or_sample(model, memory, prompt, procs, ml, s.eot, temperature, generator)
    if o.num_beams > 1:
        return beam_search(model, memory, prompt, procs, o.num_beams, ml, s.eot, o.length_penalty, o.early_stopping)
    return greedy_or_sample(model, memory, prompt, procs, ml, s.eot)


def decode_window(model, s, o, window, prompt, init_len, generator):
    """HF's generate_with_fallback for one window (features [n_mels, 3000]) and decoder
    input prompt: the Window of the last temperature tried."""
    memory = model.encode(window)
    nsp = no_speech_prob(model, memory, prompt, s, len(prompt), init_len)
    for k, t in enumerate(o.temperatures):
        r = run_search(model, memory, prompt, s, o, t, generator)
        lp = avg_logprob(r.scores, r.tokens, t)
        cr = compression_ratio(r.tokens, s.vocab_size)
        fallback = (o.compression_ratio_threshold is not None and cr > o.compression_ratio_threshold) or \
            (o.logprob_threshold is not None and lp < o.logprob_threshold)
        skip = False
        if o.no_speech_threshold is not None and o.logprob_threshold is not None:
            if lp < o.logprob_threshold and nsp > o.no_speech_threshold:
                fallback, skip = False, True
        if not fallback or k == len(o.temperatures) - 1:
            break
    w = Window(0, 0, list(prompt), r.tokens, r.scores, t, lp, cr, nsp, skip)
    if o.token_timestamps:
        cross = path_cross_attention(model, memory, prompt + r.tokens)
        w.token_timestamps = TT.token_timestamps(TT.alignment_weights(cross, s.alignment_heads), o.num_frames,
                                                 s.median_filter_width)
    return w


# --------------------------------------------------------------------------------------
# Segments and the seek rule

def retrieve_segments(seq, tb, time_offset, frames, idx_offset, times=None):
    """HF's _retrieve_segment (79f1fc71) for one window's tokens seq (without <|endoftext|>):
    (segments, frames to seek on). times: the window's token timestamps (HF's array),
    sliced per segment at idx_offset (the prompt's length) and moved by time_offset."""
    is_ts = [t >= tb for t in seq]
    single_ending = is_ts[-2:] == [False, True]
    cuts = [i + 1 for i in range(len(seq) - 1) if is_ts[i] and is_ts[i + 1]]

    def segment(lo, hi, start, end):
        seg = {"start": start, "end": end, "tokens": list(seq[lo:hi]), "idxs": (idx_offset + lo, idx_offset + hi)}
        if times is not None:
            seg["token_times"] = [float(np.float32(x) + np.float32(time_offset))
                                  for x in times[idx_offset + lo: idx_offset + hi]]
        return seg

    if cuts:
        if single_ending:
            cuts.append(len(seq))
        else:
            cuts[-1] += 1  # the last segment keeps its closing timestamp
        segments, last = [], 0
        for k, cut in enumerate(cuts):
            part = seq[last:cut]
            end_at = -1 if k < len(cuts) - 1 or single_ending else -2
            segments.append(segment(last, cut, time_offset + (part[0] - tb) * TIME_PRECISION,
                                    time_offset + (part[end_at] - tb) * TIME_PRECISION))
            last = cut
        offset = frames if single_ending else (seq[last - 2] - tb) * INPUT_STRIDE
        return segments, offset
    stamps = [t for t in seq if t >= tb]
    last_pos = int(frames * FRAME_SECONDS / TIME_PRECISION)
    if stamps and stamps[-1] != tb:
        last_pos = stamps[-1] - tb  # no pair, but a timestamp: the segment ends there
    return [segment(0, len(seq), time_offset, time_offset + last_pos * TIME_PRECISION)], frames


def previous_tokens(s, segments, max_target_positions):
    """HF's condition_on_prev_tokens prefix: <|startofprev|> and the last
    max_target_positions // 2 - 1 tokens of the segments so far; a segment ending in two
    timestamps loses its last one (HF edits the segment itself, so its output shows it)."""
    for seg in segments:
        if len(seg["tokens"]) > 2 and seg["tokens"][-2] >= s.timestamp_begin:
            seg["tokens"] = seg["tokens"][:-1]
    prev = [t for seg in segments for t in seg["tokens"]][-(max_target_positions // 2 - 1):]
    return ([s.prev_sot] if s.prev_sot is not None else []) + prev


def window_of(features, seek, frames, width):
    """Frames [seek, seek + frames) of features, zero-padded to width (HF's
    _get_input_segment)."""
    w = np.zeros((features.shape[0], width), dtype=np.float32)
    w[:, :frames] = features[:, seek: seek + frames]
    return w


def transcribe(model, s, features, o=None):
    """HF's generate() on features [n_mels, frames] of any length: dict with language (id),
    init (the prompt's init tokens), segments and windows."""
    o = o or Options()
    features = np.asarray(features, dtype=np.float32)
    width = INPUT_STRIDE * model.config["max_source_positions"]
    total = features.shape[1]
    if total > width and not o.timestamps:
        o = Options(**{**o.__dict__, "timestamps": True})  # long-form needs timestamps (HF sets them)
    first = window_of(features, 0, min(total, width), width)
    init = init_tokens(s, o.language, o.task, o.timestamps, lambda: detect_language(model, s, first))
    generator = torch.Generator().manual_seed(o.seed)
    segments, windows, seek, condition = [], [], 0, o.condition_on_prev_tokens
    while seek < total:
        frames = min(total - seek, width)
        time_offset = seek * TIME_PRECISION / INPUT_STRIDE
        prompt = (previous_tokens(s, segments, s.max_target_positions) if condition and segments else []) + init
        w = decode_window(model, s, o, window_of(features, seek, frames, width), prompt, len(init), generator)
        w.seek, w.frames = seek, frames
        windows.append(w)
        condition = o.condition_on_prev_tokens and w.temperature < 0.5
        if w.skip:
            seek += frames
            continue
        seq = w.tokens[:-1] if w.tokens and w.tokens[-1] == s.eot else list(w.tokens)
        segs, advance = retrieve_segments(seq, s.timestamp_begin, time_offset, frames, len(prompt),
                                          w.token_timestamps)
        for seg in segs:
            seg.update(window=len(windows) - 1, avg_logprob=w.avg_logprob, no_speech_prob=w.no_speech_prob,
                       temperature=w.temperature, compression_ratio=w.compression_ratio, seek=seek)
        segments += segs
        seek += advance
    return {"language": init[1] if s.lang_to_id and len(init) > 1 else None, "init": init,
            "segments": segments, "windows": windows}


# --------------------------------------------------------------------------------------
# Text and words

def text_of(table, tokens, eot):
    """The decoded text of tokens, special tokens left out."""
    return TT.decode(b"".join(table[t] for t in tokens if t < eot))


def segment_words(table, seg, eot, next_time, language):
    """HF's pipeline words of one segment: its text tokens, each from its time to the next
    token's (next_time: the time after the segment's last token, None if none), rounded to
    0.01 s; the last token without a next one ends where it starts."""
    times = seg["token_times"] + [next_time]
    keep = [k for k, t in enumerate(seg["tokens"]) if t < eot]
    starts = [round(times[k], 2) for k in keep]
    ends = [round(times[k + 1] if times[k + 1] is not None else times[k], 2) for k in keep]
    words = TT.word_times([table[seg["tokens"][k]] for k in keep], starts, ends, language)
    for w in words:
        w["tokens"] = [keep[w["tokens"][0]], keep[w["tokens"][1] - 1] + 1]  # in the segment's tokens
    return words


def words_of(table, result, s):
    """Every segment's words, in order, each with the index of its segment."""
    lang = s.id_to_lang.get(result["language"], "en")
    out, segs = [], result["segments"]
    for i, seg in enumerate(segs):
        nxt = segs[i + 1]["token_times"][0] if i + 1 < len(segs) and segs[i + 1]["token_times"] else None
        for w in segment_words(table, seg, s.eot, nxt, lang):
            out.append(dict(w, segment=i))
    return out


def to_json(result, s, table, words=False):
    """The command line's JSON object of a transcribe() result."""
    segs = []
    for i, seg in enumerate(result["segments"]):
        d = {"id": i, "seek": seg["seek"], "start": seg["start"], "end": seg["end"], "tokens": seg["tokens"],
             "text": text_of(table, seg["tokens"], s.eot), "avg_logprob": seg["avg_logprob"],
             "no_speech_prob": seg["no_speech_prob"], "temperature": seg["temperature"],
             "compression_ratio": seg["compression_ratio"]}
        if "token_times" in seg:
            d["token_times"] = seg["token_times"]
        segs.append(d)
    wins = []
    for w in result["windows"]:
        d = {"seek": w.seek, "frames": w.frames, "prompt": w.prompt, "tokens": w.tokens,
             "logprobs": [float(torch.log_softmax(r, -1)[t]) for r, t in zip(w.scores, w.tokens)],
             "temperature": w.temperature, "skipped": w.skip}
        if w.token_timestamps is not None:
            d["token_timestamps"] = [float(x) for x in w.token_timestamps]
        wins.append(d)
    tokens = [t for seg in result["segments"] for t in seg["tokens"]]
    out = {"language": s.id_to_lang.get(result["language"]), "prompt": result["windows"][0].prompt if wins else [],
           "tokens": tokens, "text": text_of(table, tokens, s.eot), "segments": segs, "windows": wins}
    if words:
        out["words"] = words_of(table, result, s)
    return out


# --------------------------------------------------------------------------------------
# Command line

def parse_args(argv):
    p = argparse.ArgumentParser(description="Whisper generation as HF's generate() runs it; JSON on stdout.")
    p.add_argument("checkpoint", help="HF Whisper folder (config.json, generation_config.json, weights, tokenizer)")
    p.add_argument("features", help=".npy of log-mel features [n_mels, frames]")
    p.add_argument("--language", help="a language code; default: detected on the first window")
    p.add_argument("--task", choices=["transcribe", "translate"], help="default: HF's (see the module's notes)")
    p.add_argument("--timestamps", action="store_true", help="timestamp tokens (on anyway past 3000 frames)")
    p.add_argument("--beam", type=int, default=1, help="num_beams (default 1: greedy)")
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument("--early-stopping", default="false", choices=["true", "false", "never"])
    p.add_argument("--max-length", type=int, help="ids at most, prompt included (default: the config's)")
    p.add_argument("--temperature", default="0", help="one or comma-separated temperatures (fallback)")
    p.add_argument("--compression-ratio-threshold", type=float)
    p.add_argument("--logprob-threshold", type=float)
    p.add_argument("--no-speech-threshold", type=float)
    p.add_argument("--condition-on-prev-tokens", action="store_true")
    p.add_argument("--token-timestamps", action="store_true", help="HF's return_token_timestamps")
    p.add_argument("--word-timestamps", action="store_true", help="token timestamps merged into words")
    p.add_argument("--num-frames", type=int, help="mel frames of real audio: attention cropped to num_frames // 2")
    p.add_argument("--seed", type=int, default=0, help="the sampler's seed (temperatures > 0)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    model, s, table = load(a.checkpoint)
    features = np.load(a.features)
    if features.ndim != 2 or features.shape[0] != model.config["num_mel_bins"]:
        raise SystemExit(f"features {features.shape}: want [{model.config['num_mel_bins']}, frames]")
    o = Options(language=a.language, task=a.task, timestamps=a.timestamps, num_beams=a.beam,
                length_penalty=a.length_penalty, early_stopping=a.early_stopping,
                temperatures=tuple(float(t) for t in a.temperature.split(",")),
                compression_ratio_threshold=a.compression_ratio_threshold, logprob_threshold=a.logprob_threshold,
                no_speech_threshold=a.no_speech_threshold, condition_on_prev_tokens=a.condition_on_prev_tokens,
                token_timestamps=a.token_timestamps or a.word_timestamps, num_frames=a.num_frames,
                max_length=a.max_length, seed=a.seed)
    result = transcribe(model, s, features, o)
    json.dump(to_json(result, s, table, a.word_timestamps), sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
