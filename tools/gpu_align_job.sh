#!/bin/sh
# Issue 38's GPU work in one command on a lent GPU machine (15 minutes of device time in all):
# an English->German model of the shipped model's recipe (tools/train.py --reverse, a shorter
# time budget) and two guided-alignment fine-tunes of models/de-en.gguf (tools/guided_align.py),
# side by side on the one GPU. What comes back under $OUT: the en-de .gguf in 15 MB parts, the
# two fine-tunes' changed tensors (guided_align.py apply puts them into a model file), a log each.
#
#   Here, first:  sh tools/gpu_align_job.sh prepare     (build/gpu: the corpora train.py and
#                 word_align.py read, copied from ../shared/data; the de-en SentencePiece model
#                 for en-de, so both directions share one vocabulary; the labels of
#                 tools/guided_labels.py, made beforehand as build/guided/labels.npz)
#   There:        sh tools/gpu_align_job.sh run         (carry build/gpu)
#   Here, after:  cat en-de.gguf.part* > en-de.gguf (the files come back split, 15 MB each)
set -u
G=build/gpu
PY=${PYTHON:-python3}
MIN_ENDE=${MIN_ENDE:-6}      # en-de training minutes (the shipped de-en had 18)
MIN_GUIDED=${MIN_GUIDED:-5}  # each fine-tune's minutes
HEADS=${HEADS:-"1:2 3:1"}    # the heads to guide, one fine-tune each (layer:head)

prepare() {
    mkdir -p $G/data $G/ende
    for d in multi30k tatoeba-deu-eng tatoeba-anki-deu-eng wmt-newstest-extra-deen wmt-ende-10k-onmt \
             align-deen-bicici; do
        rm -rf "$G/data/$d" && cp -r "../shared/data/$d" "$G/data/$d"
    done
    /usr/bin/python3 -c "import sys; sys.path.insert(0, 'tools'); import gguf_io; \
open('$G/ende/joint.spm', 'wb').write(gguf_io.GGUFFile('models/de-en.gguf').metadata['tokenizer.source_spm'].tobytes())"
    cp build/guided/labels.npz $G/labels.npz
    du -sh $G
}

run() {
    export ATTEND_DATA="$PWD/$G/data" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    $PY -c "import torch, sentencepiece, numpy; print('torch', torch.__version__, torch.cuda.is_available(), \
'spm', sentencepiece.__version__, 'numpy', numpy.__version__)"
    ( $PY tools/train.py --device "${DEVICE:-cuda}" --threads 4 --data-dir $G/data --reverse --work $G/ende \
          --out $G/ende/hf --max-train-minutes "$MIN_ENDE" --cooldown-minutes 2 --save-every 1000 \
          --average 2 --log-every 500 >"$OUT/en-de.log" 2>&1 &&
      $PY tools/export_marian.py $G/ende/hf $G/en-de.gguf --dtype f16 --name en-de >>"$OUT/en-de.log" 2>&1 &&
      split -b 15000000 -d $G/en-de.gguf "$OUT/en-de.gguf.part" ) &
    for h in $HEADS; do
        n=$(echo "$h" | tr : -)
        $PY tools/guided_align.py train $G/labels.npz --head "$h" --minutes "$MIN_GUIDED" \
            --gold $G/data/align-deen-bicici --bleu 300 ${DEVICE:+--device $DEVICE} --work "$G/guided-$n" \
            -o "$OUT/guided-$n.npz" >"$OUT/guided-$n.log" 2>&1 &
    done
    sleep 90
    tail -n 3 "$OUT"/*.log
    wait
    tail -n 4 "$OUT"/*.log
    ls -l "$OUT"
}

case "${1:-}" in
prepare) prepare ;;
run) run ;;
*) sed -n 2,15p "$0"; exit 2 ;;
esac
