#!/usr/bin/env bash
# Builds the release binary with profile-guided optimisation (docs/performance.md):
#  1. the server and the serve bench built with `-Cprofile-generate`;
#  2. the training: the bench's `--train` runs every testdata case in-process and through
#     the instrumented server (TLS, HTTP, scan, verdict cache; Resources and Pipeline, v1
#     and v2, allowed, warned and denied), and both processes write their profiles;
#  3. the profiles merged with llvm-profdata;
#  4. the release build with `-Cprofile-use`, copied to --out.
# Needs nothing outside the repository but the toolchain and its llvm-tools component.
#
#   scripts/pgo-build.sh [--target TRIPLE] [--out FILE] [--bench-out FILE]
#
# --target: the target to build (default: the host); the instrumented binaries run here,
#   so it must run on this machine (the image builds musl on a Linux host of the same
#   architecture).
# --out: where the optimised server goes (default: target/pgo/composition-webhook).
# --bench-out: also build the serve bench with the profile and put it there (for
#   in-process figures of the same code; its server figures measure --out through
#   SERVE_BENCH_BIN).
# LLVM_PROFDATA: the llvm-profdata to merge with (default: the one of rustc's llvm-tools
#   component, `rustup component add llvm-tools`, whose LLVM is rustc's own).
# CARGO_TARGET_DIR: where cargo builds (default: target); the instrumented and optimised
#   builds go under <dir>/pgo-generate and <dir>/pgo-use, apart from plain builds.
set -euo pipefail
cd "$(dirname "$0")/.."

host=$(rustc -vV | sed -n 's/^host: //p')
target=$host
dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
out=$dir/pgo/composition-webhook
bench_out=
while [ $# -gt 0 ]; do
    case $1 in
        --target) target=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --bench-out) bench_out=$2; shift 2 ;;
        *) echo "usage: $0 [--target TRIPLE] [--out FILE] [--bench-out FILE]" >&2; exit 2 ;;
    esac
done

profdata=${LLVM_PROFDATA:-$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata}
if [ ! -x "$profdata" ]; then
    echo "error: no llvm-profdata at $profdata: run 'rustup component add llvm-tools', or set LLVM_PROFDATA to an llvm-profdata that reads the raw profiles of rustc's LLVM ($(rustc -vV | sed -n 's/^LLVM version: //p'))" >&2
    exit 1
fi

work=$dir/pgo
raw=$work/raw
rm -rf "$raw" "$work"/merged*.profdata
mkdir -p "$raw"

# The executable cargo reports for the target of this kind ("bin" or "bench").
executable() {
    sed -n "/\"kind\":\[\"$1\"\]/s/.*\"executable\":\"\([^\"]*\)\".*/\1/p" "$2" | tail -1
}

# With --target, RUSTFLAGS reach only what is built for the target, not build scripts and
# proc macros, which would otherwise be instrumented too.
echo "== 1/4 instrumented build ($target)" >&2
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$raw" CARGO_TARGET_DIR=$dir/pgo-generate \
    cargo build --release --locked --target "$target" \
    --bin composition-webhook --bench serve \
    --message-format=json-render-diagnostics > "$work/generate.json"
bench=$(executable bench "$work/generate.json")
[ -n "$bench" ] || { echo "error: cargo reported no serve bench executable" >&2; exit 1; }

echo "== 2/4 training" >&2
# The bench runs the server cargo built beside it (CARGO_BIN_EXE_composition-webhook).
env -u SERVE_BENCH_BIN -u SERVE_BENCH_COMPOSITION "$bench" \
    --train 200 --concurrency 1,8 --seconds 1 --rounds 1 --warmup 1 >&2
# One profile per binary (the default name carries the binary's signature): the bench's
# and the server's. Without the server's, the server's own paths would be optimised as cold.
profiles=$(find "$raw" -name '*.profraw' | wc -l)
if [ "$profiles" -lt 2 ]; then
    echo "error: $profiles raw profiles in $raw; the bench's and the server's were expected" >&2
    exit 1
fi

echo "== 3/4 merge ($profiles raw profiles)" >&2
"$profdata" merge -o "$work/merged.profdata" "$raw"
# Named by its content: cargo sees RUSTFLAGS change, not the file it names, so a new
# profile under the same name would leave what an earlier build optimised (the crates
# that did not change) with the earlier profile.
merged=$work/merged-$(sha256sum "$work/merged.profdata" | cut -c1-16).profdata
mv "$work/merged.profdata" "$merged"

echo "== 4/4 optimised build" >&2
targets=(--bin composition-webhook)
[ -z "$bench_out" ] || targets+=(--bench serve)
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$merged" CARGO_TARGET_DIR=$dir/pgo-use \
    cargo build --release --locked --target "$target" "${targets[@]}" \
    --message-format=json-render-diagnostics > "$work/use.json"
mkdir -p "$(dirname "$out")"
cp "$(executable bin "$work/use.json")" "$out"
echo "optimised with a profile: $out" >&2
if [ -n "$bench_out" ]; then
    mkdir -p "$(dirname "$bench_out")"
    cp "$(executable bench "$work/use.json")" "$bench_out"
    echo "serve bench with the same profile: $bench_out" >&2
fi
