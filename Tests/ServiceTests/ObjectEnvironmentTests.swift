import EventLoop
import HTTPEngine
import JSON
import JSONRPC
import Logging
import SecureStream
import Testing
@testable import Service
import TestSupport

/// A request object on its own, with an environment made for the test instead of a
/// `Server`: what `ObjectEnvironment` promises, that an object can be driven and
/// observed without the rest of the server. The engine and hub are real (a loop, libcurl,
/// the fixture upstream); the notices the object sends are recorded.
@Suite struct ObjectEnvironmentTests {
    final class RecordingEnvironment: ObjectEnvironment {
        let engine: TransferEngine
        let hub: NotificationHub
        let requestSettings = RequestSettings(maxBufferBytes: 1 << 20, maxRedirects: 3, maxResponseBytes: nil)
        let clock: ServerClock
        let egressProxy: ProxySettings? = nil
        let secretQueryNames = URLRedaction.defaultSecretQueryNames
        let loop: Loop
        var egressPolicy: EgressPolicy?
        var settled = 0
        var cookieNotices: [String] = []

        init(loop: Loop, clock: ServerClock) throws {
            self.loop = loop
            self.clock = clock
            engine = try TransferEngine(loop: loop)
            hub = try NotificationHub(loop: loop)
        }

        func socketTLSContext() throws -> TLSContext { try TLSContext.trustingSystemCAs() }
        lazy var questions = ServerQuestions(loop: loop, logger: Logger(label: "test"))
        var logged: [String] = []
        func log(_ message: String) { logged.append(message) }
        func cookiesMayHaveChanged(for principal: Principal) { cookieNotices.append(principal.name) }
        func objectMayHaveSettled() { settled += 1 }
        var finishedEntries: [AccessLogEntry] = []
        func finished(_ entry: @autoclosure () -> AccessLogEntry) { finishedEntries.append(entry()) }
        func soon(_ body: @escaping () -> Void) {
            guard let t = try? EventLoop.Timer(loop: loop) else { return }
            t.start(timeout: 0) {
                t.close()
                body()
            }
        }

        func close(_ done: @escaping () -> Void) {
            hub.close()
            engine.shutdown(done)
        }
    }

    @Test func aRequestRunsOnAnEnvironmentOfItsOwn() throws {
        TransferEngine.globalInit()
        let upstream = try Upstream()
        defer { upstream.stop() }
        let loop = try Loop()
        let clock = ManualClock()
        let env = try RecordingEnvironment(loop: loop, clock: clock.clock)
        let principal = try Principal(name: "solo")
        let r = HTTPRequest(handle: "r1", principal: principal, creator: nil, environment: env)
        #expect(r.lastUsed == clock.clock.now())
        clock.advance(5)
        r.touch()
        #expect(r.lastUsed == clock.clock.now(), "the object reads the environment's clock")
        #expect(r.isIdle)

        // The machine's rules hold without a server.
        #expect(throws: RPCError.self) { try r.checkCanSend("send") }
        try r.open(method: "GET", url: upstream.url("/bytes/1000?seed=4"), async: true, user: nil, password: nil,
               auth: .basic, opener: nil)
        #expect(r.state == .opened)
        #expect(throws: RPCError.self) { try r.setRequestHeader("Host", "elsewhere") }
        try r.setRequestHeader("X-Test", "1")
        #expect(try r.send(body: .none, timeout: 10, call: nil))
        #expect(!r.isIdle)
        #expect(principal.transfersInFlight == 1)

        var turns = 0
        while r.state != .done, turns < 10_000 {
            _ = loop.runOnce()
            turns += 1
        }
        #expect(r.state == .done)
        #expect(r.status == 200)
        #expect(r.takeBody() == FixturePattern.bytes(count: 1000, seed: 4))
        #expect(principal.transfersInFlight == 0)
        #expect(env.settled > 0, "the object told its environment that a stop may be over")
        #expect(env.cookieNotices == ["solo"], "the transfer used the principal's jar, which may need saving")
        #expect(env.finishedEntries.count == 1)
        #expect(env.finishedEntries.first.map { ($0.principal, $0.method, $0.status, $0.bytesIn, $0.reason) }
            .map { $0 == ("solo", "GET", 200, 1000, nil) } == true, "\(env.finishedEntries)")

        var closed = false
        r.release()
        env.close { closed = true }
        loop.run()
        #expect(closed)
        try loop.close()
    }

    @Test func aSocketRunsOnAnEnvironmentOfItsOwn() throws {
        let loop = try Loop()
        let clock = ManualClock()
        let env = try RecordingEnvironment(loop: loop, clock: clock.clock)
        // An echo peer on the same loop.
        let listener = try Listener.tcp(loop: loop, host: "127.0.0.1", port: 0)
        var peers: [EventLoop.Stream] = []
        try listener.listen { result in
            guard case .success(let peer) = result else { return }
            peers.append(peer)
            try? peer.startReading { event in
                if case .data(let bytes) = event { peer.write(bytes) }
            }
        }
        let principal = try Principal(name: "solo")
        let o = RawSocket(handle: "s1", host: "127.0.0.1", port: listener.boundPort ?? 0, ssl: false,
                          principal: principal, creator: nil, environment: env)
        #expect(o.state == .prepared && o.isIdle)
        try o.connect(timeout: 5)
        #expect(o.state == .connecting && !o.isIdle)
        func run(until done: () -> Bool) {
            var turns = 0
            while !done(), turns < 10_000 {
                _ = loop.runOnce()
                turns += 1
            }
        }
        run { o.state == .open }
        #expect(o.state == .open)
        #expect(try o.write(Array("hello".utf8)) == 5)
        run { principal.bufferedBytes == 5 }
        #expect(principal.bufferedBytes == 5, "the socket's unread bytes count in the principal's budget")
        func readResult(_ encoding: BodyEncoding) throws -> JSONValue {
            var result = JSONObjectWriter()
            try o.read(maxBytes: 100, encoding: encoding, into: &result)
            return result.finish().decoded()
        }
        let read = try readResult(.utf8)
        #expect(read["data"]?.stringValue == "hello" && read["closed"]?.boolValue == false)
        #expect(principal.bufferedBytes == 0)
        try o.disconnect()
        run { o.state == .disconnected }
        #expect(o.state == .disconnected && o.isIdle)
        #expect(try readResult(.base64)["closed"]?.boolValue == true)
        #expect(env.finishedEntries.map { ($0.method, $0.url, $0.bytesIn, $0.bytesOut, $0.event) }.first
            .map { $0 == ("SOCKET", "tcp://127.0.0.1:\(listener.boundPort ?? 0)", 5, 5, "socket closed") } == true,
            "\(env.finishedEntries)")

        var closed = false
        o.release()
        for p in peers { p.close() }
        listener.close()
        env.close { closed = true }
        loop.run()
        #expect(closed)
        try loop.close()
    }
}
