@testable import HTTPEngine
import JSON
import Testing

@testable import Service

/// `HTTPRequest.headerObject`: repeated names in any case joined under the first
/// spelling, in first-seen order, the same below and above the count at which it
/// switches from a linear search to an index, and written in place the same.
struct HeaderObjectTests {
    /// What the object must be, computed the plain way.
    static func expected(_ headers: [(name: String, value: String)]) -> [(String, String)] {
        var out: [(String, String)] = []
        for h in headers {
            if let i = out.firstIndex(where: { $0.0.lowercased() == h.name.lowercased() }) {
                out[i].1 += ", " + h.value
            } else {
                out.append((h.name, h.value))
            }
        }
        return out
    }

    @Test func repeatsAreJoinedAtEveryCount() {
        for distinct in [1, 5, HeaderFields.indexedNameCount, HeaderFields.indexedNameCount + 1, 3 * HeaderFields.indexedNameCount] {
            var headers: [(name: String, value: String)] = []
            for i in 0..<distinct { headers.append(("X-H\(i)", "v\(i)")) }
            // Repeats of the first, a middle and the last name, in other cases, at the end.
            for i in Set([0, distinct / 2, distinct - 1]).sorted() { headers.append(("x-h\(i)".uppercased(), "again\(i)")) }
            headers.append(("Ä-X", "1"))
            headers.append(("ä-x", "2"))
            // An ASCII name and a longer non-ASCII one that lower-case alike (the Kelvin
            // sign is "k" lower-cased): no length shortcut may tell them apart.
            headers.append(("k-y", "3"))
            headers.append(("\u{212A}-Y", "4"))
            let object = HTTPRequest.headerObject(headers)
            let want = Self.expected(headers)
            #expect(object.members.map(\.key) == want.map(\.0), "\(distinct) names")
            #expect(object.members.map(\.value) == want.map { JSONValue.string($0.1) }, "\(distinct) names")
            // fetch's result writes the same object in place, byte for byte.
            var writer = JSONObjectWriter()
            HTTPRequest.writeHeaderObject(HeaderFields(headers), into: &writer)
            #expect(writer.finish().bytes == JSON.encode(.object(object)), "\(distinct) names")
        }
    }

    /// Fields as the parser keeps them, bytes as they came: Latin-1 and UTF-8 names and
    /// values, a fold, characters JSON escapes. Written from the bytes, the object is
    /// the one the fields' strings make, byte for byte.
    @Test func fieldsFromBytesWriteTheirText() throws {
        var parser = ResponseHeadParser()
        let lines: [[UInt8]] = [
            Array("HTTP/1.1 200 OK\r\n".utf8),
            [0x58, 0x2D, 0xC9, 0x3A, 0x20, 0x63, 0x61, 0x66, 0xE9, 0x0D, 0x0A],  // "X-\u{C9}: caf\u{E9}" in Latin-1
            Array("x-\u{E9}: na\u{EF}ve\r\n".utf8),                             // the same name lower-cased, in UTF-8
            Array("X-Q: \"quoted\" \\ back\u{01}slash\r\n".utf8),
            Array("X-Fold: caf\u{E9}\r\n".utf8),
            [0x20, 0x6E, 0xE9, 0x0D, 0x0A],                                      // folded on, Latin-1
            Array("x-q: again\r\n".utf8),
            Array("\r\n".utf8),
        ]
        for line in lines { line.withUnsafeBytes { parser.consume(line: $0) } }
        let fields = try #require(parser.current?.headers)
        #expect(fields.map(\.value) == ["caf\u{E9}", "na\u{EF}ve", "\"quoted\" \\ back\u{01}slash", "caf\u{E9} n\u{E9}", "again"])
        let object = HTTPRequest.headerObject(fields)
        let want = Self.expected(Array(fields))
        #expect(object.members.map(\.key) == want.map(\.0))
        #expect(object.members.map(\.value) == want.map { JSONValue.string($0.1) })
        var writer = JSONObjectWriter()
        HTTPRequest.writeHeaderObject(fields, into: &writer)
        #expect(writer.finish().bytes == JSON.encode(.object(object)))
    }
}
