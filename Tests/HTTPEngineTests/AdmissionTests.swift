import Testing
@testable import HTTPEngine

/// Started transfers join the multi at most `admissionsPerTurn` a loop turn, and at most
/// `connectsPerTurn` of those that open a new connection, in the order they were
/// started; all of them run and complete.
@Suite struct AdmissionTests {
    func joined(_ pairs: [(Transfer, Recorder)]) -> Int {
        pairs.filter { $0.0.state != .waitingToAdd }.count
    }

    /// Nothing to reuse: each opens a new connection, `connectsPerTurn` a turn.
    @Test func startsJoinTheMultiInSlicesPerTurn() throws {
        let h = try Harness()
        let n = TransferEngine.connectsPerTurn
        #expect(n < TransferEngine.admissionsPerTurn)
        var pairs: [(Transfer, Recorder)] = []
        for i in 0..<(3 * n) {
            pairs.append(try h.start(TransferRequest(url: h.url("/bytes/\(100 + i)")), Recorder(expectingSeed: 0)))
        }
        // Within the turn they were started in: the first slice joined, the rest wait.
        #expect(joined(pairs) == n)
        #expect(pairs.prefix(n).allSatisfy { $0.0.state == .running })
        #expect(h.engine.waitingToJoin == 2 * n)
        #expect(h.engine.activeTransfers == 3 * n)
        // One more turn lets one more slice in, the next in line.
        h.loop.runNoWait()
        #expect(joined(pairs) == 2 * n)
        #expect(pairs.prefix(2 * n).allSatisfy { $0.0.state != .waitingToAdd })
        h.run(seconds: 30) { pairs.allSatisfy { $0.1.completions > 0 } }
        for (i, (_, r)) in pairs.enumerated() {
            #expect(r.succeeded && r.checker?.matches(count: 100 + i) == true, "transfer \(i)")
        }
        #expect(h.engine.waitingToJoin == 0)
        pairs = []
        #expect(try h.finish() == [])
    }

    /// With an idle connection in libcurl's cache a transfer may reuse it instead of
    /// connecting: `admissionsPerTurn` join a turn.
    @Test func transfersThatMayReuseJoinInLargerSlices() throws {
        let h = try Harness()
        #expect(try h.fetch("/bytes/10").succeeded)  // leaves its connection idle
        let n = TransferEngine.admissionsPerTurn
        var pairs: [(Transfer, Recorder)] = []
        for i in 0..<(2 * n) {
            pairs.append(try h.start(TransferRequest(url: h.url("/bytes/\(100 + i)")), Recorder(expectingSeed: 0)))
        }
        #expect(joined(pairs) == n)
        #expect(h.engine.waitingToJoin == n)
        h.run(seconds: 30) { pairs.allSatisfy { $0.1.completions > 0 } }
        for (i, (_, r)) in pairs.enumerated() {
            #expect(r.succeeded && r.checker?.matches(count: 100 + i) == true, "transfer \(i)")
        }
        pairs = []
        #expect(try h.finish() == [])
    }

    /// A waiting transfer that is cancelled never joins and is never heard from; the
    /// others are not held up by it.
    @Test func cancelledWhileWaitingNeverJoins() throws {
        let h = try Harness()
        let n = TransferEngine.admissionsPerTurn
        var pairs: [(Transfer, Recorder)] = []
        for _ in 0..<(2 * n) { pairs.append(try h.start(TransferRequest(url: h.url("/bytes/10")))) }
        let waiting = pairs[n + 1]
        #expect(waiting.0.state == .waitingToAdd)
        h.engine.cancel(waiting.0)
        #expect(waiting.0.state == .cancelled)
        let others = pairs.filter { $0.0 !== waiting.0 }
        h.run(seconds: 30) { others.allSatisfy { $0.1.completions > 0 } }
        #expect(others.allSatisfy { $0.1.succeeded })
        h.idle(seconds: 0.2)
        #expect(waiting.1.completions == 0 && waiting.1.order.isEmpty)
        #expect(h.engine.activeTransfers == 0 && h.engine.waitingToJoin == 0)
        pairs = []
        #expect(try h.finish() == [])
    }
}

