#!/usr/bin/env bash
# Installs the Debian packages radstack needs on one machine, only when they are missing:
# OpenJDK 17 and Maven (JVM components from Maven Central), PostgreSQL 15 (metadata-store tests
# and production-like runs), Python venv support, Chromium + chromedriver (the console's browser tests).
set -euo pipefail
need=()
command -v java >/dev/null || need+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need+=(maven)
command -v curl >/dev/null || need+=(curl)  # the README tour (and its test) query with curl
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
python3.11 -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if ((${#need[@]})); then
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi
  echo "installing Debian packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
