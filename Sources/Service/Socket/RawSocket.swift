import EventLoop
import HTTPEngine
import JSON
import JSONRPC
import SecureStream

/// A raw TCP or TLS socket living in the server: the `socket.*` methods over JSON-RPC
/// (docs/internals/SOCKETS.md). The state machine (`SocketStateMachine`) decides what each call and
/// event may do; this class performs it: it makes the stream (`SocketConnector`), keeps
/// the unread inbound bytes and the queue of outbound ones, and tells the creator and
/// subscribers `socket.onOpen`, `socket.onRead`, `socket.onErr` and `socket.onClose`.
///
/// Both directions are bounded. Inbound: at `--max-buffer-bytes` unread (or the
/// principal's `bufferedBytes`), the socket stops reading, so the peer's TCP window
/// closes until the client reads. Outbound: a `write` that would queue more than
/// `--max-buffer-bytes` not yet taken by the kernel is refused with `limit_exceeded`,
/// so a peer that does not read cannot make the server hold without bound, and nothing
/// accepted is dropped.
///
/// Lifetime: as for every `SessionObject` (the principal's table, release with the
/// creating connection, `detach`/`attach`, the TTL while Prepared or Disconnected).
final class RawSocket: SessionObject, BudgetWaiter {
    static let kind = "socket"
    /// Seconds `connect` waits by default.
    static let defaultConnectTimeout: Double = 30
    /// Milliseconds a `disconnect` waits for queued writes to go out before closing anyway.
    static let flushTimeoutMs: UInt64 = 2_000

    let handle: String
    unowned let principal: Principal
    weak var creator: ClientSession?
    /// Hears the socket's events besides subscribers: the creator, unless detached.
    weak var opener: ClientSession?
    unowned let env: ObjectEnvironment

    let host: String
    let port: Int
    let ssl: Bool
    var verifyPeer = true
    var verifyHost = true

    private(set) var machine = SocketStateMachine()
    var state: SocketState { machine.state }

    private var connector: SocketConnector?
    private var stream: (any ByteStream)?
    /// Received and not read yet.
    private let inbound: UnreadBytes
    /// Whether the last stream has ended: nothing more will arrive. False before the
    /// first connect, when no stream has existed yet.
    private var inputEnded = false
    /// Whether reading stopped because the inbound buffer or the principal's is full.
    private var readingPaused = false
    /// A flush runs (`flush`: a `disconnect`, or the peer's end of input): the socket
    /// closes when the queue drains, or when `flushTimer` says time is up.
    private var flushing = false
    private var flushTimer: EventLoop.Timer?
    /// The bytes of the outbound queue counted in the principal's `bufferedBytes`: the
    /// queue as the last write left it, until it drains. (A queue that shrinks is seen
    /// only when it empties, so in between the count is high, never low.)
    private var outboundCounted = 0

    /// Bytes received and sent over the current stream, and when it was asked for: the
    /// access log's figures.
    private var bytesIn = 0
    private var bytesOut = 0
    private var connectAt: Double?
    private var failureWord: String?
    /// The TLS stream ended without close_notify (`TLSStream.inputTruncated`): reported
    /// as `onErr` `tls`, and the access log's line says `truncated`.
    private var truncated = false

    var lastUsed: Double

    init(handle: String, host: String, port: Int, ssl: Bool, principal: Principal, creator: ClientSession?,
         environment: ObjectEnvironment) {
        self.handle = handle
        self.host = host
        self.port = port
        self.ssl = ssl
        self.principal = principal
        self.creator = creator
        opener = creator
        env = environment
        inbound = UnreadBytes(principal: principal)
        lastUsed = environment.clock.now()
    }

    func touch() { lastUsed = env.clock.now() }

    /// Prepared or Disconnected: no stream to keep.
    var isIdle: Bool { !state.isLive }

    var listEntry: JSONValue {
        ["socket": .string(handle), "kind": .string(Self.kind), "host": .string(host), "port": .int(Int64(port)),
         "ssl": .bool(ssl), "state": .int(Int64(state.rawValue)), "stateName": .string(state.name),
         "available": .int(Int64(inbound.count))]
    }

    var stateReply: JSONValue { ["state": .int(Int64(state.rawValue)), "stateName": .string(state.name)] }

