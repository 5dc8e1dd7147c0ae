import EventLoop
import Foundation
import JSONRPC
import WebSocket

/// The HTTP operations listener (`--http-listen tcp:HOST:PORT`): `GET /healthz`,
/// `GET /readyz` and `GET /metrics` for probes and Prometheus, on its own port, beside
/// the JSON-RPC listeners; and, for a browser, the dashboard page at `/` and the
/// WebSocket upgrade on `/rpc` (`Server+OperationsRPC.swift`). The HTTP endpoints act for
/// no principal; `/rpc` is a JSON-RPC connection like a ws: listener's.
///
/// Who may reach it follows the TCP rule (`checkTCPAllowed`): without principals that
/// hold tokens it may listen on loopback only, where every local process may read the
/// metrics; with them it may listen anywhere, and `/metrics` then asks for
/// `Authorization: Bearer TOKEN` of an admin principal (the figures are server-wide,
/// like an admin's `server.stats`). The probes stay open: they say only up or not.
///
/// It opens before the JSON-RPC listeners, so `/readyz` says 503 until they listen, and
/// it keeps serving through a drain (`/healthz` 200, `/readyz` 503) until the stop
/// finishes.
extension Server {
    /// How late the loop-lag timer may fire is measured every this many milliseconds.
    static let loopLagIntervalMs: UInt64 = 250

    /// Refuses an `--http-listen` address that the rule above does not allow.
    func checkOperationsListenAllowed() throws {
        guard let address = config.httpListen else { return }
        guard case .tcp(let host, _) = address else { throw StartupError.httpListenNotTCP(address) }
        guard principalTable.tokens.isEmpty, !ListenAddress.isLoopback(host) else { return }
        throw StartupError.httpListenNeedsTokens(address)
    }

    /// Opens the operations listener, if one is configured, and starts measuring the
    /// loop's lag. Returns its address as bound.
    func startOperationsListener() throws -> ListenAddress? {
        guard case .tcp(let host, let port) = config.httpListen else { return nil }
        let listener: Listener
        do {
            listener = try Listener.tcp(loop: loop, host: host, port: port)
            try listener.listen { [unowned self] result in operationsAccepted(result) }
        } catch let e as UVError {
            throw StartupError.httpCannotListen(config.httpListen!, reason: "\(e.message) (\(e.name))")
        }
        operationsListener = listener
        let actual = ListenAddress.tcp(host: host, port: listener.boundPort ?? port)
        logger.info("operations listener (dashboard, rpc, healthz, readyz, metrics) on http \(actual)")
        startLoopLagTimer()
        return actual
    }

    private func operationsAccepted(_ result: Result<EventLoop.Stream, UVError>) {
        guard case .success(let stream) = result else { return }
        guard operationsConnections.count < config.httpMaxConnections else {
            // Closed at once, not held to read a request: every client held costs a
            // descriptor, and the JSON-RPC listeners need theirs.
            logger.warning("refusing operations client \(stream.peerDescription): \(config.httpMaxConnections) clients already")
            stream.write(Array(OperationsConnection.busyResponse.utf8))
            stream.close()
            return
        }
        stream.setKeepAlive(idleSeconds: config.tcpKeepalive)  // its /rpc is a client connection
        let id = nextConnectionID
        nextConnectionID += 1
        let c = OperationsConnection(id: id, stream: stream, loop: loop, timeoutMs: config.httpTimeoutMs)
        operationsConnections[id] = c
        c.onClose = { [unowned self] c in operationsConnections[c.id] = nil }
        c.start { [unowned self, unowned c] head in
            if let refusal = misdirected(head) { return refusal }
            return head.path == "/rpc" ? upgradeToRPC(c, head) : respond(to: head, from: c.peerDescription)
        }
    }

    /// Without principals' tokens the listener is on loopback, and nothing but its
    /// address guards it. A web page whose own name was made to resolve to 127.0.0.1 (DNS
    /// rebinding) is same-origin with it in the browser, so it could read `/metrics` and
    /// the page; its requests carry that name in `Host`. There the host name in a
    /// request's `Host` must therefore be one of the listener's own: those of its page
    /// origins (`pageOrigins`) or of `--ws-origin`. The port is not compared: the name is
    /// what a rebinding page cannot fake, and a tool may leave the port out. Anything
    /// else is 421, Misdirected Request (RFC 9110 §15.5.20). A request without `Host`
    /// (HTTP/1.0, a program) is served. With tokens, the bearer token is the guard, and
    /// the listener may be reached under names it cannot know.
    func misdirected(_ head: HTTPRequestHead) -> OperationsConnection.Response? {
        guard principalTable.tokens.isEmpty, let host = head.header("host") else { return nil }
        let ours = (dashboardOrigins + config.wsOrigins).map { origin in
            Self.hostName(ofAuthority: origin.split(separator: "://", maxSplits: 1).last.map(String.init) ?? "")
        }
        guard !ours.contains(Self.hostName(ofAuthority: host)) else { return nil }
        return .init(status: 421, body: Array(("Host '\(host)' is not a name of this listener (\(ours.joined(separator: ", "))); "
            + "another name is served once --ws-origin lists it\n").utf8))
    }

    /// The host of `HOST[:PORT]` (`[v6][:PORT]` keeps its brackets), lower-cased.
    static func hostName(ofAuthority authority: String) -> String {
        var text = Substring(authority.lowercased())
        if let colon = text.lastIndex(of: ":"), !text[colon...].contains("]"),
           text[text.index(after: colon)...].allSatisfy(\.isNumber) {
            text = text[..<colon]
        }
        return String(text)
    }

