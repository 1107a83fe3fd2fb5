# Sourced by the make_tiny*.sh scripts (after set -eu): REPO, DATA (the shared Tatoeba
# German-English data: ../shared/data beside the checkout, or $ATTEND_DATA, as
# tools/data_paths.py finds it), PY, and T, a temporary folder removed on exit.
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DATA="${ATTEND_DATA:-$REPO/../shared/data}/tatoeba-deu-eng"
if [ ! -d "$DATA" ]; then
  echo "$0: missing corpus $DATA (../shared/data beside the checkout, or set ATTEND_DATA=DIR)" >&2
  exit 1
fi
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# bilingual N FILE: the first N German then the first N English training lines, in FILE
bilingual() {
  { zcat "$DATA/tatoeba-deu-eng.train.de.gz" | head -"$1"; zcat "$DATA/tatoeba-deu-eng.train.en.gz" | head -"$1"; } > "$2"
}

# shared_spm [OPTIONS]: $T/spm.model, one SentencePiece model of 300 pieces with identity
# normalization for both languages, trained on $T/all.txt (bilingual 2000); OPTIONS: more
# trainer arguments, e.g. "model_type='bpe', num_threads=1"
shared_spm() {
  bilingual 2000 "$T/all.txt"
  (cd "$T" && $PY -c "
import sentencepiece as s
s.SentencePieceTrainer.train(input='all.txt', model_prefix='spm', vocab_size=300, minloglevel=2,
                             normalization_rule_name='identity'${1:+, $1})
")
}