    private func misuse(_ method: String, _ m: SocketStateMachine.Misuse) -> RPCError {
        ServiceError.misuse(method, allowed: m.allowed, state: state)
    }

    // MARK: Calls

    /// `disablePeerVerification` (`peer`: true) or `disableHostVerification`.
    func disableVerification(peer: Bool) throws(RPCError) {
        let method = peer ? "socket.disablePeerVerification" : "socket.disableHostVerification"
        guard machine.acceptsOptions else { throw misuse(method, .init(allowed: "Prepared or Disconnected")) }
        verifyHost = false
        if peer { verifyPeer = false }
    }

    /// Starts making the stream; the outcome arrives as `socket.onOpen` or
    /// `socket.onErr` + `socket.onClose`. The host rules are asked first, so a denied
    /// destination is refused here and nothing is sent anywhere.
    func connect(timeout: Double?) throws(RPCError) {
        guard machine.acceptsOptions else { throw misuse("socket.connect", .init(allowed: "Prepared or Disconnected")) }
        let policy = env.egressPolicy
        if let policy, case let .denied(reason) = policy.checkDestination(host: host, port: port) {
            throw ServiceError.policyDenied(reason)
        }
        let seconds = timeout.flatMap { $0 > 0 ? $0 : nil } ?? Self.defaultConnectTimeout
        let destination = SocketDestination(
            host: Self.dialHost(host), port: port, tls: ssl, verifyPeer: verifyPeer, verifyHost: verifyHost,
            timeoutMs: UInt64(seconds * 1000), proxy: principal.secureCommunication ? env.egressProxy : nil)
        let c: SocketConnector
        do {
            c = try SocketConnector(loop: env.loop, destination: destination, policy: policy,
                                    tlsContext: { [env] in try env.socketTLSContext() })
        } catch {
            throw RPCError.internalError("cannot connect: \(error)")
        }
        do { try machine.connect() } catch { throw misuse("socket.connect", error) }
        // A new stream: what the previous one left unread goes.
        inbound.removeAll()
        inputEnded = false
        readingPaused = false
        bytesIn = 0
        bytesOut = 0
        failureWord = nil
        truncated = false
        connectAt = env.clock.now()
        connector = c
        c.start { [weak self] result in self?.connected(result) }
    }

    /// The host to look up, connect to and verify: an IPv4 literal as the address the
    /// host rules judged it to be, in dotted decimal (`127.0.0.1.` and `0x7f.1` are
    /// 127.0.0.1; the resolver took the first for a name to look up), anything else as
    /// given. `host` itself stays as the client wrote it, for `list`.
    static func dialHost(_ host: String) -> String {
        guard case .v4(let address)? = IPAddress.parseLiteral(host) else { return host }
        return IPAddress.v4(address).description
    }

    /// Queues `bytes` for the peer; returns how many. Refused past the outbound bound.
    func write(_ bytes: [UInt8]) throws(RPCError) -> Int {
        do { try machine.checkWrite() } catch { throw misuse("socket.write", error) }
        guard let stream else { throw misuse("socket.write", .init(allowed: "Open")) }
        let max = env.requestSettings.maxBufferBytes
        guard bytes.count <= max else { throw ServiceError.writeNeverFits("maxBufferBytes", max: max, bytes.count, "--max-buffer-bytes") }
        guard stream.pendingWriteBytes + bytes.count <= max else {
            throw ServiceError.limitExceeded(
                "maxBufferBytes", max: max,
                "The socket already holds \(stream.pendingWriteBytes) bytes the peer has not taken; \(bytes.count) more would pass \(max) (--max-buffer-bytes). Wait and write again.")
        }
        // The queue counts with the principal's other buffers, so many sockets to peers
        // that do not read cannot hold sockets × --max-buffer-bytes of the server.
        let budget = principal.limits.bufferedBytes
        guard bytes.count <= budget else {
            throw ServiceError.writeNeverFits("bufferedBytes", max: budget, bytes.count, "principal '\(principal.name)''s bufferedBytes limit")
        }
        try principal.checkRoom(bytes.count, for: "socket.write")
        stream.write(bytes)
        countOutbound()
        bytesOut += bytes.count
        principal.usage.socketBytesSent += UInt64(bytes.count)
        return bytes.count
    }

