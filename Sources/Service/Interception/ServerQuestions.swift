import EventLoop
import JSON
import JSONRPC
import Logging

/// Requests the server sends to a client and the answers it waits for (DESIGN §3: ids
/// beginning `srv-`), with a deadline each. The loop never waits: a question is a
/// message out and a callback later, from the answer, the deadline, or the close of the
/// connection, whichever comes first, exactly once. A late answer finds no question and
/// is dropped.
///
/// Confined to the loop's thread.
final class ServerQuestions {
    /// How a question ended.
    enum Answer {
        /// The client's result.
        case result(JSONValue)
        /// No usable answer (an error reply, the deadline, the connection closed), and
        /// why, for the log.
        case none(String)
    }

    /// One question waiting; `cancel` forgets it (its callback is then never called).
    final class Ticket {
        fileprivate let id: String
        fileprivate weak var owner: ServerQuestions?
        fileprivate init(id: String, owner: ServerQuestions) {
            self.id = id
            self.owner = owner
        }

        func cancel() { owner?.finish(id, nil) }
    }

    private struct Pending {
        let peer: ObjectIdentifier
        let timer: EventLoop.Timer
        let done: (Answer) -> Void
    }

    private let loop: Loop
    private let logger: Logger
    private var pending: [String: Pending] = [:]
    private var nextID: UInt64 = 1

    init(loop: Loop, logger: Logger) {
        self.loop = loop
        self.logger = logger
    }

    var count: Int { pending.count }

    /// Sends `method` with `params` to `peer` as a request and calls `done` once with
    /// what came of it within `timeout` seconds.
    @discardableResult
    func ask(_ peer: RPCPeer, _ method: String, _ params: JSONValue, timeout: Double,
             _ done: @escaping (Answer) -> Void) -> Ticket {
        let id = "srv-\(nextID)"
        nextID += 1
        let ticket = Ticket(id: id, owner: self)
        guard peer.isOpen, let timer = try? EventLoop.Timer(loop: loop) else {
            done(.none("the interceptor's connection is closed"))
            return ticket
        }
        pending[id] = Pending(peer: ObjectIdentifier(peer), timer: timer, done: done)
        timer.start(timeout: UInt64(max(timeout, 0.001) * 1000)) { [unowned self] in
            finish(id, .none("no answer to \(method) within \(timeout) s"))
        }
        peer.send(["jsonrpc": "2.0", "id": .string(id), "method": .string(method), "params": params])
        return ticket
    }

    /// A response arrived from `peer` (the dispatcher's `onResponse`).
    func answered(by peer: RPCPeer, id: JSONValue, _ response: RPCResponse) {
        guard let key = id.stringValue, let p = pending[key], p.peer == ObjectIdentifier(peer) else {
            logger.debug("a response to no question of ours (id \(id)) was dropped")
            return
        }
        switch response {
        case .result(let value): finish(key, .result(value))
        case .error(let error):
            let message = error.objectValue?["message"]?.stringValue ?? "an error"
            finish(key, .none("the interceptor answered with an error: \(message)"))
        }
    }

    /// `peer`'s connection closed: its questions end without an answer.
    func connectionClosed(_ peer: RPCPeer) {
        let gone = ObjectIdentifier(peer)
        for (id, p) in pending where p.peer == gone {
            finish(id, .none("the interceptor's connection closed"))
        }
    }

    /// Stops every question (shutdown): their callbacks are not called.
    func close() {
        for id in Array(pending.keys) { finish(id, nil) }
    }

    private func finish(_ id: String, _ answer: Answer?) {
        guard let p = pending.removeValue(forKey: id) else { return }
        p.timer.close()
        if let answer { p.done(answer) }
    }
}
