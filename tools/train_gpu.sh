#!/bin/sh
# Train candidate models side by side on a lent GPU machine, in the background, across
# several short commands (a command may run 10 minutes; the machine keeps files and
# background processes between commands while it stays warm).
#
#   Here, once:  /usr/bin/python3 tools/train.py --data-dir build/gpu/data --work build/gpu/work --prepare-only
#                (build/gpu/data holds copies of the ../shared/data folders train.py reads)
#   There:       sh tools/train_gpu.sh start SECONDS    launch every run, then watch
#                sh tools/train_gpu.sh watch SECONDS    progress lines until all end or SECONDS pass
#                sh tools/train_gpu.sh finish           wait, export each run to f16 .gguf, and put
#                                                       the files (in 15 MB parts) and logs in $OUT
# Each run is one line of RUNS: a name and its model options. The shipped model is d320 (it
# had the better full-dev BLEU of the two, 43.88 against 42.39).
set -u
G=build/gpu
PY=${PYTHON:-python3}
# train.py's defaults are the rest of the recipe (12,000-token batches, lr 7e-4, 6-minute
# cool-down, Multi30k 3 times an epoch, checkpoints every 500 steps, average of 4).
COMMON="--device cuda --threads 4 --data-dir $G/data --max-train-minutes ${MINUTES:-18} --log-every 500"
RUNS="w384 --d-model 384 --heads 6 --ffn 1280 --enc-layers 6 --dec-layers 3
d320 --d-model 320 --heads 5 --ffn 1280 --enc-layers 6 --dec-layers 5"

running() { pgrep -f "tools/train.py --device cuda" >/dev/null; }

watch() {
    end=$(( $(date +%s) + $1 ))
    while [ "$(date +%s)" -lt "$end" ] && running; do
        sleep 30
        for log in $G/*.log; do printf '%s: ' "$log"; grep -E "checkpoint:|step .* of epoch|Error|error" "$log" | tail -1; done
    done
}

case "${1:-}" in
start)
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
    $PY -c "import torch, sentencepiece; print('torch', torch.__version__, torch.cuda.is_available())"
    echo "$RUNS" | while read -r name opts; do
        rm -rf "$G/$name" && mkdir -p "$G/$name" && cp -r $G/work/. "$G/$name/"
        # shellcheck disable=SC2086
        PYTHONUNBUFFERED=1 setsid nohup $PY tools/train.py $COMMON $opts --work "$G/$name" \
            --out "$G/$name/hf" >"$G/$name.log" 2>&1 </dev/null &
    done
    sleep 60
    for log in $G/*.log; do echo "== $log"; tail -4 "$log"; done
    watch "${2:-480}" ;;
watch)
    watch "${2:-540}" ;;
finish)
    while running; do sleep 10; done
    echo "$RUNS" | while read -r name opts; do
        tail -6 "$G/$name.log"
        $PY tools/export_marian.py "$G/$name/hf" "$G/$name.gguf" --dtype f16 --name de-en &&
            split -b 15000000 -d "$G/$name.gguf" "$OUT/$name.gguf.part"
    done
    tar czf "$OUT/logs.tar.gz" $G/*.log $G/*/train-info.json $G/*/hf/config.json 2>/dev/null
    ls -l "$OUT" ;;
*)
    sed -n '2,14p' "$0"; exit 2 ;;
esac
