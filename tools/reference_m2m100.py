#!/usr/bin/python3
"""The M2M-100 family (model_type m2m_100; NLLB-200 checkpoints share the model class):
what HF transformers 4.x's M2M100ForConditionalGeneration, M2M100Tokenizer and
NllbTokenizer (NllbTok) compute, written independently for attend's tests from
transformers' rules (transformers itself is not installed here). Where it differs from
Marian (reference.py, whose layers and beam bookkeeping it reuses): pre-LayerNorm blocks (x + f(LN(x))), a final
LayerNorm after each stack, fairseq sinusoidal positions counted from pad + 1, one shared
embedding tied to the output, no final_logits_bias, <pad> not banned, the target language
forced as the first generated token (forced_bos_token_id)."""
import json
import math
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402
from reference import (DecoderLayer, EncoderLayer, MarianTok, beam_loop, generation_limits,  # noqa: E402
                       greedy_loop, load_state_dict, random_parameters, write_dump)


M2M_DEFAULT_CONFIG = {
    "model_type": "m2m_100",
    "architectures": ["M2M100ForConditionalGeneration"],
    "vocab_size": 128112,
    "d_model": 1024,
    "encoder_layers": 12,
    "decoder_layers": 12,
    "encoder_attention_heads": 16,
    "decoder_attention_heads": 16,
    "encoder_ffn_dim": 4096,
    "decoder_ffn_dim": 4096,
    "activation_function": "relu",
    "scale_embedding": True,
    "max_position_embeddings": 1024,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "decoder_start_token_id": 2,
    "max_length": 200,
    "dropout": 0.1,
    "attention_dropout": 0.1,
    "activation_dropout": 0.0,
    "init_std": 0.02,
    "is_encoder_decoder": True,
    "tie_word_embeddings": True,
}


def fairseq_positions(n_pos, dim, padding_idx):
    """[n_pos, dim] as M2M100SinusoidalPositionalEmbedding.get_embedding builds it, in
    float32: half = dim // 2, frequencies exp(-j * log(10000) / (half - 1)), sines of
    pos * frequency in the first half, cosines in the second, a zero column for odd dim,
    row padding_idx zero."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    freq = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)
    angle = torch.arange(n_pos, dtype=torch.int64).float().unsqueeze(1) * freq.unsqueeze(0)
    table = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1).view(n_pos, -1)
    if dim % 2 == 1:
        table = torch.cat([table, torch.zeros(n_pos, 1)], dim=1)
    table[padding_idx, :] = 0
    return table


class PreNormEncoderLayer(EncoderLayer):
    """EncoderLayer's modules, applied pre-norm: x + f(LN(x)) (no dropout: inference only)."""

    def forward(self, x):
        h = self.self_attn_layer_norm(x)
        a, probs = self.self_attn(h, h)
        x = x + a
        x = x + self.fc2(self.act(self.fc1(self.final_layer_norm(x))))
        return x, probs


class PreNormDecoderLayer(DecoderLayer):
    """DecoderLayer's modules, applied pre-norm: y + f(LN(y)) (no dropout: inference only)."""

    def forward(self, y, memory):
        h = self.self_attn_layer_norm(y)
        a, self_probs = self.self_attn(h, h, causal=True)
        y = y + a
        a, cross_probs = self.encoder_attn(self.encoder_attn_layer_norm(y), memory)
        y = y + a
        y = y + self.fc2(self.act(self.fc1(self.final_layer_norm(y))))
        return y, self_probs, cross_probs


class M2MStack(nn.Module):
    """HF's model.encoder / model.decoder: layers and the stack's final layer_norm (the
    embedding is model.shared)."""

    def __init__(self, layers, c):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.layer_norm = nn.LayerNorm(c["d_model"], eps=1e-5)


class M2MInner(nn.Module):
    """HF's model: shared, encoder, decoder; stack(layers, config) makes each stack
    (reference_mbart's MBartStack for mBART)."""

    def __init__(self, c, stack=M2MStack):
        super().__init__()
        self.shared = nn.Embedding(c["vocab_size"], c["d_model"])
        self.encoder = stack([PreNormEncoderLayer(c) for _ in range(c["encoder_layers"])], c)
        self.decoder = stack([PreNormDecoderLayer(c) for _ in range(c["decoder_layers"])], c)


