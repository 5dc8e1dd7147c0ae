#!/usr/bin/env bash
# Runs every example against a real xhrpcd and a local upstream, as a reader would:
# `make examples` (part of `make test`). Each example must exit 0 and print what its
# comment says. Bounded: every step has a timeout.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BIN:-.build/debug}
work=$(mktemp -d /tmp/xhrpc-examples-XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/www"
printf 'hello\n' > "$work/www/hello.txt"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 -m http.server "$port" --bind 127.0.0.1 --directory "$work/www" >"$work/upstream.log" 2>&1 &
pids+=($!)
export XHRPC_SOCKET="$work/xhrpc.sock"
"$bin/xhrpcd" --config deploy/demo-config.json --listen "unix:$XHRPC_SOCKET" >"$work/xhrpcd.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  [ -S "$XHRPC_SOCKET" ] && curl -s -o /dev/null "http://127.0.0.1:$port/hello.txt" && break
  sleep 0.1
done
url="http://127.0.0.1:$port/hello.txt"

check() {  # check NAME EXPECTED COMMAND...: runs COMMAND, wants EXPECTED in its output
  local name=$1 expected=$2
  shift 2
  local out
  if ! out=$(timeout 60 "$@" 2>&1); then
    echo "example $name failed:"; echo "$out"; exit 1
  fi
  grep -qF -- "$expected" <<<"$out" || { echo "example $name did not print '$expected':"; echo "$out"; exit 1; }
  echo "example $name: ok"
}
check python "object: 200 6 bytes" python3 examples/python/fetch.py "$url"
check python-socket "intercepted: 200 then 0 Cancelled by interceptor" python3 examples/python/socket_and_intercept.py "$url"
check node "fetch: 200 OK 6 characters" node examples/node/fetch.js "$url"
check swift "fetch: 200 OK 6 bytes" "$bin/xhrpc-example" "$url"
check shell "hello" env PATH="$PWD/$bin:$PATH" examples/shell/session.sh "$url"
echo "5 passed, 0 failed"
