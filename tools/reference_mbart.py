#!/usr/bin/python3
"""The mBART-50 family (model_type mbart, MBart50Tokenizer): what HF transformers 4.x's
MBartForConditionalGeneration and MBart50Tokenizer compute, written independently for
attend's tests. It reuses the pre-norm layers and the generation loops of
reference_m2m100.py (themselves built on reference.py's attention and beam bookkeeping);
what differs from M2M-100: learned positions (a table of max_position_embeddings + 2 rows per
stack, position p at row p + 2, every token counted, <pad> too), a LayerNorm on the
embeddings of each stack (layernorm_embedding, after adding the positions),
final_logits_bias, GELU by default, forced_eos_token_id 2 by default, and the tokenizer:
SentencePiece ids + 1 (fairseq's offset), the 52 language codes after the pieces, <mask>
last, and text split at the special tokens typed in it."""
import json
import math
import os
import re
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_np  # noqa: E402
from reference import random_parameters  # noqa: E402
from reference_m2m100 import LangTok, M2MInner, m2m_dump, run_decoder, run_encoder  # noqa: E402

# MBart50Tokenizer's language codes, in the order that gives their ids (FAIRSEQ_LANGUAGE_CODES)
LANGUAGE_CODES = (
    "ar_AR cs_CZ de_DE en_XX es_XX et_EE fi_FI fr_XX gu_IN hi_IN it_IT ja_XX kk_KZ ko_KR lt_LT "
    "lv_LV my_MM ne_NP nl_XX ro_RO ru_RU si_LK tr_TR vi_VN zh_CN af_ZA az_AZ bn_IN fa_IR he_IL "
    "hr_HR id_ID ka_GE km_KH mk_MK ml_IN mn_MN mr_IN pl_PL ps_AF pt_XX sv_SE sw_KE ta_IN te_IN "
    "th_TH tl_XX uk_UA ur_PK xh_ZA gl_ES sl_SI").split()

# MBartConfig's class defaults (a config.json without a key means these)
MBART_DEFAULT_CONFIG = {
    "model_type": "mbart",
    "architectures": ["MBartForConditionalGeneration"],
    "vocab_size": 50265,
    "max_position_embeddings": 1024,
    "encoder_layers": 12,
    "encoder_ffn_dim": 4096,
    "encoder_attention_heads": 16,
    "decoder_layers": 12,
    "decoder_ffn_dim": 4096,
    "decoder_attention_heads": 16,
    "activation_function": "gelu",
    "d_model": 1024,
    "dropout": 0.1,
    "attention_dropout": 0.0,
    "activation_dropout": 0.0,
    "init_std": 0.02,
    "scale_embedding": False,
    "pad_token_id": 1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "forced_eos_token_id": 2,
    "is_encoder_decoder": True,
    "tie_word_embeddings": True,
}


class MBartStack(nn.Module):
    """HF's model.encoder / model.decoder: learned positions, layers, the embedding LayerNorm
    and the stack's final LayerNorm (the token embedding is model.shared)."""

    def __init__(self, layers, c):
        super().__init__()
        d = c["d_model"]
        self.embed_positions = nn.Embedding(c["max_position_embeddings"] + 2, d)
        self.layers = nn.ModuleList(layers)
        self.layernorm_embedding = nn.LayerNorm(d, eps=1e-5)
        self.layer_norm = nn.LayerNorm(d, eps=1e-5)


class MBart(nn.Module):
    def __init__(self, config):
        super().__init__()
        c = dict(MBART_DEFAULT_CONFIG, **config)
        self.config = c
        self.model = M2MInner(c, MBartStack)
        self.register_buffer("final_logits_bias", torch.zeros(1, c["vocab_size"]))
        self.lm_head = None if c["tie_word_embeddings"] else nn.Linear(c["d_model"], c["vocab_size"], bias=False)
        self.embed_scale = math.sqrt(c["d_model"]) if c["scale_embedding"] else 1.0
        self.tok = None

    def _embed(self, stack, ids):
        """token embedding * scale + row (index + 2) of the stack's table, then its
        layernorm_embedding. Positions count every token from 0, whatever it is (HF's
        arange from the cache length)."""
        T = ids.shape[1]
        if T > self.config["max_position_embeddings"]:
            raise ValueError("sequence longer than max_position_embeddings")
        pos = stack.embed_positions(torch.arange(T) + 2)
        return stack.layernorm_embedding(self.model.shared(ids) * self.embed_scale + pos.unsqueeze(0))

    def encode(self, src):
        """src [1,S] -> memory [1,S,d], per-layer self-attention [1,H,S,S]."""
        return run_encoder(self.model.encoder, self._embed(self.model.encoder, src))

    def decode(self, tgt, memory):
        """tgt [1,T] decoder inputs -> logits [1,T,V] (with final_logits_bias), self and
        cross probabilities per layer."""
        y, self_p, cross_p = run_decoder(self.model.decoder, self._embed(self.model.decoder, tgt), memory)
        out = self.model.shared.weight if self.lm_head is None else self.lm_head.weight
        return y @ out.t() + self.final_logits_bias, self_p, cross_p

    def hf_state_dict(self, with_tied=False):
        """What the weights file holds: model.shared.weight once (safetensors drops the tied
        copies), or with_tied the embed_tokens and lm_head copies pytorch_model.bin keeps."""
        sd = {k: v.detach().clone() for k, v in self.state_dict().items()}
        if with_tied:
            for k in ("model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"):
                sd[k] = sd["model.shared.weight"].clone()
            if self.lm_head is None:
                sd["lm_head.weight"] = sd["model.shared.weight"].clone()
        return sd


