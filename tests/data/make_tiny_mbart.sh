#!/bin/sh
# Rebuild tests/data/tiny-mbart.gguf: a tiny random mBART-50 model (format version 1, the 52
# language codes of MBart50Tokenizer) for the sanitizer run, the broken-file corpus and the
# fuzz seeds, and as a kept file of the mbart family. One SentencePiece BPE model of 300
# pieces with identity normalization keeps it small.
# Usage: sh tests/data/make_tiny_mbart.sh   (needs python3-torch and python3-sentencepiece)
set -eu
. "$(dirname "$0")/tiny_common.sh"
shared_spm "model_type='bpe', num_threads=1"
cd "$T"
$PY -c "
import sys
sys.path.insert(0, '$REPO/tools')
import reference_mbart as R
tok = R.MBart50Tok('spm.model')
cfg = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
           decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, scale_embedding=True,
           max_position_embeddings=64, max_length=24, vocab_size=tok.size, decoder_start_token_id=2)
m = R.mbart_random_model(cfg, seed=7)
R.mbart_save_hf_dir(m, 'm', open('spm.model', 'rb').read(), model_max_length=64)
"
$PY "$REPO/tools/export_mbart.py" m "$REPO/tests/data/tiny-mbart.gguf" --name tiny-mbart >/dev/null
ls -l "$REPO/tests/data/tiny-mbart.gguf"