/// libcurl's search of its connections for one to reuse is skipped only when it cannot
/// find one: no idle connection, no HTTP/2 to share, no per-host cap to wait for.
@Suite struct ConnectionSearchTests {
    func transfer(_ url: String, multiplexing: Bool = true) throws -> Transfer {
        var request = TransferRequest(url: url)
        request.multiplexing = multiplexing
        let t = Transfer(request: request, delegate: Recorder())
        t.origin = try TransferEngine.validate(url: url)
        return t
    }

    @Test func skippedOnlyWhenNothingCouldBeReused() throws {
        let h = try Harness()
        #expect(h.engine.skipsConnectionSearch(try transfer(h.url("/x"))))
        #expect(!h.engine.skipsConnectionSearch(try transfer("https://127.0.0.1:1/x")))
        #expect(h.engine.skipsConnectionSearch(try transfer("https://127.0.0.1:1/x", multiplexing: false)))
        // A finished transfer leaves its connection idle in the cache: search for it.
        let r = try h.fetch("/bytes/10")
        #expect(r.succeeded)
        #expect(!h.engine.skipsConnectionSearch(try transfer(h.url("/x"))))
        // ... and the next one reuses it.
        let (t, r2) = try h.start(TransferRequest(url: h.url("/bytes/10")))
        h.run(seconds: 10) { r2.completions > 0 }
        #expect(r2.succeeded && t.metrics?.connectionsOpened == 0)
        #expect(try h.finish() == [])
    }

    /// A transfer that joins while `maxConnections` others are in the multi closes its
    /// connection when it ends (`closesConnectionAfterwards`); HTTP/2 over TLS is left to
    /// libcurl. Such transfers run and answer like the others.
    @Test func closedAfterwardsOnlyPastTheCacheSize() throws {
        var options = EngineOptions()
        options.maxConnections = 2
        let h = try Harness(options: options)
        var pairs: [(Transfer, Recorder)] = []
        #expect(!h.engine.closesConnectionAfterwards(try transfer(h.url("/x"))))
        pairs.append(try h.start(TransferRequest(url: h.url("/bytes/10"))))
        #expect(!h.engine.closesConnectionAfterwards(try transfer(h.url("/x"))))
        pairs.append(try h.start(TransferRequest(url: h.url("/bytes/10"))))
        #expect(h.engine.closesConnectionAfterwards(try transfer(h.url("/x"))))
        #expect(!h.engine.closesConnectionAfterwards(try transfer("https://127.0.0.1:1/x")))
        #expect(h.engine.closesConnectionAfterwards(try transfer("https://127.0.0.1:1/x", multiplexing: false)))
        // A started transfer is not counted among the others.
        #expect(!h.engine.closesConnectionAfterwards(pairs[1].0))
        for i in 0..<6 { pairs.append(try h.start(TransferRequest(url: h.url("/bytes/\(20 + i)")), Recorder(expectingSeed: 0))) }
        h.run(seconds: 30) { pairs.allSatisfy { $0.1.completions > 0 } }
        #expect(pairs.allSatisfy { $0.1.succeeded })
        for (i, (_, r)) in pairs.dropFirst(2).enumerated() { #expect(r.checker?.matches(count: 20 + i) == true, "transfer \(i)") }
        // Once they ended, nothing is over the cache size: the next one may keep its connection.
        #expect(!h.engine.closesConnectionAfterwards(try transfer(h.url("/x"))))
        pairs = []
        #expect(try h.finish() == [])
    }

    /// `maxConnections` counts idle connections (`sizeConnectionCache`): a connection
    /// whose transfer ends while more than `maxConnections` others run stays cached and
    /// the next transfer reuses it. libcurl's limit counts busy connections too: held at
    /// `maxConnections` it closed that connection as its transfer ended.
    @Test func aConnectionEndingWhileOthersRunStaysCached() throws {
        var options = EngineOptions()
        options.maxConnections = 2
        let h = try Harness(options: options)
        var quick: [(Transfer, Recorder)] = []
        for i in 0..<2 { quick.append(try h.start(TransferRequest(url: h.url("/bytes/\(10 + i)")))) }
        var slow: [(Transfer, Recorder)] = []
        for _ in 0..<4 { slow.append(try h.start(TransferRequest(url: h.url("/delay/3000")))) }
        h.run(seconds: 10) { quick.allSatisfy { $0.1.completions > 0 } }
        #expect(quick.allSatisfy { $0.1.succeeded && $0.0.metrics?.connectionsOpened == 1 })
        #expect(slow.allSatisfy { $0.1.completions == 0 }, "the slow ones still run")
        let (t, r) = try h.start(TransferRequest(url: h.url("/bytes/12")))
        h.run(seconds: 10) { r.completions > 0 }
        #expect(r.succeeded && t.metrics?.connectionsOpened == 0)
        for (t, _) in slow { h.engine.cancel(t) }
        quick = []
        slow = []
        #expect(try h.finish() == [])
    }

    @Test func alwaysSearchedUnderAHostCap() throws {
        var options = EngineOptions()
        options.maxHostConnections = 2
        let h = try Harness(options: options)
        #expect(!h.engine.skipsConnectionSearch(try transfer(h.url("/x"))))
        #expect(try h.finish() == [])
    }
}

/// The running transfers share `receiveBufferBudget`: each joins with its share of it,
/// between libcurl's minimum and its default, and libcurl hands the body over in pieces
/// no larger than that buffer; the body arrives whole either way.
@Suite struct ReceiveBufferTests {
    @Test func aJoiningTransferGetsItsShareOfTheBudget() throws {
        var options = EngineOptions()
        options.receiveBufferBudget = 48 << 10
        let h = try Harness(options: options)
        let probe = Transfer(request: TransferRequest(url: h.url("/x")), delegate: Recorder())
        #expect(h.engine.receiveBufferBytes(joining: probe) == 16 << 10)
        var pairs: [(Transfer, Recorder)] = []
        for i in 0..<3 { pairs.append(try h.start(TransferRequest(url: h.url("/bytes/\(10 + i)")))) }
        #expect(h.engine.receiveBufferBytes(joining: probe) == 12 << 10)
        // A started transfer is not counted among the others.
        #expect(h.engine.receiveBufferBytes(joining: pairs[0].0) == 16 << 10)
        for (t, _) in pairs { h.engine.cancel(t) }
        pairs = []
        #expect(try h.finish() == [])
    }

