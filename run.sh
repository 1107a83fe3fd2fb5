#!/bin/sh
# The README's quick start on any Debian, a minimal one too: `sh run.sh demo`, `sh run.sh test`
# (or any other make target). Installs make first where it is missing (apt-get, as root; else
# it prints the sudo command), then runs make, whose targets install the rest themselves.
set -e
cd "$(dirname "$0")"
if ! command -v make >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        echo "run.sh: installing make"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq make >/dev/null
    else
        echo "run.sh: make is missing; run: sudo apt-get install -y make" >&2
        exit 1
    fi
fi
exec make "$@"