def run_encoder(stack, x):
    """The pre-norm stack's layers on the embedded source x, then its layer_norm: (memory,
    per-layer self-attention)."""
    probs = []
    for layer in stack.layers:
        x, p = layer(x)
        probs.append(p)
    return stack.layer_norm(x), probs


def run_decoder(stack, y, memory):
    """The pre-norm stack's layers on the embedded decoder inputs y, then its layer_norm:
    (hidden states, per-layer self and cross attention)."""
    self_p, cross_p = [], []
    for layer in stack.layers:
        y, sp, cp = layer(y, memory)
        self_p.append(sp)
        cross_p.append(cp)
    return stack.layer_norm(y), self_p, cross_p


class M2M100(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = dict(M2M_DEFAULT_CONFIG, **config)
        self.config = c
        self.model = M2MInner(c)
        self.embed_scale = math.sqrt(c["d_model"]) if c["scale_embedding"] else 1.0
        pad = c["pad_token_id"]
        # HF makes max_position_embeddings + 2 rows and grows the table on demand
        self.positions = fairseq_positions(c["max_position_embeddings"] + pad + 1, c["d_model"], pad)
        self.tok = None

    def _embed(self, ids, pos):
        return self.model.shared(ids) * self.embed_scale + self.positions[pos]

    def encode(self, src):
        """src [1,S] -> memory [1,S,d], per-layer self-attention [1,H,S,S]. Positions are
        HF's create_position_ids_from_input_ids: cumsum of the non-pad mask + pad, pad for
        <pad> tokens."""
        pad = self.config["pad_token_id"]
        mask = (src != pad).long()
        pos = torch.cumsum(mask, dim=1) * mask + pad
        return run_encoder(self.model.encoder, self._embed(src, pos))

    def decode(self, tgt, memory):
        """tgt [1,T] decoder inputs -> logits [1,T,V], self and cross probabilities per
        layer. Positions as HF generate() gives them with its cache: step t's token gets
        t + pad + 1 (past length + its own mask), a <pad> token gets pad."""
        pad = self.config["pad_token_id"]
        T = tgt.shape[1]
        mask = (tgt != pad).long()
        pos = (torch.arange(T).unsqueeze(0) + 1) * mask + pad
        y, self_p, cross_p = run_decoder(self.model.decoder, self._embed(tgt, pos), memory)
        return y @ self.model.shared.weight.t(), self_p, cross_p

    def hf_state_dict(self):
        """What model.safetensors holds: model.shared.weight once (encoder, decoder and
        lm_head are tied to it), no positions."""
        return {k: v.detach().clone() for k, v in self.state_dict().items()}


def split_added(text, added, lstrip=()):
    """transformers' PreTrainedTokenizer.tokenize before the model's own tokenizer: the
    added tokens (a dict token -> id) are cut out of the text, at each place the longest
    one that starts there, searching from the left (here with a regular expression whose
    alternatives are longest first); a token in `lstrip` also takes the whitespace
    (str.rstrip) of the text before it; empty stretches vanish. Returns [(str, id or None)]."""
    import re
    pattern = re.compile("|".join(re.escape(t) for t in sorted(added, key=len, reverse=True)))
    out, pos = [], 0
    for mt in pattern.finditer(text):
        left = text[pos:mt.start()]
        if mt.group() in lstrip:
            left = left.rstrip()
        if left:
            out.append((left, None))
        out.append((mt.group(), added[mt.group()]))
        pos = mt.end()
    if text[pos:]:
        out.append((text[pos:], None))
    return out


class LangTok:
    """What the multilingual tokenizers (M2MTok, NllbTok, reference_mbart's MBart50Tok)
    share: source and target are [lang] pieces </s> (tokens(text): the pieces' ids), cut to
    max_len; decoded text stripped and cleaned up as clean_up_tokenization does. A subclass
    sets lang_id {code: id}, eos, max_len."""
    CLEANUPS = MarianTok.CLEANUPS

    def encode(self, text, src_lang):
        """[src_lang] pieces </s>, cut to max_len keeping the language token and </s>."""
        ids = [self.lang_id[src_lang]] + self.tokens(text)
        if self.max_len is not None:
            ids = ids[: self.max_len - 1]
        return ids + [self.eos]

    def encode_target(self, text, tgt_lang):
        """text_target with tgt_lang: [tgt_lang] pieces </s>."""
        return self.encode(text, tgt_lang)

    def clean_up(self, text):
        """text stripped, then clean_up_tokenization."""
        text = text.strip()
        for a, b in self.CLEANUPS:
            text = text.replace(a, b)
        return text


class M2MTok(LangTok):
    """M2M100Tokenizer: one SentencePiece model, pieces through vocab.json (unknown ->
    <unk>), __xx__ language tokens at len(vocab) + index in the language list; <s> <pad>
    </s> <unk> and the language tokens typed in the text are HF added tokens."""

    def __init__(self, spm_file, vocab, languages, max_len=None):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=spm_file)
        self.vocab = vocab
        self.pieces = {i: p for p, i in vocab.items()}
        self.lang_id = {code: len(vocab) + i for i, code in enumerate(languages)}
        self.specials = {vocab["<s>"], vocab["<pad>"], vocab["</s>"], vocab["<unk>"]} | set(self.lang_id.values())
        self.unk, self.eos = vocab["<unk>"], vocab["</s>"]
        self.added = {t: vocab[t] for t in ("<s>", "<pad>", "</s>", "<unk>")}
        self.added.update({f"__{code}__": i for code, i in self.lang_id.items()})
        self.max_len = max_len

    def tokens(self, text):
        """The ids of text's pieces and typed added tokens (no language token, no </s>)."""
        ids = []
        for part, i in split_added(text, self.added):
            ids += [i] if i is not None else [self.vocab.get(p, self.unk) for p in self.sp.encode(part, out_type=str)]
        return ids

    def decode(self, ids):
        """decode(skip_special_tokens=True): special ids dropped; an id without a piece is
        "<unk>" (a special token: kept verbatim, no space); pieces joined by SentencePiece;
        stripped; clean_up_tokenization."""
        out, cur = "", []
        for i in ids:
            if i in self.specials:
                continue
            p = self.pieces.get(i)
            if p is None:
                out += self.sp.decode(cur) + "<unk>"
                cur = []
            else:
                cur.append(p)
        return self.clean_up(out + self.sp.decode(cur))


