#!/usr/bin/env bash
# Idle resident memory of `ctxgate serve` on its embedded defaults (release build).
# Usage: bash benches/idle_rss.sh   (prints VmRSS after start-up and 5 s idle)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cargo build --release --bin ctxgate --manifest-path "$root/Cargo.toml" >/dev/null 2>&1
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
CTXGATE__HTTP__LISTEN=127.0.0.1:0 "$root/target/release/ctxgate" serve >log 2>&1 &
pid=$!
for _ in $(seq 100); do grep -q "ctxgate listening" log && break; sleep 0.1; done
grep -q "ctxgate listening" log || { cat log; exit 1; }
sleep 5
echo "idle RSS of ctxgate serve: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
