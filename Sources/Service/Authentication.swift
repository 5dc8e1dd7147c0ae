import EventLoop
import Foundation
import JSON
import JSONRPC

/// The principals built from the configuration, checked once at start: names unique and
/// valid, uids and tokens each claimed by one principal only.
struct PrincipalTable {
    static let ownerName = "local"

    var byName: [String: Principal] = [:]
    var byUID: [UInt32: Principal] = [:]
    var tokens: [(digest: [UInt8], principal: Principal)] = []
    let owner: Principal

    init(_ config: ServerConfig) throws {
        let serverUID = UInt32(geteuid())
        var owner: Principal?
        for c in config.principals {
            guard PrincipalConfig.isValidName(c.name) else {
                throw StartupError(description: "principal '\(c.name)': a name is 1 to 64 of A-Z a-z 0-9 . _ - and does not start with a dot")
            }
            guard c.name != Self.ownerName else {
                throw StartupError(description: "principal 'local' is the built-in socket owner's; give it another name and \"uid\": \(serverUID)")
            }
            guard byName[c.name] == nil else { throw StartupError(description: "principal '\(c.name)' is declared twice") }
            guard c.tokenHash != nil || c.uid != nil else {
                throw StartupError(description: "principal '\(c.name)' needs a \"tokenSha256\" or a \"uid\" to be reachable")
            }
            let p = try Principal(name: c.name, isAdmin: c.isAdmin, limits: c.limits)
            byName[c.name] = p
            if let uid = c.uid {
                guard byUID[uid] == nil else { throw StartupError(description: "uid \(uid) is given to two principals") }
                byUID[uid] = p
                if uid == serverUID { owner = p }
            }
            if let digest = c.tokenHash {
                guard !tokens.contains(where: { TokenDigest.equal($0.digest, digest) }) else {
                    throw StartupError(description: "principal '\(c.name)' has the same token as another principal")
                }
                tokens.append((digest, p))
            }
        }
        if owner == nil {
            let local = try Principal(name: Self.ownerName, isAdmin: true, limits: config.limits)
            byName[Self.ownerName] = local
            owner = local
        }
        self.owner = owner!
    }
}

/// A connection that has not proved who it is yet. It may call `auth` and
/// `rpc.discover`, nothing else. Failed attempts are answered one at a time, each after
/// the delay, so a guesser gets one answer a second per connection; the connection is
/// closed after `maxFailures` of them, or when `authTimeout` passes without success.
final class PendingAuthentication {
    static let maxFailures = 5
    /// Attempts waiting behind a failure's delay; more are refused at once.
    static let maxQueued = 8

    var failures = 0
    /// `auth` calls not yet judged, oldest first; the head is judged when no failure's
    /// answer is pending.
    var queue: [(call: RPCCall, token: String)] = []
    var delayPending = false
    private var timers: [EventLoop.Timer] = []

    func keep(_ t: EventLoop.Timer) { timers.append(t) }

    func forget(_ t: EventLoop.Timer) {
        t.close()
        timers.removeAll { $0 === t }
    }

    /// Authentication succeeded or the connection closed: no timer of it may fire any
    /// more. Attempts still queued are left to the caller (answered, or dropped with
    /// the connection).
    func stopTimers() {
        for t in timers { t.close() }
        timers = []
    }
}

extension Server {
    /// Whether a TCP or TLS listener at `address` may open: with principals holding tokens, always
    /// (clients must `auth`); without, only on loopback and only with `--insecure-tcp`.
    func checkTCPAllowed(_ address: ListenAddress) throws {
        guard principalTable.tokens.isEmpty else { return }
        let host: String
        switch address {
        case .unix: return
        case .tcp(let h, _), .tls(let h, _): host = h
        }
        guard ListenAddress.isLoopback(host) else {
            throw StartupError(description: "refusing to listen on \(address): TCP on a non-loopback address needs principals with tokens (the config file's \"principals\"); see the README's Security section")
        }
        guard config.insecureTCP else {
            throw StartupError(description: "refusing to listen on \(address) without principals: declare principals with tokens in the config file (\"principals\"), or pass --insecure-tcp to let every local TCP client act as the socket owner")
        }
    }

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

