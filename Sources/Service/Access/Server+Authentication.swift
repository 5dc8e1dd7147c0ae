import EventLoop
import Foundation
import JSON
import JSONRPC
import WebSocket

extension Server {
    /// Who a new connection acts for before any `auth`: a Unix-socket peer by its uid
    /// (a configured principal's, or the server's own, which is the owner's); a TCP
    /// client only when no principal has a token (`--insecure-tcp` on loopback). nil:
    /// the connection must `auth`.
    func identify(_ stream: any ByteStream) -> Principal? {
        let table = principalTable
        if stream.isTCP { return table.tokens.isEmpty ? table.owner : nil }
        guard let uid = stream.peerUID else { return nil }
        if let p = table.byUID[uid] { return p }
        return uid == UInt32(geteuid()) ? table.owner : nil
    }

    /// Marks `conn` (not started yet) as waiting for `auth`: its messages are small
    /// until then, and it is closed if that does not come in time.
    func awaitAuthentication(_ conn: RPCConnection) {
        let pending = PendingAuthentication(source: AuthThrottle.source(peerDescription: conn.peerDescription,
                                                                        peerUID: conn.stream.peerUID))
        conn.context = pending
        conn.restrictMessages(to: PendingAuthentication.messageBytes)
        (conn.stream as? WebSocketStream)?.limitMessages(to: PendingAuthentication.messageBytes)
        guard let deadline = try? EventLoop.Timer(loop: loop) else { return }
        pending.keep(deadline)
        deadline.start(timeout: UInt64(config.authTimeout * 1000)) { [weak conn, weak pending, unowned self] in
            pending?.forget(deadline)
            guard let conn, conn.context is PendingAuthentication else { return }
            // Closed now, whether or not the client reads: waiting for its replies to
            // drain would let a client that never reads keep its slot as long as it
            // liked (and over TLS or WebSocket, before the handshake, nothing drains).
            let err = ServiceError.authTimedOut(after: config.authTimeout)
            conn.send(["jsonrpc": "2.0", "error": err.json, "id": .null])
            conn.closeNow(reason: "not authenticated within \(config.authTimeout) s")
        }
    }

    /// The dispatcher's gate: an unauthenticated connection may only `auth`, and
    /// discover a few times, within its allowance of calls.
    func admit(_ call: RPCCall) throws {
        guard !(call.peer.context is ClientSession) else { return }
        if let pending = call.peer.context as? PendingAuthentication {
            pending.callsLeft -= 1
            if pending.callsLeft < 0 {
                let error = ServiceError.limitExceeded(
                    "callsBeforeAuth", max: PendingAuthentication.calls,
                    "More than \(PendingAuthentication.calls) calls before auth; the connection is closed")
                if let conn = call.peer as? RPCConnection {
                    conn.send(["jsonrpc": "2.0", "error": error.json, "id": .null])
                    conn.closeNow(reason: "\(PendingAuthentication.calls) calls before auth")
                }
                throw error
            }
        }
        switch call.method {
        case "auth":
            return
        case "rpc.discover":
            guard let pending = call.peer.context as? PendingAuthentication, pending.discoverAnswersLeft > 0 else {
                throw ServiceError.limitExceeded(
                    "discoverBeforeAuth", max: PendingAuthentication.discoverAnswers,
                    "rpc.discover is answered \(PendingAuthentication.discoverAnswers) times before auth; authenticate first")
            }
            pending.discoverAnswersLeft -= 1
        default:
            throw ServiceError.authenticateFirst
        }
    }

    /// Counts an error answered to `peer` under its principal (or the anonymous ones).
    func count(_ error: RPCError, from peer: RPCPeer) {
        if let s = peer.context as? ClientSession {
            s.principal.usage.errors[error.kind, default: 0] += 1
        } else {
            anonymousUsage.errors[error.kind, default: 0] += 1
        }
    }

    /// Counts a call answered, by method and outcome, for `/metrics`. A name that is not
    /// a declared method counts as `unknown`, so clients cannot grow the labels.
    func callAnswered(_ call: RPCCall, _ error: RPCError?) {
        metrics.callAnswered(method: call.registered, outcome: error?.kind ?? "ok")
    }

    func registerAuthMethods() {
        registry.register("auth", params: ["token"]) { [unowned self] call in
            let token = try call.params.string("token")
            if let s = call.peer.context as? ClientSession { throw alreadyAuthenticated(s) }
            guard let pending = call.peer.context as? PendingAuthentication else {
                throw RPCError.internalError("the connection has no authentication state")
            }
            perform(pending.machine.received((call, token)), for: pending)
            // Answered after the failure delay: the calls after it wait for that answer,
            // so that they are judged as the connection then is (a right token queued
            // behind a wrong one authenticates it for them).
            if !call.isAnswered { (call.peer as? RPCConnection)?.holdCalls() }
            return .deferred
        }
    }

