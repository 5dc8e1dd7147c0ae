#if canImport(Glibc)
import Glibc
#endif
import CCurl
import Testing
@testable import HTTPEngine

/// The open-socket path on its own: given the `curl_sockaddr` libcurl would pass, with
/// a whole `sockaddr_in6` behind its 16-byte `addr` field as libcurl lays it out, the
/// engine refuses a denied address (no socket made, `CURL_SOCKET_BAD` so libcurl tries
/// the next one), records the address and the range that refused it on the transfer,
/// and makes a real socket for an allowed address.
@Suite struct EgressOpenSocketTests {
    /// A `curl_sockaddr` followed by room for the longest address, as libcurl allocates
    /// it (`Curl_sockaddr_ex`).
    final class CurlAddress {
        let raw: UnsafeMutableRawPointer
        var pointer: UnsafeMutablePointer<curl_sockaddr> { raw.assumingMemoryBound(to: curl_sockaddr.self) }

        init(_ address: IPAddress, port: Int) {
            let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr) ?? 0
            let size = offset + MemoryLayout<sockaddr_in6>.size
            raw = .allocate(byteCount: size, alignment: 8)
            raw.initializeMemory(as: UInt8.self, repeating: 0, count: size)
            let p = raw.bindMemory(to: curl_sockaddr.self, capacity: 1)
            p.pointee.socktype = Int32(SOCK_STREAM.rawValue)
            p.pointee.protocol = Int32(IPPROTO_TCP)
            switch address {
            case let .v4(value):
                var a = sockaddr_in()
                a.sin_family = sa_family_t(AF_INET)
                a.sin_port = UInt16(port).bigEndian
                a.sin_addr.s_addr = value.bigEndian
                p.pointee.family = AF_INET
                p.pointee.addrlen = UInt32(MemoryLayout<sockaddr_in>.size)
                withUnsafeBytes(of: a) { (raw + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            case let .v6(high, low):
                var a = sockaddr_in6()
                a.sin6_family = sa_family_t(AF_INET6)
                a.sin6_port = UInt16(port).bigEndian
                withUnsafeMutableBytes(of: &a.sin6_addr) { bytes in
                    for i in 0..<8 {
                        bytes[i] = UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64(i)))
                        bytes[8 + i] = UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64(i)))
                    }
                }
                p.pointee.family = AF_INET6
                p.pointee.addrlen = UInt32(MemoryLayout<sockaddr_in6>.size)
                withUnsafeBytes(of: a) { (raw + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            }
        }

        deinit { raw.deallocate() }
    }

    final class Silent: TransferDelegate {
        func transfer(_ t: Transfer, receivedHead head: ResponseHead) {}
        func transfer(_ t: Transfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool { true }
        func transfer(_ t: Transfer, progressed p: TransferProgress) {}
        func transfer(_ t: Transfer, completedWith failure: TransferFailure?) {}
    }

    @Test func refusedAddressesAreReportedAndGetNoSocket() throws {
        let h = try Harness(options: .with(.testing(deny: ["203.0.113.0/24:443"])))
        let delegate = Silent()
        let t = Transfer(request: TransferRequest(url: "http://example.test/"), delegate: delegate)
        let cases: [(IPAddress, Int, String)] = [
            (.v6(high: 0, low: 1), 8080, "::1 is in the special-purpose range ::1 (loopback)."),
            (.v4(0xA9FE_A9FE), 80, "169.254.169.254 is in the special-purpose range 169.254.0.0/16 (link-local, cloud metadata)."),
            (.v6(high: 0x0064_ff9b_0000_0000, low: 0x0A00_0001), 80,
             "64:ff9b::a00:1 embeds 10.0.0.1, which is in the special-purpose range 10.0.0.0/8 (private, RFC 1918)."),
            (.v4(0xCB00_7107), 443, "203.0.113.7:443 matches the deny pattern 203.0.113.0/24:443."),
        ]
        for (address, port, reason) in cases {
            let a = CurlAddress(address, port: port)
            #expect(h.engine.openSocket(a.pointer, for: t) == CURL_SOCKET_BAD, "\(address)")
            #expect(t.deniedAddresses.last == reason, "\(address)")
        }
        #expect(t.deniedAddresses.count == cases.count)
        #expect(t.allowedConnects == 0)
        // The same documentation range on another port, and a public IPv6 address, are
        // allowed: a real socket is made (and closed the way libcurl would close it).
        for (address, port) in [(IPAddress.v4(0xCB00_7107), 80), (.v6(high: 0x2001_0db8_0000_0000, low: 1), 443)] {
            let a = CurlAddress(address, port: port)
            let fd = h.engine.openSocket(a.pointer, for: t)
            #expect(fd >= 0, "\(address)")
            if fd >= 0 { #expect(h.engine.closeSocket(fd) == 0) }
        }
        #expect(t.allowedConnects == 2)
        #expect(try h.finish() == [])
    }
}
