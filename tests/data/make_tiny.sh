#!/bin/sh
# Rebuild tests/data/tiny-v1.gguf and tiny-v2.gguf: one tiny random MarianMT model, as f32
# (format version 1) and int8 (format version 2), used by the broken-file corpus, the
# hostile-input tests, the sanitizer run and as the fuzzers' seeds. SentencePiece models
# of 300 pieces with identity normalization keep each under 200 KB.
# Usage: sh tests/data/make_tiny.sh   (needs python3-torch and python3-sentencepiece)
set -eu
. "$(dirname "$0")/tiny_common.sh"
zcat "$DATA/tatoeba-deu-eng.train.de.gz" | head -3000 > "$T/de.txt"
zcat "$DATA/tatoeba-deu-eng.train.en.gz" | head -3000 > "$T/en.txt"
awk 'length($0) < 40' "$T/de.txt" | head -20 > "$T/cal.txt"
cd "$T"
$PY -c "
import sentencepiece as s
for side, f in (('src', 'de.txt'), ('tgt', 'en.txt')):
    s.SentencePieceTrainer.train(input=f, model_prefix=side, vocab_size=300, minloglevel=2,
                                 normalization_rule_name='identity')
"
$PY "$REPO/tools/reference.py" random m --source-spm src.model --target-spm tgt.model \
  --config '{"d_model":16,"encoder_layers":1,"decoder_layers":1,"encoder_attention_heads":2,"decoder_attention_heads":2,"encoder_ffn_dim":32,"decoder_ffn_dim":32,"max_position_embeddings":64,"max_length":24}' \
  --bias-std 1 --calibrate-eos cal.txt >/dev/null
$PY "$REPO/tools/export_marian.py" m "$REPO/tests/data/tiny-v1.gguf" --name tiny-v1 >/dev/null
$PY "$REPO/tools/export_marian.py" m "$REPO/tests/data/tiny-v2.gguf" --name tiny-v2 --dtype int8 >/dev/null
ls -l "$REPO/tests/data/tiny-v1.gguf" "$REPO/tests/data/tiny-v2.gguf"
