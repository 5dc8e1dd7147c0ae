import EventLoop
import JSON
import JSONRPC
import Logging
import Testing
@testable import Service

/// The server's questions to a client: each ends exactly once, by the answer, the
/// deadline or the close of the connection; a late or foreign answer finds nothing.
@Suite struct ServerQuestionsTests {
    final class Peer: RPCPeer {
        var sent: [JSONValue] = []
        var isOpen = true
        var context: AnyObject?
        func send(_ message: JSONValue) { sent.append(message) }
        func admits(replyBytes bytes: Int) -> Bool { isOpen }
        func deferredCallStarted() {}
        func deferredCallEnded() {}
    }

    private func run(_ loop: Loop, until done: () -> Bool) {
        var turns = 0
        while !done(), turns < 1000 {
            _ = loop.runOnce()
            turns += 1
        }
    }

    @Test func anAnswerEndsTheQuestionOnceAndALateOneIsDropped() throws {
        let loop = try Loop()
        let q = ServerQuestions(loop: loop, logger: Logger(label: "test"))
        let peer = Peer()
        var answers: [JSONValue?] = []
        q.ask(peer, "willSendRequest", ["request": "r1"], timeout: 5) { answer in
            if case .result(let v) = answer { answers.append(v) } else { answers.append(nil) }
        }
        let id = try #require(peer.sent.first?["id"])
        #expect(id.stringValue?.hasPrefix("srv-") == true)
        #expect(peer.sent.first?["method"] == "willSendRequest")
        q.answered(by: Peer(), id: id, .result(false))
        #expect(answers.isEmpty, "an answer from another connection is not this question's")
        q.answered(by: peer, id: id, .result(true))
        q.answered(by: peer, id: id, .result(false))
        #expect(answers == [.bool(true)])
        #expect(q.count == 0)
        q.close()
        loop.run()
        try loop.close()
    }

    @Test func theDeadlineAnErrorReplyAndACloseEachEndAQuestionWithoutAnAnswer() throws {
        let loop = try Loop()
        let q = ServerQuestions(loop: loop, logger: Logger(label: "test"))
        let peer = Peer()
        var reasons: [String] = []
        func record(_ answer: ServerQuestions.Answer) {
            if case .none(let why) = answer { reasons.append(why) } else { reasons.append("answered") }
        }
        q.ask(peer, "a", [:], timeout: 0.02, record)
        q.ask(peer, "b", [:], timeout: 5, record)
        q.ask(peer, "c", [:], timeout: 5, record)
        q.answered(by: peer, id: peer.sent[1]["id"]!, .error(["code": -1, "message": "no idea"]))
        run(loop) { reasons.count == 2 }
        #expect(reasons.count == 2)
        #expect(reasons.contains { $0.contains("no idea") })
        #expect(reasons.contains { $0.contains("within 0.02 s") })
        q.connectionClosed(peer)
        #expect(reasons.last?.contains("closed") == true)
        #expect(q.count == 0)
        // A cancelled question is never answered.
        var cancelledAnswered = false
        let ticket = q.ask(peer, "d", [:], timeout: 0.01) { _ in cancelledAnswered = true }
        ticket.cancel()
        run(loop) { false }
        #expect(!cancelledAnswered)
        q.close()
        loop.run()
        try loop.close()
    }
}
