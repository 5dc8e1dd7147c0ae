@testable import HTTPEngine
import Testing

/// Check (1) of the egress policy: a URL's host and port against `--allow` and
/// `--deny` (docs/security/egress.md).
@Suite struct EgressPolicyTests {
    private func policy(allow: [String] = [], deny: [String] = []) throws -> EgressPolicy {
        try EgressPolicy(allow: allow, deny: deny)
    }

    @Test func noPatternsAllowEveryHost() {
        let policy = EgressPolicy()
        #expect(policy.checkHost("example.com", port: 443) == .allowed)
        #expect(policy.checkHost("127.0.0.1", port: 80) == .allowed)           // check (2)'s business
        #expect(policy.checkHost("[::1]", port: 80) == .allowed)
    }

    @Test func allowPatternsAdmitOnlyWhatTheyMatch() throws {
        let policy = try policy(allow: ["example.com", "*.example.org", "192.0.2.0/24"])
        #expect(policy.checkHost("example.com", port: 443) == .allowed)
        #expect(policy.checkHost("a.example.org", port: 443) == .allowed)
        #expect(policy.checkHost("192.0.2.9", port: 80) == .allowed)
        #expect(policy.checkHost("example.net", port: 443) == .denied(reason: "example.net:443 matches no allow pattern."))
        #expect(policy.checkHost("www.example.com", port: 443) == .denied(reason: "www.example.com:443 matches no allow pattern."))
        #expect(policy.checkHost("198.51.100.1", port: 80) == .denied(reason: "198.51.100.1:80 matches no allow pattern."))
        #expect(policy.checkHost("[2001:db8::1]", port: 80) == .denied(reason: "[2001:db8::1]:80 matches no allow pattern."))
    }

    @Test func namesIgnoreCaseAndOneTrailingDot() throws {
        let policy = try policy(allow: ["Example.COM"])
        #expect(policy.checkHost("EXAMPLE.com", port: 80) == .allowed)
        #expect(policy.checkHost("example.com.", port: 80) == .allowed)
        #expect(policy.checkHost("example.com..", port: 80) == .denied(reason: "example.com.:80 matches no allow pattern."))
    }

    @Test func wildcardsMatchSubdomainsNotTheBareSuffix() throws {
        let policy = try policy(allow: ["*.example.com"])
        #expect(policy.checkHost("a.example.com", port: 80) == .allowed)
        #expect(policy.checkHost("a.b.c.example.com", port: 80) == .allowed)
        #expect(policy.checkHost("A.Example.Com.", port: 80) == .allowed)
        #expect(policy.checkHost("example.com", port: 80) == .denied(reason: "example.com:80 matches no allow pattern."))
        #expect(policy.checkHost("badexample.com", port: 80) == .denied(reason: "badexample.com:80 matches no allow pattern."))
        #expect(policy.checkHost("example.com.evil.net", port: 80) == .denied(reason: "example.com.evil.net:80 matches no allow pattern."))
    }

