#!/usr/bin/env bash
# Renders the `cargo generate` template (templates/zmq) the way cargo-generate does, with this
# repository's crate in place of the published one, then checks and tests the rendered service:
# an API change breaks this build, not a user's first service. Needs no cargo-generate.
#
#   scripts/check-template.sh [project-name]   # default: zmq-template-check
#
# It substitutes cargo-generate's placeholders ({{project-name}}, {{crate_name}}, {{authors}}),
# drops the `.liquid` suffix and `cargo-generate.toml` as cargo-generate does, and fails on any
# placeholder or tag left over. The rendered project builds in this repository's target dir
# (CARGO_TARGET_DIR, unless set), from a copy of its Cargo.lock, so it reuses what is built.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
name=${1:-zmq-template-check}
crate_name=${name//-/_}
authors=${CARGO_GENERATE_AUTHORS:-"template check"}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest="$work/$name"
cp -R templates/zmq "$dest"
rm -f "$dest/cargo-generate.toml"

while IFS= read -r -d '' file; do
    sed -i \
        -e "s/{{project-name}}/$name/g" \
        -e "s/{{crate_name}}/$crate_name/g" \
        -e "s/{{authors}}/$authors/g" \
        "$file"
    case "$file" in
        *.liquid) mv "$file" "${file%.liquid}" ;;
    esac
done < <(find "$dest" -type f -print0)

if grep -rnE '\{\{|\{%' "$dest"; then
    echo "check-template: the lines above hold a placeholder this script does not render" >&2
    exit 1
fi
[ -f "$dest/Cargo.toml" ] || { echo "check-template: no Cargo.toml rendered" >&2; exit 1; }

cat >>"$dest/Cargo.toml" <<EOF

# Added by scripts/check-template.sh: this repository's crate in place of the published one.
[patch.crates-io]
ruststream-zmq = { path = "$repo" }
EOF
cp Cargo.lock "$dest/Cargo.lock"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target}
cd "$dest"
cargo fmt --check
# A warning in the rendered service is a defect of the template: fail on one.
log="$work/check.log"
cargo check --all-targets 2>&1 | tee "$log"
if grep -q '^warning' "$log"; then
    echo "check-template: the rendered service compiles with warnings" >&2
    exit 1
fi
cargo test
echo "check-template: templates/zmq rendered as $name, checked and tested"
