#if canImport(Glibc)
import Glibc
#endif
import EventLoop
import JSON
import Logging

/// Limits of one connection.
public struct ConnectionLimits: Sendable {
    /// A single incoming message larger than this gets an error and the connection is
    /// closed, before the message is buffered whole.
    public var maxMessageBytes: Int = 16 << 20
    /// Replies queued for a client that does not read: past this the connection is
    /// closed with a log line. It must exceed the largest single reply.
    public var maxOutboundBytes: Int = 64 << 20
    /// Past this many queued bytes the connection stops running calls (the rest of a
    /// read waits too, parsed or not) and stops reading until the client has read its replies: a
    /// pipelining client is slowed, not cut off, and what it costs stays near this.
    public var pauseReadingBytes: Int = 4 << 20

    public init() {}
}

/// One client connection: NDJSON framing over a byte stream (a libuv `Stream`, or TLS
/// on one), the decoder, the out-queue and its limits. Lenient reading (any whitespace-separated JSON values,
/// split anywhere), strict writing (one compact message per line).
public final class RPCConnection: RPCPeer {
    public let id: UInt64
    public let stream: any ByteStream
    public var context: AnyObject?
    /// Called once, when the connection has closed (for whatever reason).
    public var onClose: ((RPCConnection) -> Void)?
    public private(set) var isOpen = true
    public var peerDescription: String

    private let dispatcher: Dispatcher
    private var decoder: JSONStreamDecoder
    private let limits: ConnectionLimits
    private let logger: Logger
    private let coalescer: WriteCoalescer?
    /// Messages encoded while reading a chunk are written in one go at its end; those
    /// sent at other times wait for the coalescer's flush at the end of the loop turn.
    private var outBuffer: [UInt8] = []
    private var collecting = false
    private var flushScheduledThisTurn = false
    private var readingPaused = false
    /// Calls read but not yet run. The calls of one read stop running once the replies
    /// waiting for the client pass `pauseReadingBytes`, and go on when it has read them
    /// (`drained`): so a client that pipelines calls with large replies and does not
    /// read holds the server to about that much, not to all of one read's replies.
    private var backlog: ArraySlice<JSONStreamEvent> = []
    /// The bytes of the last read not yet fed to the decoder. A read is parsed a piece
    /// at a time (`pieceLength`), each piece once the calls of the one before have run:
    /// a 64 KiB read of pipelined calls is about 600 values, whose decoding alone took
    /// several milliseconds of one turn. Reading stays stopped until these are parsed
    /// and their calls run, so they are never more than one read.
    private var unparsed: ArraySlice<UInt8> = []
    /// The backlog waits for the next turn's allowance of calls (`CallAllowance`), not for
    /// the client to read.
    private var waitingForTurn = false
    /// Calls run since the last read or resumption, and whether they came from a read
    /// (`CallAllowance.take`).
    private var slice = 0
    private var reading = false
    private var eofReceived = false
    private var deferredCalls = 0
    /// Set by `holdCalls`: the calls read after the one that set it wait (with reading
    /// stopped) until `releaseCalls`.
    private var callsHeld = false
    public private(set) var bytesIn: UInt64 = 0
    public private(set) var bytesOut: UInt64 = 0

    /// Without a coalescer, messages sent outside of reading are written at once.
    public init(id: UInt64, stream: any ByteStream, dispatcher: Dispatcher, limits: ConnectionLimits, logger: Logger,
                coalescer: WriteCoalescer? = nil) {
        self.id = id
        self.coalescer = coalescer
        self.stream = stream
        self.dispatcher = dispatcher
        self.limits = limits
        self.decoder = JSONStreamDecoder(maxValueBytes: limits.maxMessageBytes, pickCallEnvelopes: true)
        var logger = logger
        logger[metadataKey: "conn"] = "\(id)"
        self.logger = logger
        self.peerDescription = stream.peerDescription
    }

    /// Whether `start()` installed the stream's callbacks.
    private var started = false

    /// Before `start()`: a message larger than `bytes` (and than the connection's own
    /// limit) gets `message_too_large` and the connection is closed, as soon as that
    /// many of its bytes have arrived, until `liftMessageRestriction()`. For a client
    /// that has not proved who it is: it is never parsed into a value larger than this.
    public func restrictMessages(to bytes: Int) {
        precondition(!started, "restrictMessages after start")
        decoder = JSONStreamDecoder(maxValueBytes: min(bytes, limits.maxMessageBytes), pickCallEnvelopes: true)
    }

    /// Messages may have the connection's full limit (`maxMessageBytes`) again, from the
    /// next bytes parsed on.
    public func liftMessageRestriction() {
        decoder.raiseLimit(to: limits.maxMessageBytes)
    }