    @Test func denyWinsOverAllow() throws {
        let policy = try policy(allow: ["*.example.com", "example.com", "10.0.0.0/8"],
                                deny: ["secret.example.com", "example.com:8080", "10.1.0.0/16"])
        #expect(policy.checkHost("www.example.com", port: 443) == .allowed)
        #expect(policy.checkHost("secret.example.com", port: 443)
                == .denied(reason: "secret.example.com:443 matches the deny pattern secret.example.com."))
        #expect(policy.checkHost("example.com", port: 443) == .allowed)
        #expect(policy.checkHost("example.com", port: 8080)
                == .denied(reason: "example.com:8080 matches the deny pattern example.com:8080."))
        #expect(policy.checkHost("10.2.0.1", port: 80) == .allowed)
        #expect(policy.checkHost("10.1.2.3", port: 80) == .denied(reason: "10.1.2.3:80 matches the deny pattern 10.1.0.0/16."))
    }

    @Test func denyAloneLetsEverythingElseThrough() throws {
        let policy = try policy(deny: ["*.internal", "metadata.google.internal", "169.254.169.254"])
        #expect(policy.checkHost("example.com", port: 80) == .allowed)
        #expect(policy.checkHost("db.internal", port: 5432) == .denied(reason: "db.internal:5432 matches the deny pattern *.internal."))
        #expect(policy.checkHost("169.254.169.254", port: 80)
                == .denied(reason: "169.254.169.254:80 matches the deny pattern 169.254.169.254."))
        #expect(policy.checkHost("internal", port: 80) == .allowed)
    }

    @Test func portsRestrictAPattern() throws {
        let policy = try policy(allow: ["example.com:443", "*.example.org:8443", "10.0.0.1:8080", "[::1]:443", "[2001:db8::]/32:443"])
        #expect(policy.checkHost("example.com", port: 443) == .allowed)
        #expect(policy.checkHost("example.com", port: 80) == .denied(reason: "example.com:80 matches no allow pattern."))
        #expect(policy.checkHost("a.example.org", port: 8443) == .allowed)
        #expect(policy.checkHost("a.example.org", port: 443) == .denied(reason: "a.example.org:443 matches no allow pattern."))
        #expect(policy.checkHost("10.0.0.1", port: 8080) == .allowed)
        #expect(policy.checkHost("10.0.0.1", port: 80) == .denied(reason: "10.0.0.1:80 matches no allow pattern."))
        #expect(policy.checkHost("[::1]", port: 443) == .allowed)
        #expect(policy.checkHost("[::1]", port: 80) == .denied(reason: "[::1]:80 matches no allow pattern."))
        #expect(policy.checkHost("[2001:db8:1::5]", port: 443) == .allowed)
        #expect(policy.checkHost("[2001:db8:1::5]", port: 444) == .denied(reason: "[2001:db8:1::5]:444 matches no allow pattern."))
    }

    @Test func ipPatternsMatchOnlyLiteralsAndNamePatternsOnlyNames() throws {
        let policy = try policy(allow: ["127.0.0.1", "localhost"])
        // A name is not resolved here: "localhost" is checked as a name only.
        #expect(policy.checkHost("localhost", port: 80) == .allowed)
        #expect(policy.checkHost("127.0.0.1", port: 80) == .allowed)
        #expect(try self.policy(allow: ["127.0.0.1"]).checkHost("localhost", port: 80)
                == .denied(reason: "localhost:80 matches no allow pattern."))
        #expect(try self.policy(allow: ["localhost"]).checkHost("127.0.0.1", port: 80)
                == .denied(reason: "127.0.0.1:80 matches no allow pattern."))
    }

    /// Every spelling libcurl takes for 127.0.0.1 meets the deny pattern on 127.0.0.0/8.
    @Test(arguments: [
        ("127.0.0.1", "127.0.0.1:80 matches"),
        ("0177.0.0.1", "0177.0.0.1:80, which is 127.0.0.1, matches"),
        ("2130706433", "2130706433:80, which is 127.0.0.1, matches"),
        ("0x7f.1", "0x7f.1:80, which is 127.0.0.1, matches"),
        ("0X7F.1", "0x7f.1:80, which is 127.0.0.1, matches"),
        ("127.1", "127.1:80, which is 127.0.0.1, matches"),
        ("127.0.0.1.", "127.0.0.1.:80 matches"),
        ("[::ffff:127.0.0.1]", "[::ffff:127.0.0.1]:80 embeds 127.0.0.1, which matches"),
        ("[::ffff:7f00:1]", "[::ffff:7f00:1]:80, which is ::ffff:127.0.0.1, embeds 127.0.0.1, which matches"),
        ("[::127.0.0.1]", "[::127.0.0.1]:80, which is ::7f00:1, embeds 127.0.0.1, which matches"),
        ("[64:ff9b::127.0.0.1]", "[64:ff9b::127.0.0.1]:80, which is 64:ff9b::7f00:1, embeds 127.0.0.1, which matches"),
        ("[2002:7f00:1::]", "[2002:7f00:1::]:80 embeds 127.0.0.1, which matches"),
    ])
    func trickyIPv4LiteralsAreDenied(host: String, start: String) throws {
        let policy = try policy(deny: ["127.0.0.0/8"])
        #expect(policy.checkHost(host, port: 80) == .denied(reason: start + " the deny pattern 127.0.0.0/8."))
    }

    @Test(arguments: [
        ("[::1]", "[::1]:80 matches"),
        ("[0:0:0:0:0:0:0:1]", "[0:0:0:0:0:0:0:1]:80, which is ::1, matches"),
        ("::1", "[::1]:80 matches"),
        ("[fe80::1%25eth0]", "[fe80::1%25eth0]:80 matches"),
        ("[FE80::1%eth0]", "[fe80::1%eth0]:80 matches"),
    ])
    func trickyIPv6LiteralsAreDenied(host: String, start: String) throws {
        let policy = try policy(deny: ["::1", "fe80::/10"])
        let rule = host.lowercased().contains("fe80") ? "fe80::/10" : "::1"
        #expect(policy.checkHost(host, port: 80) == .denied(reason: start + " the deny pattern \(rule)."))
    }

    @Test func anIPv4AllowCoversTheIPv6FormsOfTheSameDestination() throws {
        let policy = try policy(allow: ["127.0.0.1"])
        #expect(policy.checkHost("[::ffff:127.0.0.1]", port: 80) == .allowed)
        #expect(policy.checkHost("[64:ff9b::7f00:1]", port: 80) == .allowed)
        // A 6to4 address only passes through 127.0.0.1; its destination is elsewhere.
        #expect(policy.checkHost("[2002:7f00:1::1]", port: 80) == .denied(reason: "[2002:7f00:1::1]:80 matches no allow pattern."))
    }
}
