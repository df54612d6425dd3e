#!/usr/bin/env bash
# systemd_analyze_security: the overall exposure of spited.service, as `systemd-analyze security`
# rates it offline (0 = locked down .. 10 = unprotected), must stay at or below the limit.
#
# usage: security.sh SYSTEMD_DIR [LIMIT]   (LIMIT defaults to 2.5)
set -euo pipefail
skip=77
src=${1:?usage: security.sh SYSTEMD_DIR [LIMIT]}
limit=${2:-2.5}
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not installed (package systemd)"; exit $skip; }

out=$(systemd-analyze security --offline=yes --no-pager "$src/spited.service" 2>&1) || {
  echo "$out"; echo "FAIL: systemd-analyze security failed"; exit 1; }
# "→ Overall exposure level for spited.service: 1.7 OK 🙂"
level=$(sed -n 's/.*Overall exposure level for spited\.service: \([0-9][0-9.]*\).*/\1/p' <<<"$out" | tail -1)
if [[ -z "$level" ]]; then
  echo "$out"; echo "FAIL: no overall exposure level in the output above"; exit 1
fi
if awk -v l="$level" -v m="$limit" 'BEGIN { exit !(l > m) }'; then
  echo "$out" | grep '✗' || true
  echo "FAIL: spited.service exposure $level > $limit (the settings marked ✗ above add to it)"
  exit 1
fi
echo "PASS: spited.service exposure $level <= $limit"