    /// Marks `conn` as waiting for `auth`, and closes it if that does not come in time.
    func awaitAuthentication(_ conn: RPCConnection) {
        let pending = PendingAuthentication()
        conn.context = pending
        guard let deadline = try? EventLoop.Timer(loop: loop) else { return }
        pending.keep(deadline)
        deadline.start(timeout: UInt64(config.authTimeout * 1000)) { [weak conn, weak pending, unowned self] in
            pending?.forget(deadline)
            guard let conn, conn.context is PendingAuthentication else { return }
            logger.notice("closing \(conn.peerDescription): not authenticated within \(config.authTimeout) s")
            let err = RPCError.app(.unauthenticated, "Not authenticated within \(config.authTimeout) seconds; the connection is closed")
            conn.send(["jsonrpc": "2.0", "error": err.json, "id": .null])
            conn.closeAfterFlush()
        }
    }

    /// The dispatcher's gate: an unauthenticated connection may only `auth` or discover.
    func admit(_ call: RPCCall) throws {
        guard !(call.peer.context is ClientSession) else { return }
        guard call.method == "auth" || call.method == "rpc.discover" else {
            throw RPCError.app(.unauthenticated, "Authenticate first: call auth {\"token\": ...}")
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

    func registerAuthMethods() {
        registry.register("auth", params: ["token"]) { [unowned self] call in
            let token = try call.params.string("token")
            if let s = call.peer.context as? ClientSession { throw alreadyAuthenticated(s) }
            guard let pending = call.peer.context as? PendingAuthentication else {
                throw RPCError.internalError("the connection has no authentication state")
            }
            guard pending.queue.count < PendingAuthentication.maxQueued else {
                throw RPCError.app(.limitExceeded, "Too many auth attempts waiting; wait for their answers",
                                   ["limit": "authQueue", "max": .int(Int64(PendingAuthentication.maxQueued))])
            }
            pending.queue.append((call, token))
            judgeNext(pending)
            return .deferred
        }
    }

    /// Judges the oldest waiting `auth` unless a failure's answer is still due.
    private func judgeNext(_ pending: PendingAuthentication) {
        while !pending.delayPending, !pending.queue.isEmpty {
            let (call, token) = pending.queue.removeFirst()
            guard let conn = call.peer as? RPCConnection, conn.isOpen else { continue }
            if let s = conn.context as? ClientSession {
                call.fail(alreadyAuthenticated(s))
                continue
            }
            let digest = TokenDigest.sha256(token)
            // Every digest is compared, so the time taken does not say which one matched.
            var match: Principal?
            for entry in principalTable.tokens where TokenDigest.equal(entry.digest, digest) { match = entry.principal }
            if let p = match {
                do {
                    try makeRoomForConnection(p)
                } catch {
                    call.fail(error)
                    continue
                }
                endPending(pending, of: conn)
                conn.context = ClientSession(connection: conn, principal: p)
                logger.info("\(conn.peerDescription) authenticated as '\(p.name)'")
                call.reply(["principal": .string(p.name), "admin": .bool(p.isAdmin)])
                // Attempts queued behind this one find the connection authenticated and
                // are answered so by the next rounds of this loop.
                continue
            }
            authFailures += 1
            pending.failures += 1
            logger.warning("failed auth from \(conn.peerDescription) (\(pending.failures) on this connection, \(authFailures) in all)")
            pending.delayPending = true
            guard let timer = try? EventLoop.Timer(loop: loop) else {
                call.fail(authFailed)
                conn.closeAfterFlush()
                return
            }
            pending.keep(timer)
            timer.start(timeout: UInt64(config.authFailureDelay * 1000)) { [weak pending, weak conn, unowned self] in
                guard let pending, let conn else { return }
                pending.forget(timer)
                pending.delayPending = false
                call.fail(authFailed)  // counted as an anonymous error by `count`
                if pending.failures >= PendingAuthentication.maxFailures {
                    logger.notice("closing \(conn.peerDescription): \(pending.failures) failed auth attempts")
                    conn.closeAfterFlush()
                    return
                }
                judgeNext(pending)
            }
        }
    }

    /// `conn` stops waiting for `auth` (it succeeded, or the connection closed): the
    /// timers stop, and what it exchanged so far counts as an anonymous connection's.
    func endPending(_ pending: PendingAuthentication, of conn: RPCConnection) {
        pending.stopTimers()
        anonymousUsage.bytesIn += conn.bytesIn
        anonymousUsage.bytesOut += conn.bytesOut
    }

    private func alreadyAuthenticated(_ s: ClientSession) -> RPCError {
        .app(.invalidState, "This connection already acts for principal '\(s.principal.name)'",
             ["principal": .string(s.principal.name)])
    }

    private var authFailed: RPCError {
        .app(.unauthenticated, "Unknown token; after \(PendingAuthentication.maxFailures) failures the connection is closed")
    }
}
