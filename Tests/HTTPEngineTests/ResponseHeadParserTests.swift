import Testing
@testable import HTTPEngine

/// The header-line parser on its own: every response block libcurl shows, status lines
/// with and without phrases, folded and odd lines. No I/O.
@Suite struct ResponseHeadParserTests {
    func parse(_ lines: [String]) -> ResponseHead? {
        var p = ResponseHeadParser()
        for line in lines {
            Array(line.utf8).withUnsafeBytes { p.consume(line: $0) }
        }
        return p.current
    }

    @Test func lastBlockWins() {
        let head = parse([
            "HTTP/1.1 100 Continue\r\n", "\r\n",
            "HTTP/1.1 302 Found\r\n", "Location: /x\r\n", "\r\n",
            "HTTP/1.1 200 OK\r\n", "Content-Length: 3\r\n", "\r\n",
        ])
        #expect(head?.status == 200)
        #expect(head?.statusText == "OK")
        #expect(head?.httpVersion == "1.1")
        #expect(head?.headers.map(\.name) == ["Content-Length"])
    }

    @Test func statusLines() {
        #expect(parse(["HTTP/2 200 \r\n"])?.statusText == "OK")
        #expect(parse(["HTTP/2 200 \r\n"])?.httpVersion == "2")
        #expect(parse(["HTTP/1.1 404\r\n"])?.statusText == "Not Found")
        #expect(parse(["HTTP/1.0 200 Fine  \r\n"])?.statusText == "Fine")
        #expect(parse(["HTTP/1.1 299 \r\n"])?.statusText == "")
        #expect(parse(["HTTP/1.1 500 Oops: it broke\r\n"])?.statusText == "Oops: it broke")
        #expect(parse(["HTTP/3 421 \r\n"])?.statusText == "Misdirected Request")
    }

    @Test func headerLines() {
        let head = parse([
            "HTTP/1.1 200 OK\r\n",
            "Set-Cookie: a=1\r\n",
            "set-cookie:b=2\r\n",
            "X-Spaces:   padded value \t\r\n",
            "X-Folded: first\r\n",
            "   second\r\n",
            "Empty:\r\n",
            "no colon here\r\n",
            "\r\n",
        ])
        #expect(head?.headers.map { "\($0.name)=\($0.value)" } == [
            "Set-Cookie=a=1", "set-cookie=b=2", "X-Spaces=padded value", "X-Folded=first second", "Empty=",
        ])
        #expect(head?.value(of: "SET-COOKIE") == "a=1, b=2")
        #expect(head?.value(of: "missing") == nil)
    }

    @Test func latin1AndUTF8Values() {
        var p = ResponseHeadParser()
        Array("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        [UInt8]([0x58, 0x3A, 0x20, 0xE9, 0x0D, 0x0A]).withUnsafeBytes { p.consume(line: $0) }  // "X: é" in Latin-1
        Array("Y: é\r\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        #expect(p.current?.headers.map(\.value) == ["é", "é"])
    }

    @Test func linesBeforeAnyStatusAreIgnored() {
        #expect(parse(["Junk: 1\r\n"]) == nil)
    }
}
