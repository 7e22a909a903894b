#!/usr/bin/env bash
# The whole test suite, on a fresh machine too, on both socket backends: prepares the libzmq
# peer (pyzmq in a virtualenv under .venv) that the interop tests drive, then runs every test
# target, the doc tests and the compile-fail cases with both backends compiled (the crate root
# on the pure-Rust `zeromq` client) and with libzmq alone (needs libzmq's headers, see the
# README).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import zmq' 2>/dev/null; then
    python3 -m venv .venv
    .venv/bin/pip install --quiet --disable-pip-version-check pyzmq
fi
export RUSTSTREAM_ZMQ_PYTHON="$PWD/.venv/bin/python"

# The libzmq backend builds against the system's libzmq (Debian/Ubuntu: libzmq3-dev).
if ! pkg-config --exists libzmq 2>/dev/null; then
    echo "libzmq's headers are missing: installing libzmq3-dev and pkg-config"
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq libzmq3-dev pkg-config
fi

# First both backends, the crate root's brokers on the default `zeromq` client (and the tests
# that name libzmq, or both); then libzmq alone, so that every scenario written against the
# crate root runs on libzmq too.
features=testing,asyncapi,metrics,libzmq
for build in "--features $features" "--no-default-features --features $features"; do
    echo "== the suite with: $build"
    # shellcheck disable=SC2086 # two words, on purpose
    cargo test $build --all-targets
    # shellcheck disable=SC2086
    cargo test $build --doc
done

# The `cargo generate` template, rendered and checked.
scripts/check-template.sh