    /// Hands out up to `maxBytes` of what was received, each byte once. The result's
    /// members, `data, encoding, bytes, closed`, are written straight into `result`, the
    /// response's (`UnreadBytes.read`). Nothing is written or taken when it throws.
    func read(maxBytes: Int, encoding: BodyEncoding, into result: inout JSONObjectWriter) throws(RPCError) {
        _ = try inbound.read(maxBytes: maxBytes, encoding: encoding, complete: inputEnded, refilling: readingPaused,
                             into: &result)
        if !readingPaused { sizeReads() }
        budgetFreed()
        result.add(RawSocket.closedKey, .bool(inputEnded && inbound.isEmpty))
    }

    private static let closedKey = JSONKey("closed")

    /// Open: sends what is queued (at most `flushTimeoutMs`), then closes. Connecting:
    /// gives up at once.
    func disconnect() throws(RPCError) {
        let action: SocketStateMachine.DisconnectAction
        do { action = try machine.disconnect() } catch { throw misuse("socket.disconnect", error) }
        switch action {
        case .cancelConnect:
            connector?.cancel()
            connector = nil
            env.soon { [weak self] in self?.closeStream() }
        case .flushThenClose:
            // Closed on the next turn at the earliest, so the call is answered before
            // `socket.onClose` goes out, as for a close that has to wait.
            guard let stream, stream.pendingWriteBytes > 0 else { return env.soon { [weak self] in self?.closeStream() } }
            flush(stream)
        }
    }

    /// Closes once the peer has taken what is queued, waiting at most `flushTimeoutMs`.
    /// What it has not taken by then is dropped, and the client told so (`onErr`
    /// `timeout`): it knows exactly that the bytes `write` accepted did not all arrive.
    private func flush(_ stream: any ByteStream) {
        flushing = true
        flushTimer = try? EventLoop.Timer(loop: env.loop)
        flushTimer?.start(timeout: Self.flushTimeoutMs) { [weak self] in
            guard let self else { return }
            if let left = self.stream?.pendingWriteBytes, left > 0 {
                report(SocketFailure(word: "timeout", message: "\(left) bytes queued for \(SocketConnector.endpoint(host, port)) "
                    + "were not taken within \(Self.flushTimeoutMs) ms of the close, and are dropped"))
            }
            closeStream()
        }
    }

    /// Ends the socket for good: the stream is closed at once (subscribers hear
    /// `socket.onClose` if it was live) and the unread bytes go.
    func release() {
        closeStream()
        inbound.removeAll()
    }

    // MARK: Events

    private func connected(_ result: Result<(stream: any ByteStream, early: [UInt8]), SocketFailure>) {
        connector = nil
        switch result {
        case .failure(let failure):
            report(failure)
            closeStream()
        case .success(let made):
            guard machine.opened() else {
                made.stream.close()
                return
            }
            stream = made.stream
            made.stream.onDrain = { [weak self] in self?.drained() }
            made.stream.onWriteError = { [weak self] error in
                self?.broke(SocketFailure.from(error, "Writing to \(SocketConnector.endpoint(self?.host ?? "", self?.port ?? 0)) failed"))
            }
            notify("socket.onOpen", ["socket": .string(handle)])
            if !made.early.isEmpty { made.early.withUnsafeBytes { received($0) } }
            startReading()
        }
    }

