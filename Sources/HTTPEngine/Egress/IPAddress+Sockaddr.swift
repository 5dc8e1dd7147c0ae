#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CCurl

extension IPAddress {
    /// Reads the address and port of a `sockaddr_in` or `sockaddr_in6`, or returns nil
    /// for any other family or a length too short for the family.
    ///
    /// It reads through the pointer with unaligned loads instead of taking a
    /// `sockaddr` value: a `struct sockaddr` is 16 bytes and a `sockaddr_in6` is 28, so
    /// a copy of the smaller struct would cut an IPv6 address in half.
    public static func endpoint(ofSockaddr address: UnsafeRawPointer, length: Int) -> (address: IPAddress, port: Int)? {
        let family = address.loadUnaligned(
            fromByteOffset: MemoryLayout<sockaddr>.offset(of: \sockaddr.sa_family) ?? 0, as: sa_family_t.self)
        switch Int32(family) {
        case AF_INET:
            guard length >= MemoryLayout<sockaddr_in>.size else { return nil }
            let v4 = address.loadUnaligned(as: sockaddr_in.self)
            return (.v4(UInt32(bigEndian: v4.sin_addr.s_addr)), Int(UInt16(bigEndian: v4.sin_port)))
        case AF_INET6:
            guard length >= MemoryLayout<sockaddr_in6>.size else { return nil }
            let v6 = address.loadUnaligned(as: sockaddr_in6.self)
            let ip = withUnsafeBytes(of: v6.sin6_addr) { IPAddress(networkBytes: $0) }
            guard let ip else { return nil }
            return (ip, Int(UInt16(bigEndian: v6.sin6_port)))
        default:
            return nil
        }
    }

    /// The address of a `sockaddr_in` or `sockaddr_in6` behind a pointer, for callers
    /// that need no port; see `endpoint(ofSockaddr:length:)`.
    public init?(sockaddr address: UnsafeRawPointer, length: Int) {
        guard let endpoint = IPAddress.endpoint(ofSockaddr: address, length: length) else { return nil }
        self = endpoint.address
    }

    /// The address of a `sockaddr_storage`, for callers that hold one by value (it is
    /// large enough for every family, so nothing is cut).
    public init?(sockaddrStorage storage: sockaddr_storage) {
        let endpoint = withUnsafeBytes(of: storage) { bytes in
            bytes.baseAddress.flatMap { IPAddress.endpoint(ofSockaddr: $0, length: bytes.count) }
        }
        guard let endpoint else { return nil }
        self = endpoint.address
    }

    /// Reads the address and port libcurl is about to connect to, from the
    /// `curl_sockaddr` its open-socket callback receives.
    ///
    /// Pass the pointer libcurl gave, never a copy of `pointee`: the struct declares its
    /// `addr` as a 16-byte `struct sockaddr`, but libcurl allocates room for a whole
    /// `sockaddr_in6` behind it (`Curl_sockaddr_ex`), and `addrlen` says how much of it
    /// is valid. A Swift copy keeps only the declared 16 bytes.
    public static func endpoint(ofCurlAddress address: UnsafePointer<curl_sockaddr>) -> (address: IPAddress, port: Int)? {
        guard let offset = MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr) else { return nil }
        return endpoint(ofSockaddr: UnsafeRawPointer(address) + offset, length: Int(address.pointee.addrlen))
    }
}
