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
        for distinct in [1, 5, HTTPRequest.indexedHeaderCount, HTTPRequest.indexedHeaderCount + 1, 3 * HTTPRequest.indexedHeaderCount] {
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
            HTTPRequest.writeHeaderObject(headers, into: &writer)
            #expect(writer.finish().bytes == JSON.encode(.object(object)), "\(distinct) names")
        }
    }
}
