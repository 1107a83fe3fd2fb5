#!/bin/sh
# Rebuild tests/data/tiny-nllb.gguf: a tiny random NLLB-200-style model (model_type m2m_100
# with NllbTokenizer: fairseq-offset ids, codes deu_Latn, eng_Latn, fra_Latn, <mask>) for the
# sanitizer run and as a fuzz seed of the NLLB decode path.
# Usage: sh tests/data/make_tiny_nllb.sh   (needs python3-torch and python3-sentencepiece)
set -eu
. "$(dirname "$0")/tiny_common.sh"
shared_spm
cd "$T"
$PY -c "
import sys
sys.path.insert(0, '$REPO/tools')
import sentencepiece
import reference_m2m100 as R
n = sentencepiece.SentencePieceProcessor(model_file='spm.model').get_piece_size()
codes = ['deu_Latn', 'eng_Latn', 'fra_Latn']
tok = R.NllbTok('spm.model', codes, max_len=64)
cfg = dict(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
           decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32, activation_function='relu',
           max_position_embeddings=64, max_length=24, vocab_size=n + 1 + len(codes) + 1)
m = R.m2m_random_model(cfg, seed=11)
R.nllb_save_hf_dir(m, 'm', open('spm.model', 'rb').read(), tok, model_max_length=64)
"
$PY "$REPO/tools/export_m2m100.py" m "$REPO/tests/data/tiny-nllb.gguf" --name tiny-nllb >/dev/null
ls -l "$REPO/tests/data/tiny-nllb.gguf"
