#!/usr/bin/env bash
# The attack suite of docs/security.md: every defence of issue 20 tried against the real
# relay and bridge on loopback, bounded in count and time. Each test prints one
# `attack: <what>: <result>` line; this script prints those lines as the table and exits
# non-zero when any test fails. The same tests run in `cargo test --workspace`.
# Usage: scripts/attack-suite.sh [extra cargo test args]
set -euo pipefail
cd "$(dirname "$0")/.."
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --test 'attack_*' --test 'hostile_relay*' "$@" -- --nocapture --test-threads=1 >"$log" 2>&1
status=$?
set -e
echo "== the attack suite"
# With --nocapture a line may follow the harness's "test NAME ... " on the same line.
grep -oE '(attack: |hostile relay[:,] ).*' "$log" | sort -u || true
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;/) p += $i; if ($(i+1) ~ /^failed;/) f += $i } }
     END { printf "attack suite: %d tests passed, %d failed\n", p, f }' "$log"
if [ "$status" -ne 0 ]; then
    grep -E '^(test .* FAILED|---- |thread .* panicked)' "$log" | head -40 >&2
    echo "the attack suite failed (exit $status); the full log: rerun with the same arguments" >&2
fi
exit "$status"
