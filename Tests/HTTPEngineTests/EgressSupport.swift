// SOCK_STREAM and the other socket constants come from a header that libcurl's module
// (CCurl, through curl.h) can own: with Glibc alone, a fresh build cache sometimes
// leaves them unseen (Swift 6.3.1), so the module is imported by name.
import CCurl
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import CCurl
@testable import HTTPEngine

/// A listening TCP socket that nobody serves: a destination the egress policy must
/// keep the engine away from. After the test, `acceptedNothing` says whether any
/// connection reached it — the kernel completes a handshake into the listen backlog
/// even though nobody accepts, so a non-blocking `accept` finds any that arrived.
final class Sentinel {
    let fd: Int32
    let port: Int
    let host: String
    /// The address it is bound to, as `getsockname` gave it.
    private var address: sockaddr_storage
    private let addressLength: socklen_t

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// A socket bound to `host` at `port` (a free one when 0) without listening: a
    /// connection to it is refused at once, whoever else might otherwise use the port.
    static func closedPort(host: String, port: Int = 0) throws -> Sentinel {
        try Sentinel(host: host, port: port, listening: false)
    }

    /// Listens on `host` (127.0.0.1 or ::1) at a free port, or at `port` when given, with
    /// a listen backlog of `backlog` (with 0 the kernel completes one handshake and
    /// leaves the next connection's SYN unanswered).
    init(host: String = "127.0.0.1", port: Int = 0, listening: Bool = true, backlog: Int32 = 16) throws {
        self.host = host
        let v6 = host.contains(":")
        let fd = socket(v6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        var storage = sockaddr_storage()
        var length: socklen_t
        if v6 {
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size))
            var a = sockaddr_in6()
            a.sin6_family = sa_family_t(AF_INET6)
            a.sin6_port = UInt16(port).bigEndian
            a.sin6_addr = in6addr_loopback
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeBytes(of: a) { src in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: src) } }
        } else {
            var a = sockaddr_in()
            a.sin_family = sa_family_t(AF_INET)
            a.sin_port = UInt16(port).bigEndian
            a.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeBytes(of: a) { src in withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: src) } }
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0, !listening || listen(fd, backlog) == 0 else {
            let e = errno
            close(fd)
            throw Failure(description: "bind/listen \(host):\(port): errno \(e)")
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        address = actual
        addressLength = actualLength
        self.port = withUnsafeBytes(of: actual) { raw in
            IPAddress.endpoint(ofSockaddr: raw.baseAddress!, length: Int(actualLength))?.port ?? 0
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    }

    deinit { close(fd) }

    /// A client connected to it (blocking; the caller closes it). With a backlog of 0
    /// the first one fills the queue, and the next connection's SYN goes unanswered.
    func connectClient() throws -> Int32 {
        let client = socket(Int32(address.ss_family), Int32(SOCK_STREAM.rawValue), 0)
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, addressLength) }
        }
        guard client >= 0, rc == 0 else {
            let e = errno
            close(client)
            throw Failure(description: "connect to \(host):\(port): errno \(e)")
        }
        return client
    }

    /// `http://host:port` + path, with brackets for IPv6.
    func url(_ path: String = "/") -> String {
        host.contains(":") ? "http://[\(host)]:\(port)\(path)" : "http://\(host):\(port)\(path)"
    }

    /// True when no connection ever reached the socket.
    var acceptedNothing: Bool {
        let c = accept(fd, nil, nil)
        if c >= 0 { close(c); return false }
        return errno == EAGAIN || errno == EWOULDBLOCK
    }
}

extension EgressPolicy {
    /// A policy from patterns the test wrote, which are valid.
    static func testing(allow: [String] = [], deny: [String] = []) -> EgressPolicy {
        do {
            return try EgressPolicy(allow: allow, deny: deny)
        } catch {
            preconditionFailure("test patterns are valid: \(error)")
        }
    }
}

extension EngineOptions {
    /// Engine options with `policy` as the egress policy.
    static func with(_ policy: EgressPolicy) -> EngineOptions {
        var o = EngineOptions()
        o.egressPolicy = policy
        return o
    }
}

extension Recorder {
    /// The denial's reason when the transfer ended denied by the egress policy.
    var denialReason: String? {
        guard let failure, failure.isEgressDenial else { return nil }
        return failure.text.hasPrefix(TransferFailure.egressDeniedPrefix)
            ? String(failure.text.dropFirst(TransferFailure.egressDeniedPrefix.count)) : nil
    }
}
