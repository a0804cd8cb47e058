#!/usr/bin/env bash
# Runs the whole test suite (README's command) with a CPU hog on every core beside it, as on a
# shared machine with other builds running: the suite must pass there too.
#
#   scripts/busy-suite.sh            # 5 runs in a row, one hog per core
#   RUNS=1 HOGS=4 scripts/busy-suite.sh -- --test bounded
#
# Arguments after `--` go to `cargo test`. The hogs are busy shell loops at the suite's own
# priority; they start after the build (so the runs time tests, not compiles) and stop with the
# script. It prints each run's result and the load averages seen (sampled every 5 s), and exits
# non-zero at the first failing run. Logs: target/busy-suite/run-N.log.
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${RUNS:-5}
hogs=${HOGS:-$(nproc)}
args=()
if [[ ${1:-} == "--" ]]; then
    shift
    args=("$@")
fi
logs=target/busy-suite
mkdir -p "$logs"

echo "busy-suite: building the tests first"
cargo test --locked --no-run ${args[@]+"${args[@]}"} >"$logs/build.log" 2>&1 || {
    tail -40 "$logs/build.log"
    exit 1
}

pids=()
cleanup() {
    for pid in ${pids[@]+"${pids[@]}"}; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
trap cleanup EXIT

for _ in $(seq "$hogs"); do
    bash -c 'while :; do :; done' &
    pids+=($!)
done
: >"$logs/load.txt"
(
    while :; do
        cut -d' ' -f1-3 /proc/loadavg >>"$logs/load.txt"
        sleep 5
    done
) &
pids+=($!)
echo "busy-suite: $hogs hogs on $(nproc) cores, $runs runs"

summary() {
    # The 1-minute load averages sampled during the runs: lowest, median, highest.
    sort -n "$logs/load.txt" | awk '{ a[NR] = $1 } END {
        if (NR) printf "load (1-min) min %s, median %s, max %s over %d samples\n",
            a[1], a[int((NR + 1) / 2)], a[NR], NR }'
}

for run in $(seq "$runs"); do
    started=$(date +%s)
    if cargo test --locked --no-fail-fast ${args[@]+"${args[@]}"} >"$logs/run-$run.log" 2>&1; then
        verdict=passed
    else
        verdict=FAILED
    fi
    passed=$(grep -Eo '[0-9]+ passed' "$logs/run-$run.log" | awk '{ s += $1 } END { print s + 0 }')
    failed=$(grep -Eo '[0-9]+ failed' "$logs/run-$run.log" | awk '{ s += $1 } END { print s + 0 }')
    echo "run $run: $verdict in $(($(date +%s) - started)) s ($passed tests passed, $failed failed); $(cut -d' ' -f1-3 /proc/loadavg)"
    if [[ $verdict == FAILED ]]; then
        grep -E '^(---- |test .* FAILED|error: test failed|thread .* panicked)' "$logs/run-$run.log" | head -40
        summary
        exit 1
    fi
done
summary
echo "busy-suite: $runs of $runs runs passed"
