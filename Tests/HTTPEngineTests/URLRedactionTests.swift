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

/// The values of query parameters whose names say secret are hidden; nothing else is.
@Suite struct QueryRedactionTests {
    @Test(arguments: [
        ("http://h/p?token=abc&x=1", "http://h/p?token=REDACTED&x=1"),
        ("http://h/p?x=1&access_token=a.b.c#frag", "http://h/p?x=1&access_token=REDACTED#frag"),
        ("http://h/?API_KEY=k&apikey=k2&key=k3&Secret=s&password=p&sig=1&signature=2",
         "http://h/?API_KEY=REDACTED&apikey=REDACTED&key=REDACTED&Secret=REDACTED&password=REDACTED&sig=REDACTED&signature=REDACTED"),
        ("http://h/?t%6Fken=abc", "http://h/?t%6Fken=REDACTED"),
        ("http://h/?token&tokenx=1&x=token", "http://h/?token&tokenx=1&x=token"),
        ("http://h/?token=", "http://h/?token=REDACTED"),
        ("http://u:pw@h/?token=abc", "http://h/?token=REDACTED"),
        ("http://h/path?#token=abc", "http://h/path?#token=abc"),
        ("http://h/?a=1&&token=2", "http://h/?a=1&&token=REDACTED"),
    ])
    func redacts(_ input: String, _ expected: String) {
        #expect(URLRedaction.redact(input) == expected)
    }

    @Test func namesAddedByTheOperator() {
        let names = URLRedaction.defaultSecretQueryNames.union(["session"])
        #expect(URLRedaction.redact("http://h/?session=s&token=t&other=o", secretNames: names)
            == "http://h/?session=REDACTED&token=REDACTED&other=o")
    }
}
