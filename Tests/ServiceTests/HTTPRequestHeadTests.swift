import Testing

@testable import Service
import WebSocket

/// The operations listener's request-head parser: complete heads in pieces split at
/// every byte, the 8 KiB bound, and what is not HTTP/1.x.
struct HTTPRequestHeadTests {
    let head = Array("GET /metrics?x=1 HTTP/1.1\r\nHost: 127.0.0.1:9090\r\nAuthorization:  Bearer abc \r\n\r\n".utf8)

    @Test func aCompleteHead() {
        guard case .complete(let h) = HTTPRequestHead.parse(head) else { Issue.record("not complete"); return }
        #expect(h.method == "GET")
        #expect(h.target == "/metrics?x=1")
        #expect(h.path == "/metrics")
        #expect(h.header("host") == "127.0.0.1:9090")
        #expect(h.header("authorization") == "Bearer abc")
        #expect(h.header("cookie") == nil)
    }

    @Test func everyPrefixNeedsMoreAndTheWholeIsTheSameHead() {
        for n in 0..<head.count {
            #expect(HTTPRequestHead.parse(Array(head[..<n])) == .needMore, "prefix of \(n) bytes")
        }
        // Bytes after the head (a body the listener ignores) do not change it.
        #expect(HTTPRequestHead.parse(head + Array("tail".utf8)) == HTTPRequestHead.parse(head))
    }

    @Test func bareLineFeedsAreAccepted() {
        guard case .complete(let h) = HTTPRequestHead.parse(Array("HEAD /healthz HTTP/1.0\nX-A: 1\n\n".utf8)) else {
            Issue.record("not complete"); return
        }
        #expect(h.method == "HEAD")
        #expect(h.headers.map(\.name) == ["x-a"])
    }

    @Test func theHeadIsBounded() {
        let filler = Array("GET / HTTP/1.1\r\nX: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 8200)
        #expect(HTTPRequestHead.parse(filler) == .tooLarge)
        #expect(HTTPRequestHead.parse(Array(filler.prefix(8191))) == .needMore)
        #expect(HTTPRequestHead.parse(filler + Array("\r\n\r\n".utf8)) == .tooLarge)
        let fits = Array("GET / HTTP/1.1\r\nX: ".utf8) + Array(repeating: UInt8(ascii: "a"), count: 8000) + Array("\r\n\r\n".utf8)
        if case .complete = HTTPRequestHead.parse(fits) {} else { Issue.record("8 KiB minus a little is refused") }
    }

    @Test(arguments: [
        "hello\r\n\r\n", "GET /a\r\n\r\n", "GET a HTTP/1.1\r\n\r\n", "GET /a HTTP/2\r\n\r\n", "GET  /a HTTP/1.1\r\n\r\n",
        "G(T /a HTTP/1.1\r\n\r\n", "GET /a HTTP/1.1\r\nno colon\r\n\r\n", "GET /a HTTP/1.1\r\n folded: x\r\n\r\n",
        "GET /a HTTP/1.1\r\nBad Name: x\r\n\r\n", "\r\n\r\n",
    ])
    func notHTTP(_ text: String) {
        #expect(HTTPRequestHead.parse(Array(text.utf8)) == .malformed, "\(text.debugDescription)")
    }

    @Test func invalidUTF8IsMalformed() {
        #expect(HTTPRequestHead.parse(Array("GET /a HTTP/1.1\r\nX: ".utf8) + [0xFF] + Array("\r\n\r\n".utf8)) == .malformed)
    }
}
