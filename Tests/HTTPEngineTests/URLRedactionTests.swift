import Testing
@testable import HTTPEngine

/// `URLRedaction` removes the userinfo of a URL's authority and nothing else.
@Suite struct URLRedactionTests {
    @Test(arguments: [
        ("https://user:secret@example.com/p?q=1", "https://example.com/p?q=1"),
        ("http://user@example.com", "http://example.com"),
        ("http://a:b@c:d@[::1]:8080/x", "http://[::1]:8080/x"),          // the last @ ends the userinfo
        ("http://u:p%40ss@host/", "http://host/"),
        ("http://h%C3%A9:pw@h\u{E9}te.example/\u{E9}", "http://h\u{E9}te.example/\u{E9}"),
        ("http://example.com/a@b", "http://example.com/a@b"),              // @ in the path
        ("http://example.com?x=a@b", "http://example.com?x=a@b"),          // @ in the query
        ("http://example.com#a@b", "http://example.com#a@b"),              // @ in the fragment
        ("example.com/user:pw@x", "example.com/user:pw@x"),                // no scheme: left alone
        ("", ""),
        ("http://", "http://"),
    ])
    func redacts(_ input: String, _ expected: String) {
        #expect(URLRedaction.redact(input) == expected)
    }
}