    /// Starts reading calls.
    public func start() throws {
        started = true
        stream.onWriteError = { [unowned self] error in
            logger.debug("write failed: \(error)")
            close(reason: nil)
        }
        stream.onDrain = { [unowned self] in drained() }
        try stream.startReading(reader)
    }

    /// What the stream's reads go to; installed again when reading resumes after a pause.
    private lazy var reader: (Stream.ReadEvent) -> Void = { [unowned self] event in
        switch event {
        case .data(let bytes): received(bytes)
        case .eof: endOfInput()
        case .error(let e):
            logger.debug("read failed: \(e)")
            close(reason: nil)
        }
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        bytesIn += UInt64(bytes.count)
        slice = 0
        collecting = true
        reading = true
        var rest = bytes
        var bound = Self.firstPieceBytes
        while !rest.isEmpty, backlog.isEmpty, isOpen {
            let piece = Self.pieceLength(rest, bound: bound)
            bound = Self.pieceBytes
            let events = decode(UnsafeRawBufferPointer(rebasing: rest[..<piece]), endsRead: piece == rest.count)
            rest = UnsafeRawBufferPointer(rebasing: rest[piece...])
            handle(events[...])
        }
        if !rest.isEmpty, isOpen {
            // `handle` stopped at a call it could not run yet, and stopped reading.
            unparsed = ArraySlice(rest)
        }
        reading = false
        collecting = false
        flush()
        runBacklog()
    }

    private func endOfInput() {
        eofReceived = true
        stream.stopReading()
        collecting = true
        handle(decoder.finish()[...])
        collecting = false
        flush()
        // A client that shut only its writing side still reads its answers; one that
        // closed both ways reads nothing more, so the connection ends now, and with it
        // what its calls still run (a client that went with fetches in flight had them
        // run on until the first answer failed to be written). A TCP client that closed
        // with a FIN looks half-closed until its socket stops answering keep-alive
        // probes, so the peer is watched until the last answer is written.
        if isOpen, deferredCalls > 0 {
            if stream.peerIsGone { return peerWentAway() }
            stream.watchForPeerGone(every: Self.peerWatchMilliseconds) { [unowned self] in peerWentAway() }
        }
        closeIfFinished()
    }

    /// How often a connection that has its end of input and calls still running looks
    /// whether its client has gone (`ByteStream.watchForPeerGone`).
    static let peerWatchMilliseconds: UInt64 = 1000

    private func peerWentAway() {
        guard isOpen else { return }
        logger.debug("\(peerDescription) went away with \(deferredCalls) calls unanswered")
        close(reason: nil)
    }

    private func handle(_ events: ArraySlice<JSONStreamEvent>) {
        var rest = events
        while let event = rest.first {
            guard isOpen else { return }
            if callsHeld {
                backlog = rest
                pauseReading()
                return
            }
            if outBuffer.count + stream.pendingWriteBytes > limits.pauseReadingBytes {
                backlog = rest
                pauseReading()
                return
            }
            if let allowance = coalescer?.calls, !allowance.take(slice: slice, fresh: slice == 0 && reading) {
                backlog = rest
                pauseReading()
                waitingForTurn = true
                allowance.wait(self)
                return
            }
            rest = rest.dropFirst()
            slice += 1
            switch event {
            case .value(let v):
                dispatcher.dispatch(v, from: self)
            case .call(let envelope):
                dispatcher.dispatch(envelope, from: self)
            case .error(let e):
                dispatcher.parseFailed(e, peer: self)
            case .tooLarge(let limit):
                let err = RPCError.app(.messageTooLarge, "A message exceeded \(limit) bytes; the connection is closed",
                                       ["limit": .int(Int64(limit))])
                send(["jsonrpc": "2.0", "error": err.json, "id": .null])
                logger.notice("closing \(peerDescription): message over \(limit) bytes")
                unparsed = []
                closeAfterFlush()
                return
            }
        }
    }

    /// How many of `bytes` to parse at once: the first `bound` and the rest of the line
    /// they end in, or all of them when there is no newline after that. A piece
    /// ends after a newline, which is never inside a JSON token: a token cut by a piece
    /// would be lexed again from its start with the next (yajl keeps the cut part and
    /// starts over), so a large value (no newline in it) is fed as it was read.
    static func pieceLength(_ bytes: UnsafeRawBufferPointer, bound: Int = pieceBytes) -> Int {
        guard bytes.count > bound, let base = bytes.baseAddress,
              let newline = memchr(base + (bound - 1), 0x0A, bytes.count - (bound - 1))
        else { return bytes.count }
        return base.distance(to: UnsafeRawPointer(newline)) + 1
    }

