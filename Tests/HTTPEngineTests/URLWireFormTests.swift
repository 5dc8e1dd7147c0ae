import Testing
@testable import HTTPEngine

/// `URLTarget.wireForm` percent-encodes the non-ASCII bytes after the authority (a
/// request target is ASCII) and touches nothing else.
@Suite struct URLWireFormTests {
    @Test(arguments: [
        ("http://h/\u{FC}?\u{FC}=\u{FC}", "http://h/%C3%BC?%C3%BC=%C3%BC"),
        ("http://h:8080?q=\u{4E00}", "http://h:8080?q=%E4%B8%80"),          // a query straight after the port
        ("http://h#\u{E9}", "http://h#%C3%A9"),
        ("http://h\u{E9}te.example/\u{E9}", "http://h\u{E9}te.example/%C3%A9"), // the host is libcurl's to convert
        ("http://u\u{E9}:p@h/", "http://u\u{E9}:p@h/"),                      // userinfo is part of the authority
        ("https://h/%C3%BC?a=%20", "https://h/%C3%BC?a=%20"),                // already encoded: unchanged
        ("http://h/plain?x=1#f", "http://h/plain?x=1#f"),
    ])
    func encodes(_ input: String, _ expected: String) {
        #expect(URLTarget.wireForm(of: input) == expected)
    }
}
