import HTTPEngine
import Testing

/// `HeaderName.equal` answers exactly as comparing the lower-cased names would, on the
/// byte path for ASCII names and on the lower-casing path for the rest.
struct HeaderNameTests {
    static let names = [
        "Content-Length", "content-length", "CONTENT-LENGTH", "Content-Lengths", "Content_Length", "", "a", "A", "@", "`",
        "X-Long-Header-Name-Over-Eight", "x-long-header-name-over-eighT", "Ä", "ä", "\u{212A}", "k", "K", "İ", "i",
        "X-Ä", "x-ä", "[", "{", "Set-Cookie", "set-cookie\u{0}",
    ]

    @Test func agreesWithLowercasedComparison() {
        for a in Self.names {
            for b in Self.names {
                #expect(HeaderName.equal(a, b) == (a.lowercased() == b.lowercased()), "\(a) vs \(b)")
            }
        }
    }
}