class NllbTok(LangTok):
    """transformers' NllbTokenizer (non-legacy, the default), from its rules: <s> <pad> </s>
    <unk> are ids 0..3; SentencePiece's piece id p is p + 1 (fairseq's offset), its unknown
    piece (id 0) <unk>; the language codes at lang_ids (default: len(spm) + 1 + their index
    in `languages`), <mask> at mask_id (default: after them); <s> <pad> </s> <unk>, the codes
    and <mask> typed in the text are added tokens, <mask> with lstrip. Source and target:
    [lang] pieces </s>. decode(skip_special_tokens=True): special ids dropped, so are ids
    without a token (as the fast tokenizer does; the slow one raises on them), the pieces
    joined, "▁" read as a space, stripped, then clean_up_tokenization."""

    def __init__(self, spm_file, languages, lang_ids=None, mask_id=None, max_len=None):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=spm_file)
        n = self.sp.get_piece_size()
        self.n_spm = n
        self.lang_id = dict(lang_ids) if lang_ids else {c: n + 1 + i for i, c in enumerate(languages)}
        self.mask_id = mask_id if mask_id is not None else n + 1 + len(languages)
        self.added = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": self.mask_id}
        self.added.update(self.lang_id)
        self.specials = set(self.added.values())
        self.unk, self.eos = 3, 2
        self.max_len = max_len

    def piece_id(self, piece):
        sid = self.sp.piece_to_id(piece)
        return sid + 1 if sid else self.unk

    def tokens(self, text):
        ids = []
        for part, i in split_added(text, self.added, lstrip={"<mask>"}):
            ids += [i] if i is not None else [self.piece_id(p) for p in self.sp.encode(part, out_type=str)]
        return ids

    def decode(self, ids):
        toks = [self.sp.id_to_piece(i - 1) for i in ids if i not in self.specials and 4 <= i <= self.n_spm]
        return self.clean_up("".join(toks).replace("\u2581", " "))


