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
    typealias Peer = ConnectionPeer

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
