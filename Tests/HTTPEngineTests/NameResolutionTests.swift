#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import HTTPEngine

/// Host names work. "localhost" libcurl answers itself with ::1 and 127.0.0.1, so the
/// ::1 attempt is refused and the engine sees a socket opened and closed before the one
/// that connects. Any other name is resolved on libcurl's resolver thread, whose wake-up
/// descriptor the engine watches without a close notice: a name that cannot resolve
/// takes that path on every machine, and the machine's own name, where it maps to
/// 127.0.0.1, takes it to a connection. Repeated, so descriptor numbers get reused.
@Suite struct NameResolutionTests {
    /// The machine's host name if it is not localhost (which libcurl answers itself) and
    /// resolves to 127.0.0.1, else nil.
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
        return ok && name.lowercased() != "localhost" ? name : nil
    }

    /// Five GETs of `name`, every other one on a connection of its own.
    func fetchFive(_ h: Harness, _ name: String) throws {
        for i in 0..<5 {
            var req = TransferRequest(url: "http://\(name):\(h.upstream.port)/bytes/\(100 + i)")
            req.forbidConnectionReuse = i % 2 == 1
            let r = try h.fetch(req, Recorder(expectingSeed: 0))
            #expect(r.succeeded, "\(name): \(String(describing: r.failure))")
            #expect(r.checker?.matches(count: 100 + i) == true)
            #expect(resolverWatches(h) == [], "\(name)")
        }
    }

    /// Descriptors the engine still watches that libcurl made itself (the resolver's
    /// wake-up pipe): each is given up on CURL_POLL_REMOVE, as no close notice will come,
    /// so none is left once a transfer is done.
    func resolverWatches(_ h: Harness) -> [Int32] {
        h.engine.watches.compactMap { $0 }.filter { !$0.openedByEngine }.map(\.fd)
    }

    @Test func localhostResolvesAndLeavesNoHandles() throws {
        let h = try Harness()
        try fetchFive(h, "localhost")
        #expect(try h.finish() == [])
    }

    /// The resolver thread on every machine: `.invalid` (RFC 6761) never resolves, so
    /// each failure has gone through the thread and its wake-up descriptor; connections
    /// to localhost in between take the freed descriptor numbers, and the next
    /// resolution takes theirs.
    @Test func resolverThreadDescriptorsAreReusedByConnections() throws {
        let h = try Harness()
        for i in 0..<5 {
            let failed = try h.fetch(TransferRequest(url: "http://no-such-host-\(i).invalid:\(h.upstream.port)/"))
            #expect(failed.completions == 1)
            #expect(failed.failure?.code == 6, "\(String(describing: failed.failure))")  // CURLE_COULDNT_RESOLVE_HOST
            #expect(resolverWatches(h) == [])
            var req = TransferRequest(url: "http://localhost:\(h.upstream.port)/bytes/\(100 + i)")
            req.forbidConnectionReuse = true
            let r = try h.fetch(req, Recorder(expectingSeed: 0))
            #expect(r.succeeded, "\(String(describing: r.failure))")
            #expect(r.checker?.matches(count: 100 + i) == true)
        }
        #expect(try h.finish() == [])
    }

    /// The resolver thread's answer leading to a connection needs a name other than
    /// localhost that maps to 127.0.0.1 (tests reach loopback only): the machine's own
    /// name where /etc/hosts or the resolver says so. Elsewhere the test is reported as
    /// skipped with the reason; the test above covers the thread itself.
    @Test(.enabled(if: NameResolutionTests.loopbackHostName() != nil,
                   "this machine's host name does not resolve to 127.0.0.1, so no name reaches loopback through libcurl's resolver thread"))
    func machineNameResolvesOnTheResolverThread() throws {
        let name = try #require(NameResolutionTests.loopbackHostName())
        let h = try Harness()
        try fetchFive(h, name)
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