    /// About 40 `fetch` calls (`inflight` bench) or 60 `server.info` calls: a few turns'
    /// allowance of calls (`CallAllowance.perTurn`). 2 KiB cost pipelined `server.info`
    /// 4% more CPU per call (a read of 64 calls took two pieces and a copy); 4 KiB about
    /// nothing, and the `inflight` ramp's longest turns were no longer than with 2 KiB.
    static let pieceBytes = 4096
    /// The first piece of a read is smaller: enough for the call that runs at once (a
    /// read's first call always does, `CallAllowance.take`) and a few more. When many
    /// connections read in one turn, as the `inflight` ramp's 16 do, the others' calls
    /// wait for later turns anyway, and decoding 4 KiB of each of them made that turn
    /// the ramp's longest (3.2 ms of CPU, a third of it yajl).
    static let firstPieceBytes = 512

    /// Feeds the decoder the next piece of `unparsed`.
    private func parseUnparsed() -> [JSONStreamEvent] {
        let piece = unparsed.withUnsafeBytes { Self.pieceLength($0) }
        let events = unparsed.prefix(piece).withUnsafeBytes { decode($0, endsRead: piece == unparsed.count) }
        unparsed = piece == unparsed.count ? [] : unparsed.dropFirst(piece)
        return events
    }

    /// Feeds the decoder one piece of a read, `endsRead` when it is the read's last.
    /// Over a stream whose reads are whole messages (`ByteStream.deliversMessages`, a
    /// WebSocket's text frames) the end of a read is the end of its message: the decoder
    /// finishes it there, so a value left open is a -32700 of its own and the next
    /// frame starts afresh instead of completing it.
    private func decode(_ piece: UnsafeRawBufferPointer, endsRead: Bool) -> [JSONStreamEvent] {
        let events = decoder.feed(piece)
        guard endsRead, stream.deliversMessages else { return events }
        return events + decoder.finish()
    }

    /// How many bytes of the last read wait to be parsed (for tests).
    var unparsedByteCount: Int { unparsed.count }

    /// Calls read and not yet run, parsed or not.
    private var holdsInput: Bool { !backlog.isEmpty || !unparsed.isEmpty }

    /// Takes the end of input now if the peer has already closed with nothing unread
    /// (`ByteStream.peerHasClosed`), instead of when the loop next reads: exactly what
    /// that read would do, only sooner. Returns whether the connection is closed now (it
    /// stays open while calls it made are still to be answered). The server calls this
    /// before refusing a client for a connection limit, so connections whose clients
    /// have gone are not counted against a live one.
    public func endIfPeerClosed() -> Bool {
        guard isOpen, started, !eofReceived, !holdsInput, stream.peerHasClosed else { return !isOpen }
        endOfInput()
        return !isOpen
    }

    /// Queues one message: compact JSON and a newline.
    public func send(_ message: JSONValue) {
        guard isOpen else { return }
        JSON.encode(message, into: &outBuffer)
        outBuffer.append(UInt8(ascii: "\n"))
        messageQueued()
    }

    /// Queues one message encoded already, and a newline. A large one (a body read in
    /// one call) goes to the stream from its own memory, right after what was queued
    /// before it, instead of being copied into the queue first.
    public func send(encoded message: EncodedJSON) {
        guard isOpen else { return }
        if message.bytes.count >= Self.directWriteBytes {
            flush()
            guard isOpen else { return }
            bytesOut += UInt64(message.bytes.count + 1)
            message.bytes.withUnsafeBytes { stream.writeLine($0) }
            applyOutQueueLimits()
            return
        }
        outBuffer.append(contentsOf: message.bytes)
        outBuffer.append(UInt8(ascii: "\n"))
        messageQueued()
    }

    /// Messages this large are written without the queue: the copy would cost more than
    /// the write call that writing them apart from the messages around them can add.
    static let directWriteBytes = 64 << 10

    /// Writes what is queued now, or at the end of the read or of the loop turn.
    private func messageQueued() {
        guard !collecting else { return }
        if let coalescer {
            if !flushScheduledThisTurn {
                flushScheduledThisTurn = true
                coalescer.schedule(self)
            }
        } else {
            flush()
        }
    }

    /// The coalescer's turn-end flush.
    func flushScheduled() {
        flushScheduledThisTurn = false
        flush()
    }

    private func flush() {
        guard isOpen, !outBuffer.isEmpty else { return }
        bytesOut += UInt64(outBuffer.count)
        stream.write(outBuffer)
        outBuffer.removeAll(keepingCapacity: outBuffer.capacity <= 1 << 20)
        applyOutQueueLimits()
    }

