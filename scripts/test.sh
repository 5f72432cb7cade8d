#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine, then runs them all:
# Python deps (TensorFlow CPU, TensorBoard, pytest, hypothesis, Playwright), the plugin
# itself (which builds the frontend with npm), Debian's Chromium for the
# browser tests and python3-venv for the install smoke test, then the
# frontend's unit tests and pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: apt-get as root, else through sudo; the package lists are
# fetched once, and only when something is missing.
apt_updated=
apt_install() {
  local sudo=
  [ "$(id -u)" = 0 ] || sudo=sudo
  if [ -z "$apt_updated" ]; then
    $sudo apt-get update -qq
    apt_updated=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# `python3 -m venv` with pip, as the smoke test uses it (wheel into a fresh venv).
venv_works() {
  local tmp rc=0
  tmp=$(mktemp -d)
  python3 -m venv "$tmp/venv" >/dev/null 2>&1 || rc=$?
  rm -rf "$tmp"
  return "$rc"
}

if ! command -v chromium >/dev/null 2>&1; then
  apt_install chromium
fi
if ! venv_works; then
  # Debian's python3 ships venv without ensurepip until python3-venv is installed.
  apt_install python3-venv
  if ! venv_works; then
    echo "python3 -m venv still fails after installing python3-venv ($(command -v python3))" >&2
    exit 1
  fi
fi

python3 -m pip install -q --upgrade pip
python3 -m pip install -q "tensorflow-cpu==2.21.*" "tensorboard==2.21.*" pytest hypothesis playwright build
(cd frontend && npm ci --no-audit --no-fund)
python3 -m pip install -q .

(cd frontend && npm run typecheck && npm test)
python3 -m pytest -q tests "$@"
