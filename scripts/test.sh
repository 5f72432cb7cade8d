#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs them all:
# Python deps (TensorFlow CPU, TensorBoard, pytest, Playwright), the plugin
# itself (which builds the frontend with npm), Debian's Chromium for the
# browser tests, then the frontend's unit tests and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
fi

python3 -m pip install -q --upgrade pip
python3 -m pip install -q "tensorflow-cpu==2.21.*" "tensorboard==2.21.*" pytest playwright build
(cd frontend && npm ci --no-audit --no-fund)
python3 -m pip install -q .

(cd frontend && npm run typecheck && npm test)
python3 -m pytest -q tests "$@"
