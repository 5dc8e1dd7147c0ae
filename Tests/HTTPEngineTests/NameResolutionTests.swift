#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPEngine

/// Host names work: "localhost" (which libcurl answers itself with ::1 and 127.0.0.1, so
/// the ::1 attempt is refused and the engine sees a socket opened and closed before the
/// one that connects) and the machine's own name when it maps to 127.0.0.1 (resolved on
/// libcurl's resolver thread, whose wake-up descriptor the engine watches without a
/// close notice). Repeated, so descriptor numbers get reused.
@Suite struct NameResolutionTests {
    /// The machine's host name if it resolves to 127.0.0.1, else nil.
    static func loopbackHostName() -> String? {
        var buf = [CChar](repeating: 0, count: 256)
        guard gethostname(&buf, buf.count) == 0 else { return nil }
        let name = String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var hints = addrinfo()
        hints.ai_family = AF_INET
        var res: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &res) == 0, let res else { return nil }
        defer { freeaddrinfo(res) }
        var ok = false
        var p: UnsafeMutablePointer<addrinfo>? = res
        while let a = p {
            if let sa = a.pointee.ai_addr {
                sa.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    if $0.pointee.sin_addr.s_addr == inet_addr("127.0.0.1") { ok = true }
                }
            }
            p = a.pointee.ai_next
        }
        return ok ? name : nil
    }

    @Test func namesResolveAndLeaveNoHandles() throws {
        let h = try Harness()
        var names = ["localhost"]
        if let own = NameResolutionTests.loopbackHostName(), own != "localhost" { names.append(own) }
        for name in names {
            for i in 0..<5 {
                var req = TransferRequest(url: "http://\(name):\(h.upstream.port)/bytes/\(100 + i)")
                req.forbidConnectionReuse = i % 2 == 1
                let r = try h.fetch(req, Recorder(expectingSeed: 0))
                #expect(r.succeeded, "\(name): \(String(describing: r.failure))")
                #expect(r.checker?.matches(count: 100 + i) == true)
            }
        }
        #expect(try h.finish() == [])
    }

    @Test func unknownHostFails() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: "http://no-such-host.invalid:\(h.upstream.port)/"))
        #expect(r.completions == 1)
        #expect(r.failure?.code == 6)  // CURLE_COULDNT_RESOLVE_HOST
        #expect(r.failure?.text.hasPrefix("Could not resolve host: no-such-host.invalid") == true, "\(String(describing: r.failure))")
        #expect(try h.finish() == [])
    }
}
