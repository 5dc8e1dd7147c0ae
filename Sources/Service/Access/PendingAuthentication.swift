import EventLoop
import JSONRPC

/// A connection that has not proved who it is yet: its `AuthenticationMachine`, the
/// timers of its failure delays and of its deadline, and what it may still cost. It may
/// call `auth` and `rpc.discover` (`discoverAnswersLeft` times), nothing else, and at
/// most `calls` calls in all; its messages are at most `messageBytes` long; and it is
/// closed when `authTimeout` passes without success, whatever it is doing then.
final class PendingAuthentication {
    typealias Attempt = (call: RPCCall, token: String)
    typealias Machine = AuthenticationMachine<Attempt>

    /// The largest message a connection may send before `auth` succeeds, as nginx's
    /// header buffers bound a request before anything is known of its sender: an `auth`
    /// call is under 200 bytes. A larger one is `message_too_large`, found as its bytes
    /// arrive (`JSONStreamDecoder`), never parsed further.
    static let messageBytes = 64 << 10
    /// How many `rpc.discover` calls are answered before `auth`: the answer is the whole
    /// OpenRPC document (150 KB), and a batch of 580 of them once held 64 MB and the
    /// loop for seconds.
    static let discoverAnswers = 2
    /// How many calls are answered before `auth` succeeds (the attempts, the discovers
    /// and the refusals of every other call); the next one closes the connection. Its
    /// replies are then bounded too (two discovers and small errors, about 320 KB),
    /// however many 64 KiB batches of refused calls it sends and does not read.
    static let calls = 100

    var machine = Machine()
    /// Where its wrong tokens count (`AuthThrottle.source`).
    let source: String
    var discoverAnswersLeft = PendingAuthentication.discoverAnswers
    var callsLeft = PendingAuthentication.calls
    private var timers: [EventLoop.Timer] = []

    init(source: String) { self.source = source }

    func keep(_ t: EventLoop.Timer) { timers.append(t) }

    func forget(_ t: EventLoop.Timer) {
        t.close()
        timers.removeAll { $0 === t }
    }

    /// Authentication succeeded or the connection closed: no timer of it may fire any
    /// more. Attempts still queued are judged by the machine's next rounds (answered
    /// that the connection is authenticated), or dropped with the connection.
    func stopTimers() {
        for t in timers { t.close() }
        timers = []
    }
}
