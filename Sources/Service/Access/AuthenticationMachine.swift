/// The rules for a connection that has not proved who it is yet, as a pure value: it
/// decides, the server acts (`Server.perform(_:for:)` in `Server+Authentication.swift`), and
/// the tests drive it with no socket and no timer (`AuthenticationMachineTests`).
///
/// Attempts (`auth` calls) are judged one at a time, oldest first. A wrong token is
/// answered only after a delay, and attempts that come meanwhile wait behind it, so a
/// guesser gets one answer per delay per connection; at most `maxQueued` may wait,
/// more are refused at once. After `maxFailures` wrong tokens the connection is closed.
/// While an attempt is unanswered the connection's later calls wait (`isSettled`), so
/// they are judged as the connection will then be, not as it is before the answer.
/// A success does not empty the queue: the attempts behind it are judged in turn and
/// answered that the connection is already authenticated.
///
/// `Attempt` is whatever the server needs to answer one (its call and token).
struct AuthenticationMachine<Attempt> {
    static var maxFailures: Int { 5 }
    static var maxQueued: Int { 8 }

    /// What the server is asked to do.
    enum Action {
        /// Refuse at once: too many attempts are waiting.
        case refuseQueueFull(Attempt)
        /// Compare the token now and report the outcome with `judged`.
        case judge(Attempt)
        /// A wrong token: wait the failure delay, then report `delayEnded`.
        case startFailureDelay(Attempt)
        /// The delay is over: answer that the token is unknown.
        case answerFailure(Attempt)
        /// Too many failures: close the attempt's connection once the answer is out.
        case close(Attempt)
    }

    /// How a judged attempt came out.
    enum Outcome {
        /// Answered at once, whether accepted, or refused for another reason (a
        /// connection limit, a connection already authenticated or gone).
        case answered
        /// The token matches no principal.
        case wrongToken
    }

    private(set) var failures = 0
    private var queue: [Attempt] = []
    private var delaying = false

    var waiting: Int { queue.count }

    /// No attempt waits or is being delayed, and the connection is not being closed for
    /// its failures: its other calls, held while an attempt was unanswered, may run.
    var isSettled: Bool { queue.isEmpty && !delaying && failures < Self.maxFailures }

    /// An `auth` call arrived.
    mutating func received(_ attempt: Attempt) -> [Action] {
        guard queue.count < Self.maxQueued else { return [.refuseQueueFull(attempt)] }
        queue.append(attempt)
        return next()
    }

    /// The server judged `attempt` (from a `.judge` action).
    mutating func judged(_ attempt: Attempt, _ outcome: Outcome) -> [Action] {
        switch outcome {
        case .answered:
            return next()
        case .wrongToken:
            failures += 1
            delaying = true
            return [.startFailureDelay(attempt)]
        }
    }

    /// The failure delay of `attempt` is over.
    mutating func delayEnded(_ attempt: Attempt) -> [Action] {
        delaying = false
        if failures >= Self.maxFailures { return [.answerFailure(attempt), .close(attempt)] }
        return [.answerFailure(attempt)] + next()
    }

    /// The next attempt to judge, unless a failure's answer is still due.
    private mutating func next() -> [Action] {
        guard !delaying, !queue.isEmpty else { return [] }
        return [.judge(queue.removeFirst())]
    }
}
