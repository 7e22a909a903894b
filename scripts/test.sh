#!/usr/bin/env bash
# The whole test suite, on a fresh machine too: prepares the libzmq peer (pyzmq in a
# virtualenv under .venv) that the interop tests drive, then runs every test target, the
# doc tests and the compile-fail cases.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import zmq' 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check pyzmq
fi
export RUSTSTREAM_ZMQ_PYTHON="$PWD/.venv/bin/python"

cargo test --all-features --all-targets
cargo test --all-features --doc
scripts/check-template.sh
