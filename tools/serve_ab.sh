#!/bin/sh
# Two attend builds' servers under hey, alternating (A B A B ...), for a before/after of the
# scheduler: tools/serve_ab.sh OLD/build/attend build/attend [rounds] [model]
# Prints requests/s, p50 and p99 (seconds) and the status codes per build and worker count.
set -e
a=$1 b=$2 rounds=${3:-2} model=${4:-models/de-en.gguf}
[ -x "$a" ] && [ -x "$b" ] || { echo "usage: $0 ATTEND_A ATTEND_B [rounds] [model]" >&2; exit 2; }
command -v hey >/dev/null || { echo "hey is not installed (Debian: apt-get install hey)" >&2; exit 2; }
body='{"q": "Ein Mann mit einem orangefarbenen Hut starrt auf etwas."}'
log=$(mktemp)
for round in $(seq "$rounds"); do
  for bin in "$a" "$b"; do
    "$bin" serve -m "$model" -t 2 --port 0 --no-access-log 2>"$log" &
    pid=$!
    port=
    while [ -z "$port" ]; do sleep 0.2; port=$(grep -o '127.0.0.1:[0-9]*' "$log" | head -1 | cut -d: -f2); done
    for c in 1 16 64; do
      r=$(hey -z 5s -c $c -m POST -T application/json -d "$body" "http://127.0.0.1:$port/translate")
      echo "round $round $bin workers=$c $(echo "$r" | grep Requests/sec | tr -s '\t ' ' ')" \
           "p50 $(echo "$r" | grep ' 50% in' | awk '{print $3}') p99 $(echo "$r" | grep ' 99% in' | awk '{print $3}')" \
           "$(echo "$r" | grep -A3 'Status code' | tail -n +2 | tr -s '\n\t ' ' ')"
    done
    kill $pid; wait $pid 2>/dev/null || true
  done
done
rm -f "$log"
