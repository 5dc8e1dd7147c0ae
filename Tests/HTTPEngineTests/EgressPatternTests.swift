@testable import HTTPEngine
import Testing

/// Parsing of `--allow` / `--deny` patterns: every accepted form, its canonical text,
/// and the message for each kind of mistake.
@Suite struct EgressPatternTests {
    typealias Pattern = EgressPolicy.Pattern

    static func range(_ text: String, _ length: Int) -> EgressPolicy.AddressRange {
        EgressPolicy.AddressRange(IPAddress.parseLiteral(text)!, prefixLength: length)!
    }

    @Test(arguments: [
        ("example.com", Pattern.Host.name("example.com"), nil as Int?, "example.com"),
        ("Example.COM.", .name("example.com"), nil, "example.com"),
        ("example.com:443", .name("example.com"), 443, "example.com:443"),
        ("localhost", .name("localhost"), nil, "localhost"),
        ("under_score-1.example", .name("under_score-1.example"), nil, "under_score-1.example"),
        ("123.com", .name("123.com"), nil, "123.com"),
        ("*.example.com", .subdomains(of: "example.com"), nil, "*.example.com"),
        ("*.Example.com.:8443", .subdomains(of: "example.com"), 8443, "*.example.com:8443"),
        ("*.com", .subdomains(of: "com"), nil, "*.com"),
        ("192.0.2.7", .addresses(EgressPatternTests.range("192.0.2.7", 32)), nil, "192.0.2.7"),
        ("192.0.2.7/32", .addresses(EgressPatternTests.range("192.0.2.7", 32)), nil, "192.0.2.7"),
        ("10.0.0.1:8080", .addresses(EgressPatternTests.range("10.0.0.1", 32)), 8080, "10.0.0.1:8080"),
        ("10.0.0.0/8", .addresses(EgressPatternTests.range("10.0.0.0", 8)), nil, "10.0.0.0/8"),
        ("10.0.0.0/8:443", .addresses(EgressPatternTests.range("10.0.0.0", 8)), 443, "10.0.0.0/8:443"),
        ("0.0.0.0/0", .addresses(EgressPatternTests.range("0.0.0.0", 0)), nil, "0.0.0.0/0"),
        ("::1", .addresses(EgressPatternTests.range("::1", 128)), nil, "::1"),
        ("::1/128", .addresses(EgressPatternTests.range("::1", 128)), nil, "::1"),
        ("2001:DB8::/32", .addresses(EgressPatternTests.range("2001:db8::", 32)), nil, "2001:db8::/32"),
        ("[::1]", .addresses(EgressPatternTests.range("::1", 128)), nil, "::1"),
        ("[::1]:443", .addresses(EgressPatternTests.range("::1", 128)), 443, "[::1]:443"),
        ("[2001:db8::]/32", .addresses(EgressPatternTests.range("2001:db8::", 32)), nil, "2001:db8::/32"),
        ("[2001:db8::]/32:443", .addresses(EgressPatternTests.range("2001:db8::", 32)), 443, "[2001:db8::]/32:443"),
        ("[2001:db8::/32]:443", .addresses(EgressPatternTests.range("2001:db8::", 32)), 443, "[2001:db8::]/32:443"),
        ("::ffff:0:0/96", .addresses(EgressPatternTests.range("::ffff:0:0", 96)), nil, "::ffff:0.0.0.0/96"),
        ("::/0", .addresses(EgressPatternTests.range("::", 0)), nil, "::/0"),
    ])
    func parsesEachKind(text: String, host: Pattern.Host, port: Int?, canonical: String) throws {
        let pattern = try Pattern(parsing: text)
        #expect(pattern == Pattern(host: host, port: port))
        #expect(pattern.description == canonical)
        // The canonical text reads back as the same pattern (it goes into logs and
        // `--help` examples, and may be pasted back).
        #expect(try Pattern(parsing: canonical) == pattern)
    }

