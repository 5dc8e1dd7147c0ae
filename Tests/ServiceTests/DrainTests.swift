import Foundation
import JSON
import Testing
@testable import Service
import TestSupport

/// A graceful stop: clients hear `onShutdown`, transfers in flight finish and can be
/// read to the last byte, new transfers are refused, and the server stops by itself
/// once nothing is left to wait for — or aborts what is left at the drain's limit or at
/// a second stop signal.
@Suite(.serialized) struct DrainTests {
    @Test func transfersInFlightFinishAndAreReadByteExact() throws {
        try withServer({ config in config.drainSeconds = 60 }) { server, up in
            let c = try server.connect()
            let slow = try c.start(up.base + "/drip/20000?chunk=2000&delay=50", name: "slow")
            let done = try c.start(up.base + "/bytes/5000", name: "done")
            #expect(try c.statesUntilDone(done).last == "DONE")
            server.signalStop()
            let notice = try c.waitNotification { $0["method"] == "onShutdown" }
            #expect(notice["params"] == ["drainSeconds": 60])
            #expect(!FileManager.default.fileExists(atPath: server.socketPath))

            // Reads and the like go on; new transfers are refused.
            #expect(try c.call("getStatus", ["request": .string(done)]) == 200)
            try c.call("create", ["request": "new"])
            try c.call("open", ["request": "new", "method": "GET", "url": .string(up.base + "/bytes/1")])
            #expect(try c.failureReason("send", ["request": "new"]) == "invalid_state")
            #expect(try c.failureReason("fetch", ["url": .string(up.base + "/bytes/1")]) == "invalid_state")

            #expect(try c.readBody(slow) == FixturePattern.bytes(count: 20000))
            #expect(try c.statesUntilDone(slow).last == "DONE")
            // Once the last unread byte is read the drain is over: the server stops.
            #expect(try c.readBody(done) == FixturePattern.bytes(count: 5000))
            #expect(throws: TestClient.Closed.self) {
                while true { _ = try c.readMessage() }
            }
            #expect(server.waitStopped())
        }
    }

    @Test func theLimitAbortsWhatIsLeft() throws {
        try withServer({ config in config.drainSeconds = 0.3 }) { server, up in
            let c = try server.connect()
            let hung = try c.start(up.base + "/hang", name: "hung")
            let fetchID = c.send("fetch", ["url": .string(up.base + "/hang")])
            try c.call("server.info")  // the fetch has started: calls run in order
            server.signalStop()
            _ = try c.waitNotification { $0["method"] == "onShutdown" }
            let end = try c.waitNotification {
                $0["params"]?["request"]?.stringValue == hung && $0["params"]?["stateName"] == "DONE"
            }
            #expect(end["params"]?["statusText"] == "Aborted")
            let fetched = try c.response(fetchID)
            #expect(fetched["result"]?["status"] == 0)
            #expect(fetched["result"]?["statusText"] == "Aborted")
            #expect(server.waitStopped())
        }
    }

    @Test func aSecondStopEndsTheDrainAtOnce() throws {
        try withServer({ config in config.drainSeconds = 600 }) { server, up in
            let c = try server.connect()
            let hung = try c.start(up.base + "/hang", name: "hung")
            server.signalStop()
            _ = try c.waitNotification { $0["method"] == "onShutdown" }
            server.signalStop()
            let end = try c.waitNotification {
                $0["params"]?["request"]?.stringValue == hung && $0["params"]?["stateName"] == "DONE"
            }
            #expect(end["params"]?["statusText"] == "Aborted")
            #expect(server.waitStopped())
        }
    }

    @Test func theDrainEndsWhenEveryClientHasGone() throws {
        try withServer({ config in config.drainSeconds = 600 }) { server, up in
            var c: TestClient? = try server.connect()
            try c!.start(up.base + "/hang", name: "hung")
            server.signalStop()
            _ = try c!.waitNotification { $0["method"] == "onShutdown" }
            c = nil
            #expect(server.waitStopped())
        }
    }

    /// A client that closes its socket with more fetches in flight than a turn releases
    /// (`Server.goneFetchesPerTurn`), all held by the upstream: the server sees at its
    /// end of input that the client closed both ways (`ByteStream.peerIsGone`), not
    /// just its writing side, ends the connection although no answer has failed yet,
    /// and releases the fetches a batch per turn until none is left in flight.
    @Test func theFetchesOfAClientThatGoesAreAllReleased() throws {
        let n = 3 * Server.goneFetchesPerTurn + 10
        try withServer(Self.raisingLimits(for: n)) { server, up in
            let watcher = try Self.goneClientWithHeldFetches(n, server, up)
            #expect(try watcher.waitForTransfersInFlight(0) == 0)
        }
    }

    /// Limits raised for `n` fetches in flight.
    static func raisingLimits(for n: Int) -> @Sendable (inout ServerConfig) -> Void {
        { config in config.limits.transfers = 2 * n; config.limits.requests = 4 * n }
    }

    /// A client writes `n` fetches the upstream holds and, once all are in flight,
    /// closes its socket; returns another connection, after the server has seen that
    /// one go.
    static func goneClientWithHeldFetches(_ n: Int, _ server: TestServer, _ up: Upstream) throws -> TestClient {
        let watcher = try server.connect()
        var c: TestClient? = try server.connect()
        for _ in 0..<n { c!.send("fetch", ["url": .string(up.base + "/hang")]) }
        #expect(try watcher.waitForTransfersInFlight(n) == n)
        c = nil
        try watcher.waitForConnections(1)
        return watcher
    }

    /// A client that shuts only its writing side, with a fetch in flight, is still
    /// answered: it may read, so the connection stays until the answer is out.
    @Test func aClientThatOnlyStopsWritingIsStillAnswered() throws {
        try withServer { server, up in
            let c = try server.connect()
            let id = c.send("fetch", ["url": .string(up.base + "/delay/300")])
            c.shutdownWriting()
            let answer = try c.response(id)
            #expect(answer["result"]?["status"] == 200)
        }
    }

    /// A client that shuts its writing side with a fetch in flight, and later closes, is
    /// let go when it closes, not when the fetch ends: the connection watches its peer
    /// once it has the end of input (`ByteStream.watchForPeerGone`).
    @Test func aClientThatStopsWritingAndThenClosesIsLetGo() throws {
        try withServer { server, up in
            let watcher = try server.connect()
            var c: TestClient? = try server.connect()
            c!.send("fetch", ["url": .string(up.base + "/hang")])
            #expect(try watcher.waitForTransfersInFlight(1) == 1)
            c!.shutdownWriting()
            // A round trip after the end of input was sent: the server has read it (the
            // client is still there, so the connection stays) before the client goes.
            usleep(100_000)
            _ = try watcher.call("server.stats")
            c = nil
            #expect(try watcher.waitForTransfersInFlight(0) == 0)
        }
    }

    /// A stop that comes while a gone client's fetches wait for their turn releases them
    /// all, and stops with no handle left open (`withServer` checks).
    @Test func aStopReleasesTheFetchesOfAGoneClient() throws {
        let n = 8 * Server.goneFetchesPerTurn
        try withServer(Self.raisingLimits(for: n)) { server, up in
            _ = try Self.goneClientWithHeldFetches(n, server, up)
            server.signalStop()
            #expect(server.waitStopped())
        }
    }
}
