#!/usr/bin/env bash
# The xhrpc command: one call, one fetch, and the first methods the server lists.
#
#     examples/shell/session.sh http://127.0.0.1:8080/hello.txt
#
# The server is found on its default socket, or at $XHRPC_SOCKET; xhrpc is on PATH or
# in .build (make run builds it).
set -euo pipefail
url=$1
xhrpc=$(command -v xhrpc || echo "$(dirname "$0")/../../.build/release/xhrpc")
[ -x "$xhrpc" ] || xhrpc="$(dirname "$0")/../../.build/debug/xhrpc"
socket=()
[ -n "${XHRPC_SOCKET:-}" ] && socket=(--socket "$XHRPC_SOCKET")

"$xhrpc" call server.info "${socket[@]}"
"$xhrpc" fetch "$url" "${socket[@]}"
"$xhrpc" discover "${socket[@]}" | sed -n 1,5p