def _save_model(model, path, spm_blob, fmt, config):
    """The directory path with config.json (config), the weights (model.safetensors, or
    pytorch_model.bin with the tied lm_head.weight) and sentencepiece.bpe.model."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    sd = model.hf_state_dict()
    if fmt == "safetensors":
        safetensors_np.save({k: v.numpy() for k, v in sd.items()}, os.path.join(path, "model.safetensors"))
    else:
        sd["lm_head.weight"] = sd["model.shared.weight"].clone()
        torch.save(sd, os.path.join(path, "pytorch_model.bin"))
    with open(os.path.join(path, "sentencepiece.bpe.model"), "wb") as f:
        f.write(spm_blob)


def nllb_save_hf_dir(model, path, spm_blob, tok, style="decoder", fmt="safetensors", model_max_length=1024,
                     tokenizer_class="NllbTokenizer"):
    """Write an HF-style NLLB-200 directory: config.json (model_type m2m_100,
    tokenizer_class), model.safetensors (or pytorch_model.bin), sentencepiece.bpe.model, no
    vocab.json, and tokenizer files in one of the layouts transformers writes or reads:
    "decoder": tokenizer_config.json with additional_special_tokens and
    added_tokens_decoder (save_pretrained since 4.34), special_tokens_map.json; "map": the
    codes only in special_tokens_map.json, no ids recorded; "default": neither (the 202
    codes of NllbTokenizer), added_tokens.json recording <mask>."""
    _save_model(model, path, spm_blob, fmt, dict(model.config, tokenizer_class=tokenizer_class))
    codes = list(tok.lang_id)  # the language list in its order (the ids may run otherwise)
    plain = dict(lstrip=False, rstrip=False, single_word=False, normalized=False, special=True)
    conf = {"tokenizer_class": tokenizer_class, "model_max_length": model_max_length, "src_lang": None,
            "tgt_lang": None, "legacy_behaviour": False, "sp_model_kwargs": {},
            "clean_up_tokenization_spaces": True, "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
            "pad_token": "<pad>", "sep_token": "</s>", "cls_token": "<s>",
            "mask_token": {"content": "<mask>", "lstrip": True, "rstrip": False, "single_word": False,
                           "normalized": True, "special": True}}
    smap = {k: conf[k] for k in ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                                 "mask_token")}
    if style == "decoder":
        conf["additional_special_tokens"] = codes
        dec = {str(i): dict(plain, content=t) for t, i in (("<s>", 0), ("<pad>", 1), ("</s>", 2), ("<unk>", 3))}
        dec.update({str(tok.lang_id[c]): dict(plain, content=c) for c in codes})
        dec[str(tok.mask_id)] = dict(conf["mask_token"])
        conf["added_tokens_decoder"] = dec
        smap["additional_special_tokens"] = codes
    elif style == "map":
        smap["additional_special_tokens"] = [dict(plain, content=c) for c in codes]
    elif style == "default":
        with open(os.path.join(path, "added_tokens.json"), "w") as f:
            json.dump({"<mask>": tok.mask_id}, f)
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump(conf, f, indent=1)
    with open(os.path.join(path, "special_tokens_map.json"), "w") as f:
        json.dump(smap, f, indent=1)


def m2m_build_vocab(spm_file):
    """fairseq's dictionary as M2M-100's vocab.json: <s> 0, <pad> 1, </s> 2, <unk> 3, then
    the SentencePiece pieces in order."""
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=spm_file)
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        p = sp.id_to_piece(i)
        if not (sp.is_control(i) or sp.is_unknown(i) or p in vocab):
            vocab[p] = len(vocab)
    return vocab


def m2m_random_model(config, seed=0, gain=1.5):
    """Random M2M100 weights: matrices std gain/sqrt(fan_in), LayerNorm gains in 0.5..1.5,
    other vectors std 0.1."""
    torch.manual_seed(seed)
    m = M2M100(config)
    with torch.no_grad():
        random_parameters(m, gain)
        if not m.config["scale_embedding"]:
            m.model.shared.weight.normal_(0.0, gain)
    return m


def _m2m_process(scores, beams, cur_len, c, ml, forced_bos, min_length=0):
    """HF's processors for M2M100 on scores [B, V]: min length, forced BOS (cur_len 1),
    forced EOS (the last step). No bad words: <pad> may be generated."""
    eos = c["eos_token_id"]
    if min_length > 0 and cur_len < min_length:
        scores[:, eos] = float("-inf")
    if forced_bos is not None and cur_len == 1:
        scores[:] = float("-inf")
        scores[:, forced_bos] = 0.0
    if c.get("forced_eos_token_id") is not None and cur_len == ml - 1:
        scores[:] = float("-inf")
        scores[:, eos] = 0.0
    return scores


@torch.no_grad()
def m2m_greedy(model, src_ids, forced_bos, max_length=None, prompt=()):
    """Greedy generate() for M2M100: argmax of the processed raw logits; the whole decoder
    recomputed every step (no cache). prompt: HF's decoder_input_ids after the start token
    (a prefix with the language token first: forced BOS then never fires, cur_len > 1)."""
    c = model.config
    ml = generation_limits(c, max_length)
    return greedy_loop(model, src_ids, [c["decoder_start_token_id"]] + list(prompt),
                       lambda s, beams: _m2m_process(s, beams, len(beams[0]), c, ml, forced_bos), ml)


@torch.no_grad()
def m2m_beam_search(model, src_ids, forced_bos, num_beams, length_penalty=1.0, early_stopping=False,
                    num_return_sequences=1, max_length=None, prompt=()):
    """Beam generate() for M2M100: log_softmax of the raw logits (nothing removed), the
    processors, 2*B candidates, BeamHypotheses; beams 1.. start at -1e9. prompt: as
    m2m_greedy's (decoder_prompt_len 1 + len(prompt))."""
    c = model.config
    ml = generation_limits(c, max_length)
    return beam_loop(model, src_ids, [c["decoder_start_token_id"]] + list(prompt),
                     lambda logp, beams: _m2m_process(logp, beams, len(beams[0]), c, ml, forced_bos),
                     num_beams, length_penalty, early_stopping, num_return_sequences, ml)


