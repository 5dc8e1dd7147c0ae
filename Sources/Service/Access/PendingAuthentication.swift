import EventLoop
import JSONRPC

/// A connection that has not proved who it is yet: its `AuthenticationMachine` and the
/// timers of its failure delays and of its deadline. It may call `auth` and
/// `rpc.discover`, nothing else, and is closed when `authTimeout` passes without success.
final class PendingAuthentication {
    typealias Attempt = (call: RPCCall, token: String)
    typealias Machine = AuthenticationMachine<Attempt>

    var machine = Machine()
    private var timers: [EventLoop.Timer] = []

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