    private func startReading() {
        guard let stream, !inputEnded else { return }
        sizeReads()
        do {
            try stream.startReading { [weak self] event in
                guard let self else { return }
                switch event {
                case .data(let bytes): received(bytes)
                case .eof:
                    if let tls = stream as? TLSStream, tls.inputTruncated { reportTruncation() }
                    ended()
                case .error(let error): broke(SocketFailure.from(error, "Reading from \(SocketConnector.endpoint(host, port)) failed"))
                }
            }
        } catch {
            broke(SocketFailure(word: "io", message: "Reading from \(SocketConnector.endpoint(host, port)) failed: \(error)"))
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let wasEmpty = inbound.isEmpty
        inbound.append(bytes)
        bytesIn += bytes.count
        principal.usage.socketBytesReceived += UInt64(bytes.count)
        if !readingPaused, inbound.count >= env.requestSettings.maxBufferBytes || principal.budgetExhausted {
            readingPaused = true
            stream?.stopReading()
            if principal.budgetExhausted { principal.waitForBudget(self) }
        } else {
            sizeReads()
        }
        if wasEmpty { notify("socket.onRead", ["socket": .string(handle), "available": .int(Int64(inbound.count))]) }
    }

    /// Keeps the stream's reads within the room left in the inbound buffer, so that it
    /// never holds more than --max-buffer-bytes: reading pauses exactly at the limit
    /// instead of one read (up to 64 KiB; over TLS up to a record's plaintext) past it.
    /// The connector's early bytes (`connected`) were read before the socket had a
    /// buffer and are taken as they are: a proxy's reply head holds few, if any.
    private func sizeReads() {
        stream?.maxReadBytes = max(1, env.requestSettings.maxBufferBytes - inbound.count)
    }

    /// Resumes reading once both this socket's buffer and its principal's have room.
    func budgetFreed() {
        guard readingPaused, inbound.count < env.requestSettings.maxBufferBytes else { return }
        if principal.budgetExhausted {
            principal.waitForBudget(self)
            return
        }
        readingPaused = false
        startReading()
    }

    /// The peer closed its end: what it sent stays readable, and what the client queued
    /// still goes out, as for a `disconnect` (the socket is Disconnecting meanwhile): a
    /// peer that only shut its writing side reads on, and one that closed makes the
    /// write fail (`onErr`). Dropping the queue would end a half-sent upload with a FIN
    /// that looks complete.
    private func ended() {
        inputEnded = true
        guard !flushing else { return }  // a `disconnect` is flushing already
        guard let stream, stream.pendingWriteBytes > 0 else { return closeStream() }
        _ = try? machine.disconnect()  // Open → Disconnecting: no more writes
        flush(stream)
    }

    /// Brings the principal's count of this socket's outbound queue to the queue's size.
    private func countOutbound() {
        let queued = stream?.pendingWriteBytes ?? 0
        principal.buffered(queued - outboundCounted)
        outboundCounted = queued
    }

    /// The peer has taken everything queued: the budget gets it back, and a flush is done.
    private func drained() {
        countOutbound()
        if flushing { closeStream() }
    }

    /// The TLS peer closed TCP without close_notify: what was read is kept and the
    /// close goes on as for any end of input, but the client hears that the stream may
    /// have been cut (by the peer, or by anyone on the path who can send a FIN).
    private func reportTruncation() {
        truncated = true
        report(SocketFailure(word: "tls", message: "SSL: \(SocketConnector.endpoint(host, port)) closed the connection "
            + "without a TLS close_notify: the stream may be truncated"))
    }

    /// Reading or writing failed: `socket.onErr`, then the close.
    private func broke(_ failure: SocketFailure) {
        guard state.isLive else { return }
        report(failure)
        closeStream()
    }

    private func report(_ failure: SocketFailure) {
        failureWord = failure.word
        notify("socket.onErr", ["socket": .string(handle), "error": .string(failure.word), "message": .string(failure.message)])
    }

    /// Closes whatever exists of the stream and, when the socket was live, moves to
    /// Disconnected with `socket.onClose` and one access-log line.
    private func closeStream() {
        connector?.cancel()
        connector = nil
        flushing = false
        flushTimer?.close()
        flushTimer = nil
        if let left = stream?.pendingWriteBytes, left > 0 {
            // Accepted by `write` but never handed to the kernel: not sent.
            bytesOut -= left
            principal.usage.socketBytesSent -= UInt64(left)
        }
        stream?.close()
        stream = nil
        countOutbound()
        inputEnded = true
        readingPaused = false
        guard machine.closed() else { return }
        notify("socket.onClose", ["socket": .string(handle)])
        logFinished()
        env.objectMayHaveSettled()
    }

    private func logFinished() {
        let started = connectAt ?? env.clock.now()
        env.finished(AccessLogEntry(
            principal: principal.name, method: "SOCKET", url: "\(ssl ? "tls" : "tcp")://\(SocketConnector.endpoint(host, port))",
            status: 0, reason: failureWord, bytesIn: bytesIn, bytesOut: bytesOut,
            durationMs: Int((env.clock.now() - started) * 1000), attempts: 1, truncated: truncated, event: "socket closed"))
    }

    private func notify(_ method: String, _ params: JSONValue) {
        touch()
        env.hub.notify(self, method, params)
    }
}
