#!/usr/bin/env bash
# The README's test command: the Rust workspace's tests, then the Python
# package's (built into a fresh virtualenv under target/, tested with pytest).
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test --workspace --features pagewise-bench/peers"
cargo test --workspace --features pagewise-bench/peers

echo "== python: build bindings/python into target/py-test-venv and run pytest"
python="${PYTHON:-python3}"
venv=target/py-test-venv
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "maturin>=1.5,<2" "pytest>=7" "hypothesis>=6"
# A dev-profile build (dependencies at opt-level 2): quicker to build than
# the release wheel `pip install ./bindings/python` makes.
(cd bindings/python && VIRTUAL_ENV="$PWD/../../$venv" "../../$venv/bin/maturin" develop --quiet)
(cd bindings/python && "../../$venv/bin/python" -m pytest -q tests)
