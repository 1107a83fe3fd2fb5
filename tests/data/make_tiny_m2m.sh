#!/bin/sh
# Rebuild tests/data/tiny-m2m.gguf: a tiny random M2M-100 model (format version 1, languages
# de, en, fr) for the sanitizer run and as a kept file of the m2m_100 family. One
# SentencePiece model of 300 pieces with identity normalization keeps it small.
# Usage: sh tests/data/make_tiny_m2m.sh   (needs python3-torch and python3-sentencepiece)
set -eu
. "$(dirname "$0")/tiny_common.sh"
shared_spm
cd "$T"
$PY -c "
import sys
sys.path.insert(0, '$REPO/tools')
import reference_m2m100 as R
vocab = R.m2m_build_vocab('spm.model')
cfg = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
           decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
           max_position_embeddings=64, max_length=24, vocab_size=len(vocab) + 3 + 2)
m = R.m2m_random_model(cfg, seed=7)
R.m2m_save_hf_dir(m, 'm', open('spm.model', 'rb').read(), vocab, ['de', 'en', 'fr'], model_max_length=64)
"
$PY "$REPO/tools/export_m2m100.py" m "$REPO/tests/data/tiny-m2m.gguf" --name tiny-m2m >/dev/null
ls -l "$REPO/tests/data/tiny-m2m.gguf"
