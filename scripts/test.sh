#!/usr/bin/env bash
# The whole test suite, on a fresh machine too, on all three socket backends: prepares the libzmq
# peer (pyzmq in a virtualenv under .venv) that the interop tests drive, then builds once with
# every backend compiled (libzmq needs its headers, see docs/backends.md) and runs every test
# target, the doc tests and the compile-fail cases; each scenario that opens sockets runs once
# per backend (`on_zeromq::...`, `on_libzmq::...`, `on_omq::...`). Each backend alone is then
# checked to compile and be lint-clean, which is all a build with one backend adds.
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

# `cli` builds the `zmqs` binary, which the interop tests run.
features=testing,asyncapi,metrics,cli
echo "== the suite, every backend: --features $features,libzmq,omq"
cargo test --features "$features,libzmq,omq" --all-targets
cargo test --features "$features,libzmq,omq" --doc

for backend in zeromq libzmq omq; do
    echo "== $backend alone: clippy --no-default-features --features $features,$backend"
    cargo clippy --no-default-features --features "$features,$backend" --all-targets -- -D warnings
done

# The `cargo generate` template, rendered and checked.
scripts/check-template.sh