    /// Does what the connection's `AuthenticationMachine` asks, feeding the outcomes
    /// back to it.
    private func perform(_ actions: [PendingAuthentication.Machine.Action], for pending: PendingAuthentication) {
        for action in actions {
            switch action {
            case .refuseQueueFull(let attempt):
                let max = PendingAuthentication.Machine.maxQueued
                attempt.call.fail(ServiceError.limitExceeded("authQueue", max: max,
                                                             "Too many auth attempts waiting; wait for their answers"))
            case .judge(let attempt):
                perform(pending.machine.judged(attempt, judge(attempt)), for: pending)
            case .startFailureDelay(let attempt):
                startFailureDelay(attempt, for: pending)
            case .answerFailure(let attempt):
                attempt.call.fail(authFailed)  // counted as an anonymous error by `count`
            case .close(let attempt):
                guard let conn = attempt.call.peer as? RPCConnection else { continue }
                logger.notice("closing \(conn.peerDescription): \(pending.machine.failures) failed auth attempts")
                conn.closeAfterFlush()
            }
        }
    }

    /// Compares an attempt's token with every principal's, and answers it unless the
    /// token is wrong (that answer waits for the failure delay).
    private func judge(_ attempt: PendingAuthentication.Attempt) -> PendingAuthentication.Machine.Outcome {
        let call = attempt.call
        guard let conn = call.peer as? RPCConnection, conn.isOpen else { return .answered }
        if let s = conn.context as? ClientSession {
            call.fail(alreadyAuthenticated(s))
            return .answered
        }
        guard let pendingState = pending(conn) else {
            call.fail(.internalError("the connection has no authentication state"))
            return .answered
        }
        // Before the comparison, so that a spent budget tells nothing about the token.
        // Logged at debug level only: the wrong tokens that spent it were logged, and
        // a refusal costs the client nothing, so it could fill the log.
        if case .refuse(let limit, let retryAfter) = authThrottle.check(source: pendingState.source, now: clock.now()) {
            logger.debug("auth from \(conn.peerDescription) not tried: \(limit.rawValue) spent for \(Int(retryAfter.rounded(.up))) s")
            call.fail(authThrottled(limit, retryAfter: retryAfter))
            return .answered
        }
        let digest = TokenDigest.sha256(attempt.token)
        // Every digest is compared, so the time taken does not say which one matched.
        var match: Principal?
        for entry in principalTable.tokens where TokenDigest.equal(entry.digest, digest) { match = entry.principal }
        guard let p = match else {
            authFailures += 1
            authThrottle.failed(source: pendingState.source, now: clock.now())
            logger.warning("failed auth from \(conn.peerDescription) (\(pendingState.machine.failures + 1) on this connection, \(authFailures) in all)")
            return .wrongToken
        }
        do {
            try makeRoomForConnection(p)
        } catch {
            call.fail(error)
            return .answered
        }
        endPending(pendingState, of: conn)
        conn.context = ClientSession(connection: conn, principal: p)
        conn.liftMessageRestriction()
        (conn.stream as? WebSocketStream)?.limitMessages(to: config.connection.maxMessageBytes)
        logger.info("\(conn.peerDescription) authenticated as '\(p.name)'")
        call.reply(["principal": .string(p.name), "admin": .bool(p.isAdmin)])
        return .answered
    }

    /// Holds a wrong token's answer for the failure delay.
    private func startFailureDelay(_ attempt: PendingAuthentication.Attempt, for pending: PendingAuthentication) {
        guard let timer = try? EventLoop.Timer(loop: loop) else {
            attempt.call.fail(authFailed)
            (attempt.call.peer as? RPCConnection)?.closeAfterFlush()
            return
        }
        pending.keep(timer)
        let conn = attempt.call.peer as? RPCConnection
        timer.start(timeout: UInt64(config.authFailureDelay * 1000)) { [weak pending, weak conn, unowned self] in
            guard let pending, let conn else { return }
            pending.forget(timer)
            perform(pending.machine.delayEnded(attempt), for: pending)
            if pending.machine.isSettled { conn.releaseCalls() }
        }
    }

    private func pending(_ conn: RPCConnection) -> PendingAuthentication? { conn.context as? PendingAuthentication }

    /// `conn` stops waiting for `auth` (it succeeded, or the connection closed): the
    /// timers stop, and what it exchanged so far counts as an anonymous connection's.
    func endPending(_ pending: PendingAuthentication, of conn: RPCConnection) {
        pending.stopTimers()
        anonymousUsage.bytesIn += conn.bytesIn
        anonymousUsage.bytesOut += conn.bytesOut
    }

    private func alreadyAuthenticated(_ s: ClientSession) -> RPCError {
        ServiceError.alreadyAuthenticated(as: s.principal.name)
    }

    /// An attempt refused unjudged: the throttle's `limit` is spent (`AuthThrottle`).
    private func authThrottled(_ limit: AuthThrottle.Limit, retryAfter: Double) -> RPCError {
        let max = limit == .perSource ? authThrottle.budget.perSource : authThrottle.budget.total
        return ServiceError.authThrottled(limit.rawValue, max: max, perSource: limit == .perSource,
                                          retryAfter: Int(retryAfter.rounded(.up)))
    }

    private var authFailed: RPCError { ServiceError.unknownToken(maxFailures: PendingAuthentication.Machine.maxFailures) }
}
