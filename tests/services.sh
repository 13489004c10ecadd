#!/usr/bin/env bash
# Installs and starts what the test suite needs on a fresh Debian machine, idempotently.
# Today: a Rust toolchain (SQLite is compiled in by sqlx). Later parts add their peers here
# (Dovecot/OpenSMTPD for e-mail, PostgreSQL when none answers on 127.0.0.1:5432).
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "services: installing ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "services: cargo is not installed; ctxgate needs Rust 1.95" >&2
  exit 1
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt >/dev/null 2>&1 || true
echo "services: ready"
