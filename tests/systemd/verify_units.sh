#!/usr/bin/env bash
# systemd_analyze_verify: `systemd-analyze verify` of spited's units must print nothing at all.
# Unknown keys and unparsable values are only warnings (exit status 0), so stderr is the verdict.
#
# usage: verify_units.sh SYSTEMD_DIR SPITED_BINARY
# verify insists that ExecStart= names an executable file. The unit says /usr/bin/spited, which a
# build machine does not have; the units are checked as copies in a temporary directory whose
# ExecStart= names the freshly built spited instead, everything else unchanged.
set -euo pipefail
skip=77
src=${1:?usage: verify_units.sh SYSTEMD_DIR SPITED_BINARY}
spited=$(readlink -f "${2:?usage: verify_units.sh SYSTEMD_DIR SPITED_BINARY}")
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze not installed (package systemd)"; exit $skip; }
[[ -x "$spited" ]] || { echo "FAIL: $spited is not built"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
units=(spited.service spited.socket spited-http.socket)
for u in "${units[@]}"; do cp "$src/$u" "$work/$u"; done
grep -q '^ExecStart=/usr/bin/spited ' "$work/spited.service" ||
  { echo "FAIL: spited.service: ExecStart= is not /usr/bin/spited ..."; exit 1; }
sed -i "s|^ExecStart=/usr/bin/spited |ExecStart=$spited |" "$work/spited.service"

rc=0
(cd "$work" && systemd-analyze verify --man=no "${units[@]/#/$work/}") >"$work/out" 2>"$work/err" || rc=$?
cat "$work/out" "$work/err"
if [[ $rc -ne 0 || -s "$work/err" ]]; then
  echo "FAIL: systemd-analyze verify: exit status $rc, $(wc -l <"$work/err") line(s) on stderr (above)"
  exit 1
fi
echo "PASS: ${units[*]} verify cleanly ($(systemd-analyze --version | head -1))"
