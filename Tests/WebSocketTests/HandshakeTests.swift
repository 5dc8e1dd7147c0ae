import Testing

@testable import WebSocket

/// The upgrade's rules (RFC 6455 §4.2.1) and the origin allowlist, on request heads
/// with no socket.
struct HandshakeTests {
    /// A valid upgrade request with `extra` header lines.
    private func request(_ extra: [String] = [], version: String = "13", key: String = "dGhlIHNhbXBsZSBub25jZQ==",
                         method: String = "GET") -> HTTPRequestHead {
        var lines = ["\(method) /rpc HTTP/1.1", "Host: localhost", "Upgrade: websocket", "Connection: keep-alive, Upgrade",
                     "Sec-WebSocket-Key: \(key)", "Sec-WebSocket-Version: \(version)"]
        lines += extra
        let text = lines.joined(separator: "\r\n") + "\r\n\r\n"
        guard case .complete(let head) = HTTPRequestHead.parse(Array(text.utf8)) else {
            Issue.record("the test's head does not parse")
            return HTTPRequestHead(method: "", target: "", headers: [])
        }
        return head
    }

    @Test func acceptKeyOfRFC6455sExample() {
        #expect(WebSocketHandshake.acceptKey(for: "dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    }

    @Test func validRequestWithoutOriginSwitchesProtocols() {
        let expected = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
        #expect(WebSocketHandshake.evaluate(request(), allowedOrigins: []) == .accept(response: Array(expected.utf8)))
    }

    @Test func anyOriginIsRefusedByDefault() {
        guard case .refuse(403, _) = WebSocketHandshake.evaluate(request(["Origin: http://localhost:8080"]), allowedOrigins: [])
        else { Issue.record("expected 403"); return }
    }

    @Test func anAllowedOriginIsAcceptedIgnoringCaseAndTrailingSlash() {
        let outcome = WebSocketHandshake.evaluate(request(["Origin: HTTP://Example.test:8080"]),
                                                  allowedOrigins: ["http://example.test:8080/"])
        guard case .accept = outcome else { Issue.record("expected 101, got \(outcome)"); return }
        guard case .refuse(403, _) = WebSocketHandshake.evaluate(request(["Origin: http://example.test:8081"]),
                                                                 allowedOrigins: ["http://example.test:8080"])
        else { Issue.record("another port must be refused"); return }
    }

    @Test func wrongVersionIsAnswered426() {
        guard case .refuse(426, _) = WebSocketHandshake.evaluate(request(version: "8"), allowedOrigins: []) else {
            Issue.record("expected 426"); return
        }
        let response = String(decoding: WebSocketHandshake.refusalResponse(status: 426, message: "x"), as: UTF8.self)
        #expect(response.contains("\r\nSec-WebSocket-Version: 13\r\n"))
    }

    @Test func badKeyAndMethodAreRefused() {
        guard case .refuse(400, _) = WebSocketHandshake.evaluate(request(key: "c2hvcnQ="), allowedOrigins: []) else {
            Issue.record("a key of 5 bytes must be refused"); return
        }
        guard case .refuse(405, _) = WebSocketHandshake.evaluate(request(method: "POST"), allowedOrigins: []) else {
            Issue.record("POST must be refused"); return
        }
    }

    @Test func plainHTTPIsAnswered426() {
        let text = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        guard case .complete(let head) = HTTPRequestHead.parse(Array(text.utf8)),
              case .refuse(426, _) = WebSocketHandshake.evaluate(head, allowedOrigins: [])
        else { Issue.record("expected 426"); return }
    }

    @Test func endOfHeadLeavesWhatFollows() {
        let bytes = Array("GET / HTTP/1.1\r\nA: b\r\n\r\n".utf8) + [0x81, 0x00]
        #expect(HTTPRequestHead.endOfHead(bytes) == bytes.count - 2)
    }
}
