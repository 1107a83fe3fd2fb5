#!/bin/sh
# make demo: translate a few German sentences of different kinds, a paragraph and a line of
# HTML with the shipped model, then show where the model looked for one of them.
set -e
ATTEND=${ATTEND:-build/attend}
MODEL=${MODEL:-models/de-en.gguf}
if [ ! -f "$MODEL" ]; then
    echo "demo: $MODEL is missing (see models/README.md for how to train it)" >&2
    exit 3
fi
for s in "Ein Mann fährt mit dem Fahrrad durch die Stadt." \
         "Ich habe Hunger." \
         "Wo ist der Bahnhof?" \
         "Zwei Kinder spielen im Schnee." \
         "Kannst du mir bitte helfen?"; do
    printf '%s\n  -> %s\n' "$s" "$("$ATTEND" translate -m "$MODEL" "$s")"
done
p="Der Zug ist weg. Wir warten auf den nächsten. Er kommt in zehn Minuten."
printf '%s\n  -> %s\n' "$p" "$("$ATTEND" translate -m "$MODEL" "$p")"
h='Wo ist der <a href="/bahnhof">Bahnhof</a>? Ich habe einen <b>Hund</b>.'
printf '%s\n  -> %s\n' "$h" "$("$ATTEND" translate -m "$MODEL" --format html "$h")"
if "$ATTEND" align --help >/dev/null 2>&1; then
    echo
    echo "Where the model looked (cross-attention, attend align):"
    "$ATTEND" align -m "$MODEL" "Wo ist der Bahnhof?"
fi
