# Sourced by the make_tiny*.sh scripts (after set -eu): REPO, DATA (the shared Tatoeba
# German-English data), PY, and T, a temporary folder removed on exit.
REPO=$(cd "$(dirname "$0")/../.." && pwd)
DATA="$REPO/../shared/data/tatoeba-deu-eng"
PY=/usr/bin/python3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# bilingual N FILE: the first N German then the first N English training lines, in FILE
bilingual() {
  { zcat "$DATA/tatoeba-deu-eng.train.de.gz" | head -"$1"; zcat "$DATA/tatoeba-deu-eng.train.en.gz" | head -"$1"; } > "$2"
}