# --------------------------------------------------------------------------------------
# MBart50Tokenizer

class MBart50Tok(LangTok):
    """MBart50Tokenizer's rules (slow tokenizer, transformers 4.36-4.44): ids <s> 0, <pad> 1,
    </s> 2, <unk> 3; SentencePiece id p >= 1 is p + 1 (its id 0, unknown, is <unk>); the 52
    codes at piece_count + 1 + i; <mask> after them. Text is first split at the special
    tokens typed in it (each becomes its id; <mask> strips the whitespace before it), every
    other stretch encoded by SentencePiece on its own. Source [src_lang] ... </s>."""
    FIXED = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}

    def __init__(self, spm_file, max_len=None):
        import sentencepiece as spm
        self.sp = spm.SentencePieceProcessor(model_file=spm_file)
        n = self.sp.get_piece_size()
        self.lang_id = {code: n + 1 + i for i, code in enumerate(LANGUAGE_CODES)}
        self.mask_id = n + 1 + len(LANGUAGE_CODES)
        self.size = self.mask_id + 1
        self.special = dict(self.FIXED, **self.lang_id, **{"<mask>": self.mask_id})
        self.special_ids = set(self.special.values())
        self.id_special = {i: t for t, i in self.special.items()}
        # longest first, so a pattern never stops at a shorter token's end
        alts = sorted(self.special, key=len, reverse=True)
        self.split_re = re.compile("(" + "|".join(re.escape(t) for t in alts) + ")")
        self.eos, self.unk = 2, 3
        self.max_len = max_len

    def piece_id(self, piece):
        if piece in self.FIXED:
            return self.FIXED[piece]
        i = self.sp.piece_to_id(piece)
        return i + 1 if i else self.unk

    def id_piece(self, i):
        return self.id_special[i] if i in self.id_special else self.sp.id_to_piece(i - 1)

    def tokens(self, text):
        """ids of text without the language token and </s>."""
        parts = self.split_re.split(text)  # odd indices are the special tokens
        for k in range(1, len(parts), 2):
            if parts[k] == "<mask>":
                parts[k - 1] = parts[k - 1].rstrip()
        ids = []
        for k, part in enumerate(parts):
            if k % 2:
                ids.append(self.special[part])
            elif part:
                ids.extend(self.piece_id(p) for p in self.sp.encode(part, out_type=str))
        return ids

    def decode(self, ids):
        """decode(skip_special_tokens=True): special ids dropped, the pieces joined by
        SentencePiece, stripped, clean_up_tokenization."""
        pieces = [self.id_piece(i) for i in ids if i not in self.special_ids]
        return self.clean_up(self.sp.decode(pieces))


# --------------------------------------------------------------------------------------
# Random models, generation, dumps, HF directories

def mbart_random_model(config, seed=0, gain=1.5, bias_std=0.5):
    """Random MBart weights: matrices std gain/sqrt(fan_in), LayerNorm gains in 0.5..1.5,
    other vectors std 0.1, final_logits_bias std bias_std."""
    torch.manual_seed(seed)
    m = MBart(config)
    with torch.no_grad():
        random_parameters(m, gain)
        m.final_logits_bias.normal_(0.0, bias_std)
    return m


def generation_settings(c):
    """The beam settings generate() takes from the config (GenerationConfig's defaults)."""
    lp, es = c.get("length_penalty"), c.get("early_stopping")
    return dict(length_penalty=1.0 if lp is None else float(lp), early_stopping=False if es is None else es)


def mbart_dump(model, lines, src_lang, tgt_lang, out_path, num_beams=1, max_length=None):
    """As `reference.py dump` (the same .npz keys) for an MBart model and language pair
    (reference_m2m100.m2m_dump); with num_beams > 1 the best hypothesis under the config's
    length_penalty and early_stopping, teacher-forced, and s{i}/score."""
    m2m_dump(model, lines, src_lang, tgt_lang, out_path, num_beams, max_length,
             beam_settings=generation_settings(model.config))


def mbart_save_hf_dir(model, path, spm_blob, fmt="safetensors", model_max_length=1024, config=None,
                      src_lang="en_XX", tgt_lang=None):
    """Write an HF-style mBART-50 directory as save_pretrained does: config.json (config, or
    the model's), model.safetensors (or pytorch_model.bin), sentencepiece.bpe.model,
    tokenizer_config.json and special_tokens_map.json (MBart50Tokenizer, the 52 codes as
    additional_special_tokens, <mask> with lstrip)."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(dict(model.config) if config is None else config, f, indent=2)
    if fmt == "safetensors":
        safetensors_np.save({k: v.numpy() for k, v in model.hf_state_dict().items()},
                            os.path.join(path, "model.safetensors"))
    else:
        torch.save(model.hf_state_dict(with_tied=True), os.path.join(path, "pytorch_model.bin"))
    with open(os.path.join(path, "sentencepiece.bpe.model"), "wb") as f:
        f.write(spm_blob)
    mask = {"content": "<mask>", "lstrip": True, "normalized": True, "rstrip": False, "single_word": False}
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "MBart50Tokenizer", "model_max_length": model_max_length,
                   "src_lang": src_lang, "tgt_lang": tgt_lang, "bos_token": "<s>", "eos_token": "</s>",
                   "sep_token": "</s>", "cls_token": "<s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "mask_token": mask, "additional_special_tokens": list(LANGUAGE_CODES)}, f, indent=1)
    with open(os.path.join(path, "special_tokens_map.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": "<pad>",
                   "sep_token": "</s>", "cls_token": "<s>", "mask_token": mask,
                   "additional_special_tokens": list(LANGUAGE_CODES)}, f, indent=1)
