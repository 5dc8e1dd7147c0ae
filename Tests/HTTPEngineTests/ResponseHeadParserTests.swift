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

    /// A bare CR or a NUL in a value (or in the status phrase, or a folded line) reads
    /// as SP (RFC 9110 §5.5), so no client splitting on CR sees a line of its own; a
    /// line whose name is empty or not a token is not a field and is dropped.
    @Test func controlsAndBadNames() {
        let head = parse([
            "HTTP/1.1 200 All\rright\r\n",
            "X-A: safe\rSet-Cookie: injected=1\r\n",
            "X-Nul: a\u{0}b\r\n",
            "X-Folded: one\r\n",
            " two\rthree\r\n",
            ": empty-name\r\n",
            "X B: a space in the name\r\n",
            "X-Ctl\u{1}: a control in the name\r\n",
            "Bad\t: a tab before the colon\r\n",
            "Ok-Too: fine\r\n",
            "\r\n",
        ])
        #expect(head?.statusText == "All right")
        #expect(head?.headers.map { "\($0.name)=\($0.value)" } == [
            "X-A=safe Set-Cookie: injected=1", "X-Nul=a b", "X-Folded=one two three", "Ok-Too=fine",
        ])
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

/// `decodeHeaderText` takes a fast path for ASCII; whatever the path, it gives what the
/// plain rule gives: valid UTF-8 as such, anything else as Latin-1.
@Suite struct HeaderTextDecodingTests {
    func reference(_ bytes: [UInt8]) -> String {
        if let s = String(validating: bytes, as: UTF8.self) { return s }
        var s = ""
        s.unicodeScalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
        return s
    }

    @Test func everyPathAgreesWithTheRule() {
        let samples: [[UInt8]] = [
            [],
            Array("a".utf8),
            Array("Content-Length".utf8),                                    // small string
            Array("text/html; charset=utf-8, and then some more".utf8),       // heap string
            Array("naïve café".utf8),                                         // UTF-8
            Array(String(repeating: "é", count: 40).utf8),                    // long UTF-8
            [0x63, 0x61, 0x66, 0xE9],                                         // "café" in Latin-1
            [0xFF, 0xFE, 0x41],                                               // never UTF-8
            [0xE2, 0x82],                                                     // truncated sequence
            [0x7F, 0x00, 0x41],                                               // DEL and NUL are ASCII
            Array(repeating: 0x41, count: 200) + [0xE9],                     // high byte at the end
        ]
        for bytes in samples {
            let got = bytes.withUnsafeBytes { decodeHeaderText($0) }
            #expect(got == reference(bytes), "\(bytes)")
            #expect(got.unicodeScalars.count <= bytes.count)
        }
    }

    @Test func statusLineNeedsTheWholePrefix() {
        var p = ResponseHeadParser()
        Array("HTTP\r\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        #expect(p.current == nil)
        Array("HTTP/1.1 204\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        Array("X-A: 1\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        Array("\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        #expect(p.current?.status == 204)
        #expect(p.current?.statusText == "No Content")
        #expect(p.current?.headers.map { "\($0.name)=\($0.value)" } == ["X-A=1"])
    }

    /// More headers than the capacity reserved for a block are all kept, in order.
    @Test func manyHeadersKeepTheirOrder() {
        var p = ResponseHeadParser()
        Array("HTTP/1.1 200 OK\r\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        for i in 0..<100 {
            Array("X-\(i): v\(i)\r\n".utf8).withUnsafeBytes { p.consume(line: $0) }
        }
        #expect(p.current?.headers.map(\.name) == (0..<100).map { "X-\($0)" })
        #expect(p.current?.headers.map(\.value) == (0..<100).map { "v\($0)" })
    }
}
