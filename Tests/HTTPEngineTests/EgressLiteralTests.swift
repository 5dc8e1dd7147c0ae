#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CCurl
@testable import HTTPEngine
import Testing

/// `IPAddress`: reading URL hosts in every spelling libcurl accepts, the canonical text,
/// and reading the binary addresses libcurl's open-socket callback gets.
@Suite struct EgressLiteralTests {
    static let loopback = IPAddress.v4(0x7f00_0001)

    /// The spellings of 127.0.0.1 that `inet_aton` and libcurl 7.88's URL parser accept
    /// (checked against both on the development machine).
    @Test(arguments: [
        "127.0.0.1", "0177.0.0.1", "2130706433", "0x7f.1", "0X7F.0.1", "127.1", "127.0.1",
        "0x7f000001", "017700000001", "00000000000000000177.1", "127.0.0.1.", "0x7f.0x0.0x0.0x1",
    ])
    func ipv4Spellings(host: String) {
        #expect(IPAddress.parseLiteral(host) == Self.loopback)
    }

    @Test(arguments: [
        ("[::1]", "::1"), ("::1", "::1"), ("[0:0:0:0:0:0:0:1]", "::1"), ("[::]", "::"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1"), ("[::FFFF:7F00:1]", "::ffff:127.0.0.1"),
        ("[fe80::1%25eth0]", "fe80::1"), ("[fe80::1%eth0]", "fe80::1"), ("fe80::1%25en0", "fe80::1"),
        ("[2001:DB8:0:0:1:0:0:1]", "2001:db8::1:0:0:1"), ("[2001:db8::0:1]", "2001:db8::1"),
        ("[1:2:3:4:5:6:7::]", "1:2:3:4:5:6:7:0"), ("[::2:3:4:5:6:7:8]", "0:2:3:4:5:6:7:8"),
        ("[1:0:0:2:0:0:0:3]", "1:0:0:2::3"), ("[1:0:2:0:3:0:4:0]", "1:0:2:0:3:0:4:0"),
        ("[::1.2.3.4]", "::102:304"), ("[64:ff9b::10.0.0.1]", "64:ff9b::a00:1"),
        ("[2606:4700::1111]", "2606:4700::1111"),
    ])
    func ipv6Spellings(host: String, canonical: String) throws {
        let address = try #require(IPAddress.parseLiteral(host))
        #expect(address.description == canonical)
        #expect(IPAddress.parseLiteral(canonical) == address)
    }

    /// Hosts libcurl resolves as names: the policy must not take them for addresses.
    @Test(arguments: [
        "example.com", "localhost", "08.0.0.1", "0x.0.0.1", "4294967296", "1.2.3.4.5", "256.0.0.1",
        "1.2.65536", "127.0.0.1..", "", ".", "+1.2.3.4", "1.2.3.-4", "1 .2.3.4", "123.com", "[127.0.0.1]",
        "[::1", "[1::2::3]", "[1:2:3:4:5:6:7:8:9]", "[1:2:3:4:5:6:7:8::]", "[12345::]", "[::1%]", "[::1.2.3]",
        "[1.2.3.4::]", "[::01.2.3.4]", "[:1::2]", "[1::2:]",
    ])
    func namesAreNotLiterals(host: String) {
        #expect(IPAddress.parseLiteral(host) == nil)
    }

    @Test func boundariesOfEachShortForm() {
        #expect(IPAddress.parseLiteral("255.16777215") == .v4(0xffff_ffff))
        #expect(IPAddress.parseLiteral("255.255.65535") == .v4(0xffff_ffff))
        #expect(IPAddress.parseLiteral("4294967295") == .v4(0xffff_ffff))
        #expect(IPAddress.parseLiteral("0") == .v4(0))
        #expect(IPAddress.parseLiteral("1.16777216") == nil)
        #expect(IPAddress.parseLiteral("256.1") == nil)
    }

    /// Every string of up to six characters over an alphabet that exercises the radix
    /// prefixes, bad octal digits, part counts and empty parts reads as `inet_aton`
    /// reads it (libcurl 7.88's URL parser follows the same rules), except that one
    /// trailing dot is allowed.
    @Test func ipv4AgreesWithInetAton() {
        let alphabet = Array("0178x.f".utf8)
        var mismatches: [String] = []
        forEachString(over: alphabet, upTo: 6) { text in
            var expected: IPAddress?
            for candidate in text.hasSuffix(".") ? [text, String(text.dropLast())] : [text] where expected == nil {
                var address = in_addr()
                if inet_aton(candidate, &address) != 0 { expected = .v4(UInt32(bigEndian: address.s_addr)) }
            }
            if IPAddress.parseLiteral(text) != expected, mismatches.count < 10 { mismatches.append(text) }
        }
        #expect(mismatches == [])
    }

    /// The same for IPv6 without brackets against `inet_pton`: group counts, `::`
    /// placement, and (over the second alphabet, long enough for `::0.0.0.0`) the
    /// IPv4 tail with its leading-zero rule.
    @Test(arguments: [("01f:", 8), ("0:.", 10), ("1f:.", 7)])
    func ipv6AgreesWithInetPton(alphabet: String, length: Int) {
        var mismatches: [String] = []
        forEachString(over: Array(alphabet.utf8), upTo: length) { text in
            guard text.contains(":") else { return }
            var bytes = in6_addr()
            let expected = inet_pton(AF_INET6, text, &bytes) == 1
                ? withUnsafeBytes(of: bytes) { IPAddress(networkBytes: $0) } : nil
            if IPAddress.parseLiteral(text) != expected, mismatches.count < 10 { mismatches.append(text) }
        }
        #expect(mismatches == [])
    }

    private func forEachString(over alphabet: [UInt8], upTo length: Int, _ body: (String) -> Void) {
        var current: [UInt8] = []
        func extend() {
            body(String(decoding: current, as: UTF8.self))
            guard current.count < length else { return }
            for c in alphabet {
                current.append(c)
                extend()
                current.removeLast()
            }
        }
        extend()
    }

    @Test func sockaddrIn() throws {
        var sin = sockaddr_in()
        sin.sin_family = sa_family_t(AF_INET)
        sin.sin_port = UInt16(8080).bigEndian
        sin.sin_addr.s_addr = UInt32(0xa9fe_a9fe).bigEndian
        let endpoint = try #require(withUnsafeBytes(of: sin) {
            IPAddress.endpoint(ofSockaddr: $0.baseAddress!, length: $0.count)
        })
        #expect(endpoint.address == .v4(0xa9fe_a9fe))
        #expect(endpoint.port == 8080)
        #expect(withUnsafeBytes(of: sin) { IPAddress.endpoint(ofSockaddr: $0.baseAddress!, length: 8) } == nil)
    }

    @Test func sockaddrIn6AndStorage() throws {
        var sin6 = sockaddr_in6()
        sin6.sin6_family = sa_family_t(AF_INET6)
        sin6.sin6_port = UInt16(443).bigEndian
        let bytes: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34]
        withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: bytes) }
        let endpoint = try #require(withUnsafeBytes(of: sin6) {
            IPAddress.endpoint(ofSockaddr: $0.baseAddress!, length: $0.count)
        })
        #expect(endpoint.address.description == "2001:db8::1234")
        #expect(endpoint.port == 443)

        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: sin6) { dst.copyMemory(from: $0) } }
        #expect(IPAddress(sockaddrStorage: storage) == endpoint.address)
        #expect(IPAddress(sockaddrStorage: sockaddr_storage()) == nil)
    }

    /// libcurl's `curl_sockaddr` declares a 16-byte `sockaddr` but carries a whole
    /// `sockaddr_in6`: reading through the pointer must see all 16 address bytes.
    @Test func curlSockaddrCarriesAWholeIPv6Address() throws {
        let offset = try #require(MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr))
        let size = offset + MemoryLayout<sockaddr_in6>.size
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        var sin6 = sockaddr_in6()
        sin6.sin6_family = sa_family_t(AF_INET6)
        sin6.sin6_port = UInt16(80).bigEndian
        withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0[15] = 1 }             // ::1
        var head = curl_sockaddr()
        head.family = AF_INET6
        head.addrlen = UInt32(MemoryLayout<sockaddr_in6>.size)
        withUnsafeBytes(of: head) { buffer.copyMemory(from: $0.baseAddress!, byteCount: offset) }
        withUnsafeBytes(of: sin6) { (buffer + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        let endpoint = try #require(IPAddress.endpoint(ofCurlAddress: buffer.assumingMemoryBound(to: curl_sockaddr.self)))
        #expect(endpoint.address == .v6(high: 0, low: 1))
        #expect(endpoint.port == 80)
    }
}
