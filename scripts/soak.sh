#!/usr/bin/env bash
# Runs every test binary of the suite N times in a row (default 20) on a machine kept busy by
# one `yes` per core, and counts the runs that failed. Not part of CI: a check that the
# timing-sensitive tests hold under load.
#
#   scripts/soak.sh [runs] [binary ...]   # binaries: lib zmqs conformance interop live model settlement_warnings
#
# The binaries are built with the features scripts/test.sh builds, both backends and the `zmqs`
# binary among them, so each scenario runs on each and the build is shared with the suite's; for
# the default backend alone:
#   SOAK_FEATURES=testing,asyncapi,metrics,cli scripts/soak.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
shift || true
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(lib zmqs conformance interop live model settlement_warnings)

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import zmq' 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check pyzmq
fi
export RUSTSTREAM_ZMQ_PYTHON="$PWD/.venv/bin/python"

# Each binary runs where cargo put it: the demo and fleet tests find their examples' build by
# that path. Build nothing else in this tree while it runs, or a binary is replaced mid-run.
declare -A binary
while IFS=$'\t' read -r name path; do
    binary[$name]=$path
done < <(cargo test --features "${SOAK_FEATURES:-testing,asyncapi,metrics,cli,libzmq,omq}" --no-run \
    --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]
        name = "lib" if kind == "lib" else m["target"]["name"]
        print(name, m["executable"], sep="\t")')

load=()
for _ in $(seq "$(nproc)"); do
    yes >/dev/null &
    load+=($!)
done
trap 'kill "${load[@]}" 2>/dev/null' EXIT

failed=0
for name in "${wanted[@]}"; do
    path=${binary[$name]:?no test binary named $name}
    bad=0
    for run in $(seq "$runs"); do
        if ! "$path" >"/tmp/soak-$name-$run.log" 2>&1; then
            bad=$((bad + 1))
            echo "$name: run $run failed, log in /tmp/soak-$name-$run.log"
        fi
    done
    echo "$name: $((runs - bad)) of $runs runs passed"
    failed=$((failed + bad))
done
[ "$failed" -eq 0 ]
