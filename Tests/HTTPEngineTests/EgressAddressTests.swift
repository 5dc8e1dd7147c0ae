@testable import HTTPEngine
import Testing

/// Check (2) of the egress policy: the address actually connected to, against the
/// special-purpose ranges and the IP/CIDR patterns (docs/security/egress.md).
@Suite struct EgressAddressTests {
    private static func ip(_ text: String) -> IPAddress {
        guard let address = IPAddress.parseLiteral(text) else { preconditionFailure("bad test address \(text)") }
        return address
    }

    /// One address in each special-purpose range, the range, and its name.
    static let specialAddresses: [(String, String, String)] = [
        ("0.0.0.0", "0.0.0.0/8", "unspecified"),
        ("0.1.2.3", "0.0.0.0/8", "unspecified"),
        ("10.0.0.1", "10.0.0.0/8", "private, RFC 1918"),
        ("10.255.255.255", "10.0.0.0/8", "private, RFC 1918"),
        ("100.64.0.1", "100.64.0.0/10", "shared address space, CGNAT"),
        ("100.127.255.254", "100.64.0.0/10", "shared address space, CGNAT"),
        ("127.0.0.1", "127.0.0.0/8", "loopback"),
        ("127.255.0.9", "127.0.0.0/8", "loopback"),
        ("169.254.169.254", "169.254.0.0/16", "link-local, cloud metadata"),
        ("172.16.0.1", "172.16.0.0/12", "private, RFC 1918"),
        ("172.31.255.255", "172.16.0.0/12", "private, RFC 1918"),
        ("192.168.1.1", "192.168.0.0/16", "private, RFC 1918"),
        ("224.0.0.1", "224.0.0.0/4", "multicast"),
        ("239.255.255.250", "224.0.0.0/4", "multicast"),
        ("255.255.255.255", "255.255.255.255", "broadcast"),
        ("::", "::", "unspecified"),
        ("::1", "::1", "loopback"),
        ("fc00::1", "fc00::/7", "unique local, ULA"),
        ("fd00:ec2::254", "fc00::/7", "unique local, ULA"),
        ("fe80::1", "fe80::/10", "link-local"),
        ("febf:ffff::1", "fe80::/10", "link-local"),
        ("ff02::1", "ff00::/8", "multicast"),
        ("::ffff:93.184.216.34", "::ffff:0.0.0.0/96", "IPv4-mapped"),
        ("::93.184.216.34", "::/96", "IPv4-compatible"),
        ("64:ff9b::93.184.216.34", "64:ff9b::/96", "NAT64"),
        ("64:ff9b:1::5db8:d822", "64:ff9b:1::/48", "local-use NAT64"),
        ("2002:5db8:d822::1", "2002::/16", "6to4"),
        ("2001:0:4136:e378:8000:63bf:a247:27dd", "2001::/32", "Teredo"),
    ]

