#!/usr/bin/env bash
# The README's main command: starts spited with a small model, sends it one request over the
# control socket (spitectl run) and one over the OpenAI HTTP API, then stops it.
#   tools/demo.sh [MODEL.gguf] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
model=${1:-${SPITE_SHARED_DIR:-$root/../shared}/models/stories260K.gguf}
build=${2:-$root/build}
model=$(readlink -f "$model")
work=$(mktemp -d)
"$build/bin/spited" --model "demo=$model" --socket "$work/spited.sock" --port "${SPITE_DEMO_PORT:-0}" 2>"$work/spited.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 100); do
  "$build/bin/spitectl" status --socket "$work/spited.sock" >/dev/null 2>&1 && break
  kill -0 $pid 2>/dev/null || { cat "$work/spited.log"; exit 1; }
  sleep 0.1
done
# The HTTP port spited chose (any free one unless SPITE_DEMO_PORT is set).
port=$("$build/bin/spitectl" status --socket "$work/spited.sock" --json | sed -n 's/.*"http": "[^"]*:\([0-9]*\)".*/\1/p')
echo "== spited is running:"
"$build/bin/spitectl" status --socket "$work/spited.sock"
echo
echo "== spitectl run --socket ... (through the daemon):"
"$build/bin/spitectl" run --socket "$work/spited.sock" --model demo --prompt "Once upon a time" -n 48 --temperature 0
echo
echo "== POST http://127.0.0.1:$port/v1/chat/completions:"
body='{"model":"demo","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":32,"temperature":0}'
exec 3<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s' \
  "${#body}" "$body" >&3
cat <&3
echo