    @Test(arguments: [
        ("", "An egress pattern is empty: give a host name, *.domain, an IP address or a CIDR range."),
        ("10.0.0.0/33", #"The egress pattern "10.0.0.0/33" has the prefix length "33", but the prefix of an IPv4 range is 0 to 32."#),
        ("2001:db8::/129", #"The egress pattern "2001:db8::/129" has the prefix length "129", but the prefix of an IPv6 range is 0 to 128."#),
        ("10.0.0.0/", #"The egress pattern "10.0.0.0/" has the prefix length "", but the prefix of an IPv4 range is 0 to 32."#),
        ("10.0.0.0/-1", #"The egress pattern "10.0.0.0/-1" has the prefix length "-1", but the prefix of an IPv4 range is 0 to 32."#),
        ("10.0.0.1/8", #"The egress pattern "10.0.0.1/8" has bits set after its prefix: write the range as 10.0.0.0/8."#),
        ("2001:db8::1/32", #"The egress pattern "2001:db8::1/32" has bits set after its prefix: write the range as 2001:db8::/32."#),
        ("*.", #"The egress pattern "*." is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."#),
        ("*", #"The egress pattern "*" is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."#),
        ("*example.com", #"The egress pattern "*example.com" is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."#),
        ("a.*.example.com", #"The egress pattern "a.*.example.com" is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."#),
        ("*.*.example.com", #"The egress pattern "*.*.example.com" is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."#),
        ("*.10.0.0.1", #"The egress pattern "*.10.0.0.1" is not a valid wildcard: write *. followed by a domain name (*.example.com matches its subdomains)."#),
        ("exa mple.com", #"The egress pattern "exa mple.com" contains white space: give one host name, *.domain, IP address or CIDR range per pattern."#),
        (" example.com", #"The egress pattern " example.com" contains white space: give one host name, *.domain, IP address or CIDR range per pattern."#),
        (":80", #"The egress pattern ":80" has no host before its port: write host:port (example.com:443)."#),
        ("1.2.3.4:99999", #"The egress pattern "1.2.3.4:99999" has the port "99999", which is not a number from 1 to 65535."#),
        ("example.com:0", #"The egress pattern "example.com:0" has the port "0", which is not a number from 1 to 65535."#),
        ("example.com:", #"The egress pattern "example.com:" has the port "", which is not a number from 1 to 65535."#),
        ("example.com:http", #"The egress pattern "example.com:http" has the port "http", which is not a number from 1 to 65535."#),
        ("[::1]:+443", #"The egress pattern "[::1]:+443" has the port "+443", which is not a number from 1 to 65535."#),
        ("http://example.com", #"The egress pattern "http://example.com" is a URL: give only its host, optionally with :port (example.com:443)."#),
        ("exa!mple.com", #"The egress pattern "exa!mple.com" is not a valid host name: it contains "!"; a name has letters, digits, hyphens and dots."#),
        ("example.com/path", #"The egress pattern "example.com/path" is a URL: give only its host, optionally with :port (example.com:443)."#),
        ("10.0.0/8", #"The egress pattern "10.0.0/8" is not a valid IP address: a CIDR range is an address in dotted decimal and a prefix length (10.0.0.0/8, 2001:db8::/32)."#),
        ("example..com", #"The egress pattern "example..com" is not a valid host name: it has an empty label (two dots in a row, or a leading dot)."#),
        (".example.com", #"The egress pattern ".example.com" is not a valid host name: it has an empty label (two dots in a row, or a leading dot)."#),
        ("-example.com", #"The egress pattern "-example.com" is not a valid host name: the label "-example" begins or ends with a hyphen."#),
        ("bücher.de", #"The egress pattern "bücher.de" is not a valid host name: write an internationalised name in its ASCII (xn--) form, as libcurl sends it."#),
        (String(repeating: "a", count: 64) + ".com", #"The egress pattern ""# + String(repeating: "a", count: 64) + #".com" is not a valid host name: the label ""# + String(repeating: "a", count: 64) + #"" is longer than 63 characters."#),
        ("010.0.0.1", #"The egress pattern "010.0.0.1" is not a valid IP address: libcurl would read it as 8.0.0.1; write IPv4 addresses as four decimal numbers without leading zeros."#),
        ("0x7f.1", #"The egress pattern "0x7f.1" is not a valid IP address: libcurl would read it as 127.0.0.1; write IPv4 addresses as four decimal numbers without leading zeros."#),
        ("2130706433", #"The egress pattern "2130706433" is not a valid IP address: libcurl would read it as 127.0.0.1; write IPv4 addresses as four decimal numbers without leading zeros."#),
        ("1.2.3.256", #"The egress pattern "1.2.3.256" is not a valid IP address: an IPv4 address is four numbers from 0 to 255 (192.0.2.1)."#),
        ("1.2.3.4.5", #"The egress pattern "1.2.3.4.5" is not a valid IP address: an IPv4 address is four numbers from 0 to 255 (192.0.2.1)."#),
        ("2001:db8::g", #"The egress pattern "2001:db8::g" is not a valid IP address: it is not IPv6 (an IPv6 address with a port is written [2001:db8::1]:443)."#),
        ("1:2:3:4:5:6:7:8:9", #"The egress pattern "1:2:3:4:5:6:7:8:9" is not a valid IP address: it is not IPv6 (an IPv6 address with a port is written [2001:db8::1]:443)."#),
        ("[::1", #"The egress pattern "[::1" is not a valid IP address: the [ has no matching ]."#),
        ("[::1]x", #"The egress pattern "[::1]x" is not a valid IP address: only /prefix or :port may follow the ]."#),
        ("[::1/128]/128", #"The egress pattern "[::1/128]/128" is not a valid IP address: it has two prefix lengths."#),
        ("[10.0.0.1]:80", #"The egress pattern "[10.0.0.1]:80" is not a valid IP address: brackets are for IPv6 only; write an IPv4 address as 192.0.2.1:443."#),
        ("[example.com]", #"The egress pattern "[example.com]" is not a valid IP address: it is not IPv6."#),
        ("[fe80::1%eth0]", #"The egress pattern "[fe80::1%eth0]" is not a valid IP address: a zone (%eth0) has no place in a pattern."#),
        ("::ffff:127.0.0.1", #"The egress pattern "::ffff:127.0.0.1" is an IPv4-mapped IPv6 range: write it as 127.0.0.1, which also covers the mapped form."#),
        ("::ffff:10.0.0.0/104", #"The egress pattern "::ffff:10.0.0.0/104" is an IPv4-mapped IPv6 range: write it as 10.0.0.0/8, which also covers the mapped form."#),
    ])
    func refusesWithAMessageNamingThePattern(text: String, message: String) {
        #expect {
            try Pattern(parsing: text)
        } throws: { error in
            guard let error = error as? EgressPolicy.ParseError else { return false }
            return error.description == message && error.pattern == text
        }
    }

    @Test func policyReportsTheFirstBadPattern() {
        #expect(throws: EgressPolicy.ParseError.invalidPrefixLength(pattern: "10.0.0.0/33", prefixLength: "33", maximum: 32)) {
            try EgressPolicy(allow: ["example.com", "10.0.0.0/33"], deny: ["*."])
        }
        #expect(throws: EgressPolicy.ParseError.invalidWildcard(pattern: "*.")) {
            try EgressPolicy(allow: ["example.com"], deny: ["*."])
        }
    }

    @Test func policyKeepsPatternsInOrder() throws {
        let policy = try EgressPolicy(allow: ["b.example", "*.a.example:443"], deny: ["10.0.0.0/8"])
        #expect(policy.allowPatterns.map(\.description) == ["b.example", "*.a.example:443"])
        #expect(policy.denyPatterns.map(\.description) == ["10.0.0.0/8"])
    }
}