    @Test func aSmallShareReadsInSmallPiecesAndLosesNothing() throws {
        for (budget, piece) in [(1, 1 << 10), (64 << 20, 16 << 10)] {
            var options = EngineOptions()
            options.receiveBufferBudget = budget
            let h = try Harness(options: options)
            let r = Recorder(expectingSeed: 0)
            var largest = 0
            r.accept = { bytes in largest = max(largest, bytes.count); return true }
            let (t, _) = try h.start(TransferRequest(url: h.url("/bytes/300000")), r)
            h.run(seconds: 30) { r.completions > 0 }
            #expect(r.succeeded && r.checker?.matches(count: 300_000) == true)
            #expect(largest > 0 && largest <= piece && (budget == 1 || largest > 1 << 10), "largest piece \(largest)")
            _ = t
            #expect(try h.finish() == [])
        }
    }

    /// Cancelling most of the waiting transfers at once (a client that goes with its
    /// fetches queued) leaves them in the queue until their turn, but not in the counts:
    /// those waiting, and so those running, stay right. Counting the cancelled ones made
    /// the running count negative, and a receive buffer's share a division by zero.
    @Test func cancelledWhileWaitingLeaveTheCountsAtOnce() throws {
        let h = try Harness()
        let n = TransferEngine.connectsPerTurn
        var pairs: [(Transfer, Recorder)] = []
        for _ in 0..<(6 * n) { pairs.append(try h.start(TransferRequest(url: h.url("/drip/1000?chunk=100&delay=100")))) }
        #expect(pairs.filter { $0.0.state != .waitingToAdd }.count == n && h.engine.waitingToJoin == 5 * n)
        for (t, _) in pairs.suffix(4 * n) { h.engine.cancel(t) }
        #expect(h.engine.waitingToJoin == n)
        #expect(h.engine.transfersRunning(besides: pairs[0].0) == n - 1)
        #expect(h.engine.receiveBufferBytes(joining: pairs[n].0) == TransferEngine.fullReceiveBuffer)
        let kept = pairs.prefix(2 * n)
        h.run(seconds: 30) { kept.allSatisfy { $0.1.completions > 0 } }
        #expect(kept.allSatisfy { $0.1.succeeded })
        #expect(pairs.suffix(4 * n).allSatisfy { $0.1.completions == 0 })
        #expect(h.engine.activeTransfers == 0 && h.engine.waitingToJoin == 0)
        pairs = []
        #expect(try h.finish() == [])
    }
}
