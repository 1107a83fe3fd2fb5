#!/bin/sh
# Rebuild tests/data/tiny-whisper.gguf: a tiny random Whisper model (the whisper family: two
# convolutions over 80 mel bins, d_model 16, one layer each side, 2 heads) with a small
# byte-level vocabulary (<|endoftext|> at 300, then the multilingual layout's 99 languages,
# the task tokens and the 1501 timestamps: 1908 ids), for the sanitizer, valgrind and
# broken-file runs that need a speech model of a few hundred KB.
# Usage: sh tests/data/make_tiny_whisper.sh   (needs python3-torch)
set -eu
REPO=$(cd "$(dirname "$0")/../.." && pwd)
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cd "$T"
$PY -c "
import sys
sys.path.insert(0, '$REPO/tools')
sys.path.insert(0, '$REPO/tests')
import reference_whisper as R
import test_whisper as W
c = R.shape_config('mini', english_only=False)
c.update(d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
         encoder_ffn_dim=24, decoder_ffn_dim=24, eos_token_id=300, pad_token_id=300, bos_token_id=300,
         decoder_start_token_id=301, begin_suppress_tokens=[220, 300], vocab_size=300 + 2 + 99 + 6 + 1501,
         max_target_positions=64)
W.write_tokenizer('tok', c)
m = R.random_model(c, seed=5)
R.save_checkpoint(m, 'm', 'tok', suppress=[1, 2])
"
$PY "$REPO/tools/export_whisper.py" m "$REPO/tests/data/tiny-whisper.gguf" --name tiny-whisper >/dev/null
ls -l "$REPO/tests/data/tiny-whisper.gguf"
