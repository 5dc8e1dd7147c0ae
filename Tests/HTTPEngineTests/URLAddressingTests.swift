import Testing
@testable import HTTPEngine

/// `URLTarget.addressingIPv4Literally`: a host the egress policy reads as an IPv4 address
/// (`127.0.0.1.`, `0x7f.1`) is written as that address before libcurl sees it, which
/// would otherwise ask the resolver (issue 41: `127.0.0.1.` went to DNS as a name). No I/O.
@Suite struct URLAddressingTests {
    @Test func looseSpellingsAreWrittenAsTheirAddress() throws {
        for (url, expected) in [
            ("http://127.0.0.1./x?q=1#f", "http://127.0.0.1/x?q=1#f"),
            ("http://127.1.:8080/", "http://127.0.0.1:8080/"),
            ("https://0x7f.1/a", "https://127.0.0.1/a"),
            ("http://2130706433/", "http://127.0.0.1/"),
            ("http://user:pw@10.1.2.3./p", "http://user:pw@10.1.2.3/p"),
        ] {
            let target = try TransferEngine.validate(url: url)
            let addressed = try #require(try URLTarget.addressingIPv4Literally(url, target), "\(url)")
            #expect(addressed.url == expected)
            #expect(addressed.target.host == target.literal?.description)
            #expect(addressed.target.literal == target.literal)
            #expect(addressed.target.port == target.port)
        }
    }

    @Test func namesAndDottedDecimalAreLeftAlone() throws {
        for url in ["http://127.0.0.1/", "http://example.com./", "http://localhost:80/", "http://[::1]/",
                    "https://a.b.c.d./"] {
            #expect(try URLTarget.addressingIPv4Literally(url, try TransferEngine.validate(url: url)) == nil, "\(url)")
        }
    }
}
