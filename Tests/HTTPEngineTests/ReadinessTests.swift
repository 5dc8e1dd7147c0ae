import Glibc
import Testing
import EventLoop
@testable import HTTPEngine

/// Ready sockets reach libcurl at most `readyPerTurn` a loop turn, so a burst of
/// answers arriving together completes over several turns instead of holding the loop
/// for all of them; every transfer still completes, with its own body.
@Suite struct ReadinessTests {
    @Test func aBurstOfAnswersCompletesOverSeveralTurns() throws {
        let h = try Harness()
        let n = 100
        var pairs: [(Transfer, Recorder)] = []
        for _ in 0..<n { pairs.append(try h.start(TransferRequest(url: h.url("/delay/500")))) }
        // Let every transfer join, connect and send its request, then keep the loop
        // from running (as a long turn would) while the upstream answers all of them: the
        // next poll finds every socket ready at once.
        h.run(seconds: 0.3) { false }
        #expect(h.engine.waitingToJoin == 0)
        usleep(1_000_000)
        h.loop.updateTime()
        // A turn starts at each run of this prepare handle; count completions per turn.
        let turns = try Prepare(loop: h.loop)
        var turn = 0
        turns.start { turn += 1 }
        var completedIn: [Int: Int] = [:]
        for (_, r) in pairs { r.onDone = { _ in completedIn[turn, default: 0] += 1 } }
        h.run(seconds: 30) { pairs.allSatisfy { $0.1.completions > 0 } }
        turns.close()
        #expect(pairs.allSatisfy { $0.1.succeeded && $0.1.bodyText == "ok" })
        // The engine's own turn handle may run before or after this one in the same
        // phase, so one counted turn can hold two of the engine's.
        let largest = completedIn.values.max() ?? 0
        #expect(largest <= 2 * TransferEngine.readyPerTurn, "\(largest) completed in one turn: \(completedIn)")
        #expect(completedIn.count >= n / (2 * TransferEngine.readyPerTurn))
        #expect(h.engine.readyQueue.isEmpty)
        pairs = []
        #expect(try h.finish() == [])
    }
}
