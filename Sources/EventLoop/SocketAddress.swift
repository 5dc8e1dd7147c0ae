import CUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Conversions between the textual endpoints the rest of xhrpc uses ("127.0.0.1", 5555)
/// and the `sockaddr` structures libuv wants. Only numeric literals are accepted: name
/// resolution is a slow, blocking affair that belongs on the thread pool, not in a bind
/// or connect call.
enum SocketAddress {
    /// Parses an IPv4 or IPv6 literal (brackets around IPv6 are allowed) and a port into
    /// a `sockaddr_storage`. Throws EINVAL for anything else, naming what was wrong.
    static func parse(host: String, port: Int) throws -> sockaddr_storage {
        guard (0...65535).contains(port) else {
            throw UVError(UVErrorCode.einval, "port \(port) is outside 0...65535")
        }
        var literal = Substring(host)
        if literal.hasPrefix("["), literal.hasSuffix("]") {
            literal = literal.dropFirst().dropLast()
        }
        let text = String(literal)
        var storage = sockaddr_storage()
        let ok = withUnsafeMutableBytes(of: &storage) { bytes -> Bool in
            let base = bytes.baseAddress!
            if uv_ip4_addr(text, Int32(port), base.assumingMemoryBound(to: sockaddr_in.self)) == 0 {
                return true
            }
            return uv_ip6_addr(text, Int32(port), base.assumingMemoryBound(to: sockaddr_in6.self)) == 0
        }
        guard ok else {
            throw UVError(
                UVErrorCode.einval,
                "host \"\(host)\" is not an IPv4 or IPv6 literal (names are not resolved here)")
        }
        return storage
    }

    /// Formats an IPv4 address as `a.b.c.d:port` and an IPv6 address as `[…]:port`;
    /// nil for any other family.
    static func describe(_ storage: UnsafePointer<sockaddr_storage>) -> String? {
        let raw = UnsafeRawPointer(storage)
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { text -> String? in
            let out = text.baseAddress!
            switch Int32(storage.pointee.ss_family) {
            case AF_INET:
                let sin = raw.assumingMemoryBound(to: sockaddr_in.self)
                guard uv_ip4_name(sin, out, 64) == 0 else { return nil }
                return "\(String(cString: out)):\(UInt16(bigEndian: sin.pointee.sin_port))"
            case AF_INET6:
                let sin6 = raw.assumingMemoryBound(to: sockaddr_in6.self)
                guard uv_ip6_name(sin6, out, 64) == 0 else { return nil }
                return "[\(String(cString: out))]:\(UInt16(bigEndian: sin6.pointee.sin6_port))"
            default:
                return nil
            }
        }
    }

    /// The port of an IPv4 or IPv6 address; nil for any other family.
    static func port(_ storage: UnsafePointer<sockaddr_storage>) -> Int? {
        let raw = UnsafeRawPointer(storage)
        switch Int32(storage.pointee.ss_family) {
        case AF_INET:
            return Int(UInt16(bigEndian: raw.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port))
        case AF_INET6:
            return Int(UInt16(bigEndian: raw.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port))
        default:
            return nil
        }
    }

    /// Calls `body` with `storage` seen as the generic `sockaddr` libuv's calls take.
    static func withSockaddr<R>(
        _ storage: inout sockaddr_storage, _ body: (UnsafeMutablePointer<sockaddr>) -> R
    ) -> R {
        withUnsafeMutableBytes(of: &storage) { body($0.baseAddress!.assumingMemoryBound(to: sockaddr.self)) }
    }
}