@torch.no_grad()
def m2m_dump(model, lines, src_lang, tgt_lang, out_path, num_beams=1, max_length=None, beam_settings=None):
    """As `reference.py dump` (the same .npz keys) for an M2M100 model (or reference_mbart's
    MBart) and language pair; with num_beams > 1 the best hypothesis (beam_settings: further
    m2m_beam_search arguments), teacher-forced, and s{i}/score."""
    forced_bos = model.tok.lang_id[tgt_lang]
    best = None if num_beams == 1 else lambda src: m2m_beam_search(
        model, src, forced_bos, num_beams, max_length=max_length, **(beam_settings or {}))[0]
    write_dump(out_path, model, [model.tok.encode(line, src_lang) for line in lines],
               lambda src: m2m_greedy(model, src, forced_bos, max_length), best)


def m2m_load_hf_dir(path):
    """An M2M100 model from an HF-style directory's config.json and model.safetensors (or
    pytorch_model.bin), f32; no tokenizer (m.tok stays None)."""
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    m = M2M100(config)
    sd = load_state_dict(path)
    own = m.state_dict()
    with torch.no_grad():
        for name, t in own.items():
            t.copy_(sd.pop(name).to(torch.float32).reshape(t.shape))
    return m


def m2m_save_hf_dir(model, path, spm_blob, vocab, languages, fmt="safetensors", model_max_length=1024):
    """Write an HF-style M2M-100 directory: config.json, model.safetensors (or
    pytorch_model.bin), sentencepiece.bpe.model, vocab.json, tokenizer_config.json and
    special_tokens_map.json (the language tokens in the tokenizer's order)."""
    _save_model(model, path, spm_blob, fmt, dict(model.config))
    with open(os.path.join(path, "vocab.json"), "w") as f:
        json.dump(vocab, f, ensure_ascii=False, indent=0)
    specials = [f"__{code}__" for code in languages]
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "M2M100Tokenizer", "model_max_length": model_max_length,
                   "language_codes": "m2m100", "additional_special_tokens": specials}, f)
    with open(os.path.join(path, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "additional_special_tokens": specials}, f)
