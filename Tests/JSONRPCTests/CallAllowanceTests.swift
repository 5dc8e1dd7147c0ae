#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import JSON
@testable import JSONRPC
import Logging
import Testing

/// The calls of one read run over several loop turns, at most `CallAllowance.perTurn`
/// a turn, in order, and every one is answered; two connections share the allowance.
@Suite struct CallAllowanceTests {
    final class Peer {
        let loop: Loop
        let coalescer: WriteCoalescer
        let connections: [RPCConnection]
        let clients: [Int32]
        /// The ids of the calls run, per connection, in the order they ran.
        final class Ran { var ids: [[Int64]] = [] }
        let ran = Ran()

        init(connections count: Int) throws {
            loop = try Loop()
            coalescer = try WriteCoalescer(loop: loop)
            let registry = MethodRegistry()
            let ran = ran
            ran.ids = Array(repeating: [], count: count)
            var made: [RPCConnection] = []
            var clients: [Int32] = []
            // Identities, not the connections: the method, held by each connection
            // through its dispatcher, must not hold them back (a cycle LeakSanitizer sees).
            var identities: [ObjectIdentifier] = []
            let indexOf: (RPCPeer) -> Int = { peer in identities.firstIndex(of: ObjectIdentifier(peer)) ?? -1 }
            registry.registerAnyParams("tick") { call in
                ran.ids[indexOf(call.peer)].append(call.id?.int64Value ?? -1)
                return .result(.null)
            }
            let dispatcher = Dispatcher(registry: registry)
            for i in 0..<count {
                var fds: [Int32] = [-1, -1]
                try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
                let stream = try Stream.openPipe(loop: loop, fd: fds[0])
                let c = RPCConnection(id: UInt64(i), stream: stream, dispatcher: dispatcher, limits: ConnectionLimits(),
                                      logger: Logger(label: "test"), coalescer: coalescer)
                try c.start()
                made.append(c)
                identities.append(ObjectIdentifier(c))
                clients.append(fds[1])
            }
            connections = made
            self.clients = clients
        }

        /// Writes `count` tick calls (ids 0..<count) on client `i` in one write.
        func send(_ count: Int, on i: Int) {
            var bytes: [UInt8] = []
            for id in 0..<count { bytes += Array("{\"jsonrpc\":\"2.0\",\"id\":\(id),\"method\":\"tick\"}\n".utf8) }
            let n = bytes.withUnsafeBytes { write(clients[i], $0.baseAddress, $0.count) }
            #expect(n == bytes.count)
        }

        /// Closes everything, the loop last (it fails, naming them, if handles are left).
        func close() throws {
            for c in connections { c.close(reason: nil) }
            coalescer.close()
            for fd in clients { _ = Glibc.close(fd) }
            for _ in 0..<10 { loop.runNoWait() }
            try loop.close()
        }
    }

    @Test func oneReadRunsOverSeveralTurns() throws {
        let p = try Peer(connections: 1)
        let total = 5 * CallAllowance.perTurn
        p.send(total, on: 0)
        var previous = 0
        var turns = 0
        while turns < 1000 {
            p.loop.runNoWait()
            turns += 1
            let now = p.ran.ids[0].count
            // The allowance, plus the first call of a read (the first turn's).
            #expect(now - previous <= CallAllowance.perTurn + 1, "turn \(turns) ran \(now - previous) calls")
            previous = now
            if now == total { break }
        }
        #expect(p.ran.ids[0] == (0..<Int64(total)).map { $0 })
        #expect(turns >= 5)
        try p.close()
    }

    /// A connection that was not waiting gets its call run in the turn it arrives,
    /// while another's backlog takes the allowance.
    @Test func aNewReadIsNotQueuedBehindABacklog() throws {
        let p = try Peer(connections: 2)
        p.send(10 * CallAllowance.perTurn, on: 0)
        p.loop.runNoWait()
        p.loop.runNoWait()
        #expect(p.ran.ids[0].count < 10 * CallAllowance.perTurn)
        p.send(1, on: 1)
        p.loop.runNoWait()
        #expect(p.ran.ids[1] == [0])
        try p.close()
    }

    @Test func connectionsShareTheAllowance() throws {
        let p = try Peer(connections: 2)
        let each = 3 * CallAllowance.perTurn
        p.send(each, on: 0)
        p.send(each, on: 1)
        var previous = 0
        for _ in 0..<1000 {
            p.loop.runNoWait()
            let now = p.ran.ids.map(\.count).reduce(0, +)
            #expect(now - previous <= CallAllowance.perTurn + 2)
            previous = now
            if now == 2 * each { break }
        }
        let ran = p.ran.ids
        #expect(ran[0] == (0..<Int64(each)).map { $0 })
        #expect(ran[1] == (0..<Int64(each)).map { $0 })
        try p.close()
    }
}
