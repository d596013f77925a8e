#!/usr/bin/env bash
# Installs what a fresh machine lacks: Java 17, Chromium and PostgreSQL (apt), Python venv at
# .venv, pinned packages.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v java >/dev/null 2>&1; then
  echo "setup: installing Java 17 (openjdk-17-jre-headless) with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openjdk-17-jre-headless >/dev/null
fi

# Headless Chromium and its driver for the browser test of the Airflow UI (tests/airflow).
if ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; then
  echo "setup: installing chromium and chromium-driver with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium chromium-driver >/dev/null
fi

# PostgreSQL for `tideline postgres` (a private cluster: experiment metadata, Airflow's DB).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v pg_ctl >/dev/null 2>&1; then
  echo "setup: installing postgresql with apt"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
fi

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
echo "setup: installing pinned packages from requirements.lock"
.venv/bin/python -m pip install -q -r requirements.lock
.venv/bin/python -m pip install -q --no-deps -e .
.venv/bin/python -c "from spark_jobs.streaming.worker_path import install; install()"
echo "setup: done"