    /// Whether the server takes new work: its JSON-RPC listeners are open and no stop
    /// has begun.
    var isReady: Bool { !listeners.isEmpty && shutdownMachine.phase == .serving }

    /// The answer to one request of the operations listener, from the client at `peer`
    /// (`Stream.peerDescription`; its wrong bearer tokens count against it).
    func respond(to head: HTTPRequestHead, from peer: String) -> OperationsConnection.Response {
        let text = { (s: String) in Array(s.utf8) }
        let path = head.path
        guard path == "/healthz" || path == "/readyz" || path == "/metrics" || DashboardPage.file(path) != nil else {
            return .init(status: 404, body: text("not found: this listener serves /, /rpc, /healthz, /readyz and /metrics\n"))
        }
        guard head.method == "GET" || head.method == "HEAD" else {
            return .init(status: 405, body: text("only GET and HEAD\n"), extraHeaders: [("Allow", "GET, HEAD")])
        }
        switch path {
        case "/healthz":
            return .init(status: 200, body: text("ok\n"))
        case "/readyz":
            return isReady ? .init(status: 200, body: text("ready\n"))
                : .init(status: 503, body: text(shutdownMachine.phase == .serving ? "not listening yet\n" : "draining\n"))
        case "/metrics":
            if let refusal = checkBearer(head, admin: true, from: peer) { return refusal }
            return .init(status: 200, body: metricsText(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        default:
            if case .tcp(let host, _) = config.httpListen, !ListenAddress.isLoopback(host),
               let refusal = checkBearer(head, admin: false, from: peer) { return refusal }
            return dashboardResponse(path)
        }
    }

    /// With principals holding tokens, `/metrics` needs an admin's token as a bearer
    /// token (`admin`), and the dashboard's files on a non-loopback listener any
    /// principal's: 401 without one or with a wrong one, 403 for a non-admin's where an
    /// admin is needed; 429 when the client's source, or the server, has had too many
    /// wrong tokens (`AuthThrottle`, shared with `auth`).
    private func checkBearer(_ head: HTTPRequestHead, admin: Bool, from peer: String) -> OperationsConnection.Response? {
        guard !principalTable.tokens.isEmpty else { return nil }
        let challenge = [("WWW-Authenticate", "Bearer realm=\"xhrpc\"")]
        guard let value = head.header("authorization"), value.lowercased().hasPrefix("bearer ") else {
            let who = admin ? "an admin principal's" : "a principal's"
            return .init(status: 401, body: Array("\(who) token is needed: Authorization: Bearer TOKEN\n".utf8),
                         extraHeaders: challenge)
        }
        let source = AuthThrottle.source(peerDescription: peer, peerUID: nil)
        if case .refuse(let limit, let retryAfter) = authThrottle.check(source: source, now: clock.now()) {
            let seconds = Int(retryAfter.rounded(.up))
            return .init(status: 429, body: Array("too many wrong tokens (\(limit.rawValue)); the token was not tried\n".utf8),
                         extraHeaders: [("Retry-After", "\(seconds)")])
        }
        let digest = TokenDigest.sha256(String(value.dropFirst(7)).trimmingCharacters(in: .whitespaces))
        // Every digest is compared, so the time taken does not say which one matched.
        var match: Principal?
        for entry in principalTable.tokens where TokenDigest.equal(entry.digest, digest) { match = entry.principal }
        guard let p = match else {
            authFailures += 1
            authThrottle.failed(source: source, now: clock.now())
            return .init(status: 401, body: Array("wrong token\n".utf8), extraHeaders: challenge)
        }
        guard p.isAdmin || !admin else { return .init(status: 403, body: Array("principal '\(p.name)' is not an admin\n".utf8)) }
        return nil
    }

    /// The metrics in the Prometheus text format, with the gauges read from the tables
    /// that hold them now.
    func metricsText() -> [UInt8] {
        var inFlight = 0
        var socketsOpen = 0
        for p in principals.values {
            inFlight += p.transfersInFlight
            for o in p.objects.values {
                if let s = o as? RawSocket, s.state == .open { socketsOpen += 1 }
            }
        }
        metrics.requestsInFlight.record(inFlight)
        metrics.socketsOpen.record(socketsOpen)
        metrics.transfersPaused.record(engine.pausedTransferCount)
        return metrics.render()
    }

    /// A repeating timer that records how much later than asked each tick runs: the
    /// time the loop spent in callbacks that kept it from coming back.
    private func startLoopLagTimer() {
        guard let timer = try? EventLoop.Timer(loop: loop) else { return }
        let interval = Self.loopLagIntervalMs
        var expected = DispatchTime.now().uptimeNanoseconds + interval * 1_000_000
        timer.start(timeout: interval, repeat: interval) { [unowned self] in
            let now = DispatchTime.now().uptimeNanoseconds
            metrics.loopWasLate(nanoseconds: now > expected ? Int64(now - expected) : 0)
            expected = now + interval * 1_000_000
        }
        loopLagTimer = timer
    }

    /// Closes the operations listener, its clients and the lag timer: the last step of
    /// a stop, so the probes answer through the drain.
    func stopOperationsListener() {
        operationsListener?.close()
        operationsListener = nil
        loopLagTimer?.close()
        loopLagTimer = nil
        for c in Array(operationsConnections.values) { c.close() }
    }
}