    /// After a write: closes the connection past `maxOutboundBytes`, stops reading past
    /// `pauseReadingBytes`.
    private func applyOutQueueLimits() {
        guard admits(replyBytes: 0) else { return }
        if stream.pendingWriteBytes > limits.pauseReadingBytes { pauseReading() }
    }

    /// Closes the connection when what is queued for it and `bytes` more would pass
    /// `maxOutboundBytes`.
    public func admits(replyBytes bytes: Int) -> Bool {
        let queued = stream.pendingWriteBytes + outBuffer.count + bytes
        guard queued > limits.maxOutboundBytes else { return isOpen }
        close(reason: "client is not reading: \(queued) bytes queued, limit \(limits.maxOutboundBytes)")
        return false
    }

    private func pauseReading() {
        if !readingPaused, !eofReceived {
            readingPaused = true
            stream.stopReading()
        }
    }

    /// The allowance of calls was renewed: go on with the backlog, or, while replies
    /// still wait for the client, let `drained` go on once it has read them.
    func resumeCalls() {
        waitingForTurn = false
        slice = 0
        if isOpen, stream.pendingWriteBytes == 0 { drained() }
    }

    /// Runs the calls held back (`backlog`, then the next piece of `unparsed`) while
    /// their replies go straight to the kernel; stops once some wait, for `drained` to
    /// call it again, or once the turn's allowance of calls is spent, for `resumeCalls`.
    private func runBacklog() {
        while holdsInput, isOpen, !waitingForTurn, !callsHeld, stream.pendingWriteBytes == 0 {
            collecting = true
            repeat {
                let events = backlog.isEmpty ? parseUnparsed()[...] : backlog
                backlog = []
                handle(events)
            } while backlog.isEmpty && !unparsed.isEmpty && isOpen && !callsHeld
            collecting = false
            flush()
        }
    }

    private func drained() {
        if holdsInput, isOpen {
            runBacklog()
            guard !holdsInput else { return }
            if eofReceived { closeIfFinished() }
        }
        if readingPaused, isOpen, !eofReceived, !callsHeld {
            readingPaused = false
            do { try stream.startReading(reader) } catch { close(reason: "cannot resume reading: \(error)") }
        }
        if closingAfterFlush { close(reason: nil) }
    }

    public func deferredCallStarted() { deferredCalls += 1 }

    /// The calls read after the one running now wait, unrun, and reading stops, until
    /// `releaseCalls()`: for a call whose answer decides how the next ones are judged (an
    /// `auth` whose answer waits for a failure delay). The members of a batch are one
    /// message and run together all the same.
    public func holdCalls() { callsHeld = true }

    /// The calls held by `holdCalls()` go on, in order, once the replies before them are
    /// written.
    public func releaseCalls() {
        guard callsHeld else { return }
        callsHeld = false
        if isOpen, stream.pendingWriteBytes == 0 { drained() }
    }

    public func deferredCallEnded() {
        deferredCalls -= 1
        closeIfFinished()
    }

    /// A client that sent EOF still gets every reply; the connection ends when the last
    /// call it made has been answered and written.
    private func closeIfFinished() {
        if eofReceived, deferredCalls == 0, !holdsInput { closeAfterFlush() }
    }

    private var closingAfterFlush = false

    /// Writes what is queued as far as the stream takes it now, then closes whatever is
    /// left: for a connection whose time is up whether or not its client reads, which
    /// `closeAfterFlush` would wait for. A reason is logged at notice level.
    public func closeNow(reason: String?) {
        flush()
        close(reason: reason)
    }

    /// Stops reading and closes once everything queued has been written.
    public func closeAfterFlush() {
        guard isOpen else { return }
        stream.stopReading()
        flush()
        if stream.pendingWriteBytes == 0 { close(reason: nil); return }
        closingAfterFlush = true
        if !started {
            // A connection refused before `start()` (too many connections) never got
            // the stream's callbacks, and over TLS its error waits for the handshake:
            // these see the flush end (and keep the connection alive until then, for a
            // caller that does not hold it); closing the stream drops them.
            stream.onDrain = { self.drained() }
            stream.onWriteError = { _ in self.close(reason: nil) }
        }
    }

    /// Closes now, discarding what is queued. A reason is logged at notice level.
    public func close(reason: String?) {
        guard isOpen else { return }
        isOpen = false
        if let reason { logger.notice("closing \(peerDescription): \(reason)") }
        stream.onDrain = nil
        stream.onWriteError = nil
        stream.close()
        let done = onClose
        onClose = nil
        done?(self)
    }
}
