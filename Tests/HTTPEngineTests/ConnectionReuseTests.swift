import Testing
@testable import HTTPEngine

/// Sequential requests to one host reuse one connection; forbidding reuse or closing
/// the connection after a transfer makes the next one connect again.
@Suite struct ConnectionReuseTests {
    func sequence(_ h: Harness, count: Int, forbid: Bool = false, between: ((Transfer) -> Void)? = nil) throws -> [Int] {
        var opened: [Int] = []
        for i in 0..<count {
            var req = TransferRequest(url: h.url("/bytes/\(1000 + i)"))
            req.forbidConnectionReuse = forbid
            let (t, r) = try h.start(req, Recorder(expectingSeed: 0))
            h.run(seconds: 10) { r.completions > 0 }
            #expect(r.succeeded && r.checker?.matches(count: 1000 + i) == true)
            opened.append(t.metrics?.connectionsOpened ?? -1)
            between?(t)
        }
        return opened
    }

    @Test func sequentialRequestsReuseTheConnection() throws {
        let h = try Harness()
        #expect(try sequence(h, count: 5) == [1, 0, 0, 0, 0])
        #expect(try h.finish() == [])
    }

    @Test func forbiddenReuseConnectsEveryTime() throws {
        let h = try Harness()
        #expect(try sequence(h, count: 3, forbid: true) == [1, 1, 1])
        #expect(try h.finish() == [])
    }

    @Test func closeConnectionsPreventsReuse() throws {
        let h = try Harness()
        #expect(try sequence(h, count: 3) { t in h.engine.closeConnections(usedBy: t) } == [1, 1, 1])
        #expect(try h.finish() == [])
    }

    /// `maxHostConnections` caps the connections to one host: ten concurrent requests
    /// share two, the others wait in libcurl's queue.
    @Test func hostConnectionCap() throws {
        var options = EngineOptions()
        options.maxHostConnections = 2
        let h = try Harness(options: options)
        var pairs: [(Transfer, Recorder)] = []
        for i in 0..<10 {
            pairs.append(try h.start(TransferRequest(url: h.url("/delay/\(20 + i)"))))
        }
        h.run(seconds: 20) { pairs.allSatisfy { $0.1.completions > 0 } }
        #expect(pairs.allSatisfy { $0.1.succeeded })
        #expect(pairs.map { $0.0.metrics?.connectionsOpened ?? 0 }.reduce(0, +) == 2)
        pairs = []
        #expect(try h.finish() == [])
    }
}
