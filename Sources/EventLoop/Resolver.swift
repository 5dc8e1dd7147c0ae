import CUV
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Name resolution off the loop's thread: `getaddrinfo` runs on libuv's thread pool
/// (`uv_getaddrinfo`) and the answer comes back on the loop as numeric literals, ready
/// for `Stream.connectTCP` and for an egress check of each address before it is used.
///
/// A lookup can be cancelled: its callback is then never called (libuv may still be
/// running `getaddrinfo` on a pool thread; its answer is dropped). Confined to the
/// loop's thread.
public final class Resolver {
    /// What a lookup answers: the addresses, as literals, in the order the system
    /// prefers them (RFC 6724), each once.
    public typealias Completion = (Result<[String], UVError>) -> Void

    private var done: Completion?
    private let request: UnsafeMutablePointer<uv_getaddrinfo_t>

    private init(done: @escaping Completion) {
        self.done = done
        request = .allocate(capacity: 1)
    }

    /// Looks `host` up for a TCP connection. `done` runs once, from the loop, unless the
    /// lookup is cancelled first. The returned lookup keeps itself alive until then.
    @discardableResult
    public static func resolve(loop: Loop, host: String, _ done: @escaping Completion) -> Resolver {
        let lookup = Resolver(done: done)
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        lookup.request.pointee.data = Unmanaged.passRetained(lookup).toOpaque()
        let rc = uv_getaddrinfo(loop.raw, lookup.request, { request, status, info in
            let me = Unmanaged<Resolver>.fromOpaque(request!.pointee.data).takeRetainedValue()
            me.finished(status, info)
        }, host, nil, &hints)
        if rc < 0 {
            // The callback will not run: take back the reference and answer from the loop.
            Unmanaged<Resolver>.fromOpaque(lookup.request.pointee.data).release()
            lookup.request.deallocate()
            let failure = UVError(rc, "getaddrinfo \(host)")
            let t = try? Timer(loop: loop)
            t?.start(timeout: 0) {
                t?.close()
                if let done = lookup.done { lookup.done = nil; done(.failure(failure)) }
            }
            if t == nil { lookup.done = nil; done(.failure(failure)) }
        }
        return lookup
    }

    /// Drops the answer: `done` is not called. The pool thread, if already running,
    /// finishes on its own.
    public func cancel() {
        guard done != nil else { return }
        done = nil
        _ = request.withMemoryRebound(to: uv_req_t.self, capacity: 1) { uv_cancel($0) }
    }

    private func finished(_ status: Int32, _ info: UnsafeMutablePointer<addrinfo>?) {
        defer {
            uv_freeaddrinfo(info)
            request.deallocate()
        }
        guard let done else { return }
        self.done = nil
        if status < 0 {
            done(.failure(UVError(status, "getaddrinfo")))
            return
        }
        var literals: [String] = []
        var node = info
        while let entry = node {
            if let address = entry.pointee.ai_addr, let text = Self.literal(address), !literals.contains(text) {
                literals.append(text)
            }
            node = entry.pointee.ai_next
        }
        if literals.isEmpty {
            done(.failure(UVError(UV_EAI_NODATA.rawValue, "getaddrinfo")))
        } else {
            done(.success(literals))
        }
    }

    /// The numeric literal of an IPv4 or IPv6 address; nil for another family.
    private static func literal(_ address: UnsafeMutablePointer<sockaddr>) -> String? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { text -> String? in
            let out = text.baseAddress!
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let ok = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { uv_ip4_name($0, out, 64) }
                return ok == 0 ? String(cString: out) : nil
            case AF_INET6:
                let ok = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { uv_ip6_name($0, out, 64) }
                return ok == 0 ? String(cString: out) : nil
            default:
                return nil
            }
        }
    }
}