    @Test(arguments: specialAddresses)
    func specialRangesAreDeniedByDefault(address: String, range: String, name: String) {
        let ip = Self.ip(address)
        #expect(EgressPolicy().checkAddress(ip, port: 443)
                == .denied(reason: "\(ip) is in the special-purpose range \(range) (\(name))."))
    }

    @Test(arguments: specialAddresses)
    func anAllowRangeCoveringTheAddressLiftsTheDenial(address: String, range: String, name: String) throws {
        let pattern = range.contains(":") && !range.contains("/") ? "[\(range)]" : range
        #expect(try EgressPolicy(allow: [pattern], deny: []).checkAddress(Self.ip(address), port: 443) == .allowed)
        #expect(try EgressPolicy(allow: [Self.ip(address).description.hasPrefix("::ffff:") ? "93.184.216.34" : address], deny: [])
                .checkAddress(Self.ip(address), port: 443) == .allowed)
    }

    @Test func theEdgesOfEachRangeStayPublic() {
        for address in ["1.0.0.0", "9.255.255.255", "11.0.0.0", "100.63.255.255", "100.128.0.0", "126.255.255.255",
                        "128.0.0.0", "169.253.255.255", "169.255.0.0", "172.15.255.255", "172.32.0.0",
                        "192.167.255.255", "192.169.0.0", "223.255.255.255", "255.255.255.254",
                        "fbff::1", "fec0::1", "fe7f::1", "feff::1"] {
            #expect(EgressPolicy().checkAddress(Self.ip(address), port: 80) == .allowed, "\(address)")
        }
    }

    @Test(arguments: ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "2001:db8::1", "2a00:1450:4001::200e"])
    func publicAddressesAreAllowedByDefault(address: String) {
        #expect(EgressPolicy().checkAddress(Self.ip(address), port: 443) == .allowed)
    }

    /// The embedded IPv4 address of each form is checked like a plain one: a loopback
    /// behind IPv6 is reported as the loopback it is.
    @Test(arguments: [
        ("::ffff:127.0.0.1", "127.0.0.1", "127.0.0.0/8 (loopback)"),
        ("::ffff:169.254.169.254", "169.254.169.254", "169.254.0.0/16 (link-local, cloud metadata)"),
        ("::10.0.0.1", "10.0.0.1", "10.0.0.0/8 (private, RFC 1918)"),
        ("64:ff9b::169.254.169.254", "169.254.169.254", "169.254.0.0/16 (link-local, cloud metadata)"),
        ("2002:7f00:1::1", "127.0.0.1", "127.0.0.0/8 (loopback)"),
        ("2001:0:7f00:1::", "127.0.0.1", "127.0.0.0/8 (loopback)"),                         // Teredo server
        ("2001:0:5db8:d822::80ff:fffe", "127.0.0.1", "127.0.0.0/8 (loopback)"),             // Teredo client, inverted
    ])
    func embeddedIPv4FormsAreDeniedByDefault(address: String, inner: String, range: String) {
        let ip = Self.ip(address)
        #expect(EgressPolicy().checkAddress(ip, port: 80)
                == .denied(reason: "\(ip) embeds \(inner), which is in the special-purpose range \(range)."))
    }

    @Test func anIPv4AllowCoversTheMappedFormOfTheSameAddress() throws {
        let policy = try EgressPolicy(allow: ["127.0.0.1/32"], deny: [])
        #expect(policy.checkAddress(Self.ip("127.0.0.1"), port: 80) == .allowed)
        #expect(policy.checkAddress(Self.ip("::ffff:127.0.0.1"), port: 80) == .allowed)
        #expect(policy.checkAddress(Self.ip("::127.0.0.1"), port: 80) == .allowed)
        #expect(policy.checkAddress(Self.ip("64:ff9b::127.0.0.1"), port: 80) == .allowed)
        // 6to4 and Teredo carry a relay's address, not the destination's.
        #expect(policy.checkAddress(Self.ip("2002:7f00:1::1"), port: 80)
                == .denied(reason: "2002:7f00:1::1 is in the special-purpose range 2002::/16 (6to4)."))
        #expect(policy.checkAddress(Self.ip("::ffff:127.0.0.2"), port: 80)
                == .denied(reason: "::ffff:127.0.0.2 embeds 127.0.0.2, which is in the special-purpose range 127.0.0.0/8 (loopback)."))
    }

    @Test func allowingAnIPv6FormDoesNotAllowTheIPv4AddressesInside() throws {
        let dns64 = try EgressPolicy(allow: ["64:ff9b::/96"], deny: [])
        #expect(dns64.checkAddress(Self.ip("64:ff9b::93.184.216.34"), port: 443) == .allowed)
        #expect(dns64.checkAddress(Self.ip("64:ff9b::169.254.169.254"), port: 80)
                == .denied(reason: "64:ff9b::a9fe:a9fe embeds 169.254.169.254, which is in the special-purpose range 169.254.0.0/16 (link-local, cloud metadata)."))
        let mapped = try EgressPolicy(allow: ["::ffff:0:0/96"], deny: [])
        #expect(mapped.checkAddress(Self.ip("::ffff:93.184.216.34"), port: 443) == .allowed)
        #expect(mapped.checkAddress(Self.ip("::ffff:127.0.0.1"), port: 80)
                == .denied(reason: "::ffff:127.0.0.1 embeds 127.0.0.1, which is in the special-purpose range 127.0.0.0/8 (loopback)."))
        let sixToFour = try EgressPolicy(allow: ["2002::/16"], deny: [])
        #expect(sixToFour.checkAddress(Self.ip("2002:5db8:d822::1"), port: 443) == .allowed)
        #expect(sixToFour.checkAddress(Self.ip("2002:a00:1::1"), port: 443)
                == .denied(reason: "2002:a00:1::1 embeds 10.0.0.1, which is in the special-purpose range 10.0.0.0/8 (private, RFC 1918)."))
    }

    @Test func allowPatternsOnPortsLiftOnlyThosePorts() throws {
        let policy = try EgressPolicy(allow: ["127.0.0.1:8080", "[::1]:8080"], deny: [])
        #expect(policy.checkAddress(Self.ip("127.0.0.1"), port: 8080) == .allowed)
        #expect(policy.checkAddress(Self.ip("127.0.0.1"), port: 22)
                == .denied(reason: "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."))
        #expect(policy.checkAddress(Self.ip("::1"), port: 8080) == .allowed)
        #expect(policy.checkAddress(Self.ip("::1"), port: 22) == .denied(reason: "::1 is in the special-purpose range ::1 (loopback)."))
    }

    @Test func allowPatternsDoNotRestrictPublicAddresses() throws {
        // Names allowed by check (1) may resolve anywhere public; only special ranges
        // and deny patterns stop them here.
        let policy = try EgressPolicy(allow: ["example.com", "10.0.0.0/8"], deny: [])
        #expect(policy.checkAddress(Self.ip("93.184.216.34"), port: 443) == .allowed)
        #expect(policy.checkAddress(Self.ip("10.1.2.3"), port: 443) == .allowed)
        #expect(policy.checkAddress(Self.ip("192.168.0.1"), port: 443)
                == .denied(reason: "192.168.0.1 is in the special-purpose range 192.168.0.0/16 (private, RFC 1918)."))
    }

    @Test func denyWinsOverAllow() throws {
        let policy = try EgressPolicy(allow: ["10.0.0.0/8", "0.0.0.0/0", "::/0"],
                                      deny: ["10.0.0.5", "93.184.216.0/24:443", "2606:4700::/32", "name.example"])
        #expect(policy.checkAddress(Self.ip("10.0.0.4"), port: 80) == .allowed)
        #expect(policy.checkAddress(Self.ip("10.0.0.5"), port: 80) == .denied(reason: "10.0.0.5:80 matches the deny pattern 10.0.0.5."))
        #expect(policy.checkAddress(Self.ip("93.184.216.34"), port: 443)
                == .denied(reason: "93.184.216.34:443 matches the deny pattern 93.184.216.0/24:443."))
        #expect(policy.checkAddress(Self.ip("93.184.216.34"), port: 80) == .allowed)
        #expect(policy.checkAddress(Self.ip("2606:4700::1111"), port: 443)
                == .denied(reason: "[2606:4700::1111]:443 matches the deny pattern 2606:4700::/32."))
        #expect(policy.checkAddress(Self.ip("::ffff:10.0.0.5"), port: 80)
                == .denied(reason: "[::ffff:10.0.0.5]:80 embeds 10.0.0.5, which matches the deny pattern 10.0.0.5."))
    }

    @Test func aDenyPatternDeniesPublicAddressesWithoutAnyAllow() throws {
        let policy = try EgressPolicy(allow: [], deny: ["93.184.216.34"])
        #expect(policy.checkAddress(Self.ip("93.184.216.34"), port: 80)
                == .denied(reason: "93.184.216.34:80 matches the deny pattern 93.184.216.34."))
        #expect(policy.checkAddress(Self.ip("93.184.216.35"), port: 80) == .allowed)
    }

    @Test func namePatternsPlayNoPartInTheAddressCheck() throws {
        let policy = try EgressPolicy(allow: ["localhost", "*.internal"], deny: ["example.com"])
        #expect(policy.checkAddress(Self.ip("127.0.0.1"), port: 80)
                == .denied(reason: "127.0.0.1 is in the special-purpose range 127.0.0.0/8 (loopback)."))
        #expect(policy.checkAddress(Self.ip("93.184.216.34"), port: 80) == .allowed)
    }
}
