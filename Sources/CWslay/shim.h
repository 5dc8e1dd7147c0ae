// wslay: WebSocket framing (RFC 6455) for the ws: and wss: listeners, driven from the
// loop through its event API (Sources/WebSocket/WebSocketStream.swift). Debian's
// libwslay-dev installs no pkg-config file, so the header is found on the default path.
#include <wslay/wslay.h>
