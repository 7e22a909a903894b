#!/usr/bin/env bash
# Fuzzes the wire decoders (fuzz/fuzz_targets/decode.rs) with libFuzzer for $1 seconds (60 by
# default). Not part of CI. The toolchain is stable: RUSTC_BOOTSTRAP lets cargo-fuzz use the
# sanitizer flags it needs. Extra arguments after the first go to libFuzzer.
#   scripts/fuzz.sh            # 60 s
#   scripts/fuzz.sh 600 -jobs=2
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz
fi

seconds="${1:-60}"
shift || true
RUSTC_BOOTSTRAP=1 cargo fuzz run decode -- -max_total_time="$seconds" "$@"
