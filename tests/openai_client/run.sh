#!/bin/sh
# Runs client.mjs (the official openai Node SDK) against a spited started here on a free port with
# an API key. The SDK is installed once into ${XDG_CACHE_HOME:-$HOME/.cache}/spite/openai-node.
# Exit 77 (skipped) when node/npm are missing or npm cannot reach its registry; any other
# failure fails.
#
#   run.sh SPITED SPITECTL
set -eu
spited=$1
spitectl=$2
here=$(cd "$(dirname "$0")" && pwd)
skip() {
  echo "SKIPPED: $*"
  exit 77
}

command -v node >/dev/null 2>&1 || skip "node is not installed"
command -v npm >/dev/null 2>&1 || skip "npm is not installed"
shared=${SPITE_SHARED_DIR:-${SPITE_SHARED_DIR_DEFAULT:-$here/../../../shared}}
model=$shared/models/stories260K.gguf
golden=$shared/golden/logits/stories260K.gguf.json
if [ ! -f "$model" ] || [ ! -f "$golden" ]; then
  echo "shared test data not found under '$shared'; set SPITE_SHARED_DIR"
  exit 1
fi

# The SDK, installed once per package.json (a lock keeps two builds' tests from racing).
cache=${XDG_CACHE_HOME:-$HOME/.cache}/spite/openai-node
mkdir -p "$cache"
install_log=$cache/install.log
status=0
(
  flock 9
  if ! cmp -s "$here/package.json" "$cache/package.json" || [ ! -f "$cache/node_modules/openai/package.json" ]; then
    cp "$here/package.json" "$cache/package.json"
    rm -rf "$cache/node_modules" "$cache/package-lock.json"
    (cd "$cache" && npm install --no-audit --no-fund --fetch-retries=1 --fetch-timeout=30000 >"$install_log" 2>&1) || {
      rm -f "$cache/package.json"
      exit 3
    }
  fi
) 9>"$cache/.lock" || status=$?
if [ "$status" -ne 0 ]; then
  if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network' "$install_log"; then
    skip "npm cannot reach its registry ($(grep -Em1 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|network' "$install_log"))"
  fi
  echo "npm install failed:"
  cat "$install_log"
  exit 1
fi

work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/spite.toml" <<TOML
[server]
api_keys = ["spite-test-key"]

[control]
socket = "$work/ctl.sock"

[inference]
threads = 1

[[model]]
name = "stories"
path = "$model"
TOML

"$spited" --port 0 --config "$work/spite.toml" >"$work/spited.log" 2>&1 &
pid=$!
port=
i=0
while [ $i -lt 600 ]; do
  if ! kill -0 "$pid" 2>/dev/null; then
    echo "spited exited early:"
    cat "$work/spited.log"
    exit 1
  fi
  if "$spitectl" status --socket "$work/ctl.sock" --json >"$work/status.json" 2>/dev/null; then
    port=$(node -e 'const s = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8")); process.stdout.write((s.http || "").split(":").pop())' "$work/status.json")
    [ -n "$port" ] && [ "$port" != 0 ] && break
  fi
  i=$((i + 1))
  sleep 0.05
done
if [ -z "$port" ]; then
  echo "spited did not report its HTTP port:"
  cat "$work/spited.log"
  exit 1
fi

# The script runs from the work folder; node finds the SDK through the linked node_modules.
cp "$here/client.mjs" "$work/client.mjs"
ln -s "$cache/node_modules" "$work/node_modules"
echo "openai SDK $(cd "$cache" && npm ls openai --depth=0 2>/dev/null | grep -o 'openai@[0-9.]*'), spited on port $port"
rc=0
node "$work/client.mjs" "$port" spite-test-key "$golden" || rc=$?
kill -TERM "$pid"
spited_rc=0
wait "$pid" || spited_rc=$?
pid=
if [ "$spited_rc" -ne 0 ]; then
  echo "spited exited with status $spited_rc:"
  cat "$work/spited.log"
  exit 1
fi
if [ "$rc" -ne 0 ]; then
  echo "spited's log:"
  cat "$work/spited.log"
fi
exit "$rc"
