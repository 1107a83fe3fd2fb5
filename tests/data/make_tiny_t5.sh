#!/bin/sh
# Rebuild tests/data/tiny-t5.gguf: a tiny random T5 model (format version 1, gated-GELU,
# d_kv x heads != d_model, 8 relative buckets, two task prefixes) for the broken-file tests
# and as a kept file of the t5 family. One SentencePiece model of 300 pieces with T5's
# special ids (<pad> 0, </s> 1, <unk> 2) and identity normalization keeps it small.
# Usage: sh tests/data/make_tiny_t5.sh   (needs python3-torch and python3-sentencepiece)
set -eu
. "$(dirname "$0")/tiny_common.sh"
shared_spm "pad_id=0, eos_id=1, unk_id=2, bos_id=-1"
cd "$T"
$PY -c "
import sys
sys.path.insert(0, '$REPO/tools')
import reference_t5 as R
cfg = dict(vocab_size=300 + R.EXTRA_IDS, d_model=16, d_kv=4, num_heads=2, d_ff=24, num_layers=1,
           num_decoder_layers=1, feed_forward_proj='gated-gelu', relative_attention_num_buckets=8,
           relative_attention_max_distance=20, max_length=24)
m = R.t5_random_model(cfg, seed=7)
tasks = {'translation_en_to_de': {'prefix': 'translate English to German: '},
         'summarization': {'prefix': 'summarize: '}}
R.t5_save_hf_dir(m, 'm', open('spm.model', 'rb').read(), model_max_length=64, task_specific_params=tasks)
"
$PY "$REPO/tools/export_t5.py" m "$REPO/tests/data/tiny-t5.gguf" --name tiny-t5 >/dev/null
ls -l "$REPO/tests/data/tiny-t5.gguf"
