import CUV
import CWslay
import EventLoop
import SecureStream

/// A WebSocket server connection (RFC 6455) over another `ByteStream` — a plain TCP
/// `Stream` for `ws:`, a `TLSStream` for `wss:` — offering the bytes of JSON-RPC
/// messages with `ByteStream`'s contract, so `RPCConnection` runs over it unchanged.
///
/// - The upgrade: the request head (at most `Settings.headLimit` bytes) is read and
///   judged by `WebSocketHandshake`; a refusal is answered with its HTTP status, and the
///   stream then waits a moment for the client to go before it ends with `.error` (to an
///   owner that is not reading, through `onWriteError`).
///   The head must arrive within `Settings.handshakeTimeout` ms.
/// - Frames are wslay's business (its event API, fed from the loop): fragments are
///   reassembled, pings answered, a close frame answered. Each text message reaches the
///   owner as one read, its payload followed by "\n", and the owner decodes each alone
///   (`deliversMessages`): a frame holding incomplete JSON is a parse error of its own,
///   never joined to the next frame. A binary message closes with 1003, a message over
///   `Settings.maxMessageBytes` with 1009 (wslay counts the reassembled message). Once
///   a close frame was received or sent, input ends with `.eof`.
/// - Writes: the owner writes messages each ending in "\n" (`RPCConnection` does); each
///   line goes out as one text frame, and a partial line is held until its newline.
///   Writes before the upgrade has finished are held. `pendingWriteBytes` counts what is
///   held, what wslay has queued, and what the transport has not handed to the kernel.
/// - Close: sends a close frame (1000) if none was sent, then waits up to
///   `lingerTimeout` ms for the peer to close its end, reading and dropping what it
///   sends, so that the close frame is not lost to a reset; `completion` runs when the
///   transport has closed.
///
/// Lifetime: the transport's callbacks and the timer's hold the stream while it is open,
/// so whoever receives one must eventually `close()` it. Confined to the loop's thread.
public final class WebSocketStream: ByteStream {
    /// The limits and the origin allowlist of a listener.
    public struct Settings: Sendable {
        /// Origins a browser's request may carry (`--ws-origin`).
        public var allowedOrigins: [String]
        /// The largest reassembled message accepted (`--max-message-bytes`).
        public var maxMessageBytes: Int
        /// Milliseconds from accept until the upgrade request must be complete.
        public var handshakeTimeout: UInt64
        /// The largest upgrade request head.
        public var headLimit: Int = 8192

        public init(allowedOrigins: [String], maxMessageBytes: Int, handshakeTimeout: UInt64) {
            self.allowedOrigins = allowedOrigins
            self.maxMessageBytes = maxMessageBytes
            self.handshakeTimeout = handshakeTimeout
        }
    }

    /// How long a closing stream waits for the peer to close after a close frame, in ms.
    public static let lingerTimeout: UInt64 = 1_000

    private enum Phase {
        /// Reading the upgrade request.
        case handshake
        /// Frames flow.
        case open
        /// The upgrade was refused; the answer is going out.
        case refused(UVError)
    }

    private enum InputEnd {
        case eof
        case error(UVError)
    }

    private let transport: any ByteStream
    private let settings: Settings
    /// The upgrade deadline; then the delivery of input buffered while the owner was not
    /// reading; at the end the linger after a close frame.
    private let timer: EventLoop.Timer
    private var context: wslay_event_context_ptr?
    /// Whether input waits for the output to drain (`holdInputForOutput`).
    private var inputHeldForOutput = false
    /// wslay keeps a copy, but it stays allocated for the context's life all the same.
    private let callbacks: UnsafeMutablePointer<wslay_event_callbacks>

    private var phase = Phase.handshake
    private var head: [UInt8] = []
    /// Bytes read from the transport and not yet taken by wslay.
    private var inbound: [UInt8] = []
    private var inboundOffset = 0
    /// Complete text messages, each with its "\n", waiting for the owner.
    private var ready: [[UInt8]] = []
    private var onRead: ((EventLoop.Stream.ReadEvent) -> Void)?
    private var ownerReading = false
    private var inputEnd: InputEnd?
    private var inputFinished = false
    private var writeFailure: UVError?
    /// Written before the upgrade finished.
    private var early: [UInt8] = []
    /// Messages, one per line; keeps the start of one whose newline has not been
    /// written yet.
    private var lines = LineSplitter()
    private var drainOwed = false
    /// True while wslay is on the stack: nothing may call into it again then.
    private var insideWslay = false
    private var closeCompletion: (() -> Void)?

    /// See `ByteStream.onDrain`.
    public var onDrain: (() -> Void)?
    /// See `ByteStream.onWriteError`.
    public var onWriteError: ((UVError) -> Void)?
    /// Whether `close()` was called, or the stream closed itself.
    public private(set) var isClosed = false

    /// Wraps an accepted `transport` on `loop` and starts reading the upgrade request.
    /// `alreadyRead` is what another reader took from the transport before handing it
    /// over (the operations listener's `/rpc`: the request head, and anything after it);
    /// it is judged as if it had just arrived. Throws when libuv or wslay refuse; the
    /// transport is then left for the caller to close.
    public init(wrapping transport: any ByteStream, loop: Loop, settings: Settings, alreadyRead: [UInt8] = []) throws {
        self.transport = transport
        self.settings = settings
        callbacks = .allocate(capacity: 1)
        callbacks.initialize(to: WebSocketStream.wslayCallbacks)
        timer = try EventLoop.Timer(loop: loop)
        // The user data is unretained: wslay calls back only from inside
        // `wslay_event_recv`/`wslay_event_send`, which only this object calls.
        let rc = wslay_event_context_server_init(&context, callbacks, Unmanaged.passUnretained(self).toOpaque())
        guard rc == 0, let context else {
            timer.close()
            callbacks.deallocate()
            throw UVError(UV_ENOMEM.rawValue, "wslay_event_context_server_init")
        }
        wslay_event_config_set_max_recv_msg_length(context, UInt64(max(settings.maxMessageBytes, 1)))
        do {
            try transport.startReading { [self] event in transportRead(event) }
        } catch {
            timer.close()
            throw error
        }
        transport.onDrain = { [self] in
            checkDrained()
            releaseHeldInput()
        }
        transport.onWriteError = { [self] error in writeFailed(error) }
        timer.start(timeout: settings.handshakeTimeout) { [self] in handshakeTimedOut() }
        if !alreadyRead.isEmpty {
            head = alreadyRead
            upgradeRequestRead()
        }
    }

    /// Sets the largest reassembled message from now on (a larger one closes with
    /// 1009 as soon as wslay has counted past it): the server lowers it for a client
    /// that has not authenticated and raises it again after, so wslay never buffers
    /// more of an unauthenticated client's message than the server would parse.
    public func limitMessages(to bytes: Int) {
        guard let context else { return }
        wslay_event_config_set_max_recv_msg_length(context, UInt64(max(bytes, 1)))
    }

    deinit {
        if let context { wslay_event_context_free(context) }
        callbacks.deallocate()
    }

    // MARK: wslay's callbacks

    /// No captures: each finds its stream through wslay's user data.
    private static let wslayCallbacks = wslay_event_callbacks(
        recv_callback: { _, buffer, length, _, user in
            Unmanaged<WebSocketStream>.fromOpaque(user!).takeUnretainedValue().wslayWantsInput(buffer, length)
        },
        send_callback: { _, data, length, _, user in
            Unmanaged<WebSocketStream>.fromOpaque(user!).takeUnretainedValue().wslaySends(data, length)
        },
        genmask_callback: nil,
        on_frame_recv_start_callback: nil,
        on_frame_recv_chunk_callback: nil,
        on_frame_recv_end_callback: nil,
        on_msg_recv_callback: { _, arg, user in
            guard let arg else { return }
            Unmanaged<WebSocketStream>.fromOpaque(user!).takeUnretainedValue().wslayReceived(arg.pointee)
        })

    private func wslayWantsInput(_ buffer: UnsafeMutablePointer<UInt8>?, _ length: Int) -> Int {
        let available = inbound.count - inboundOffset
        guard available > 0, let buffer else {
            wslay_event_set_error(context, Int32(WSLAY_ERR_WOULDBLOCK.rawValue))
            return -1
        }
        let n = min(available, length)
        inbound.withUnsafeBufferPointer { b in
            buffer.update(from: b.baseAddress! + inboundOffset, count: n)
        }
        inboundOffset += n
        if inboundOffset == inbound.count {
            inbound.removeAll(keepingCapacity: true)
            inboundOffset = 0
        }
        return n
    }

    /// The transport takes everything (it queues what the kernel does not take).
    private func wslaySends(_ data: UnsafePointer<UInt8>?, _ length: Int) -> Int {
        guard writeFailure == nil, !isClosed || closeCompletion != nil else {
            wslay_event_set_error(context, Int32(WSLAY_ERR_CALLBACK_FAILURE.rawValue))
            return -1
        }
        transport.write(UnsafeRawBufferPointer(start: data, count: length))
        return length
    }

    private func wslayReceived(_ message: wslay_event_on_msg_recv_arg) {
        switch UInt32(message.opcode) {
        case WSLAY_TEXT_FRAME.rawValue:
            var bytes = Array(UnsafeBufferPointer(start: message.msg, count: message.msg_length))
            bytes.append(UInt8(ascii: "\n"))
            ready.append(bytes)
        case WSLAY_BINARY_FRAME.rawValue:
            let reason = Array("binary frames are not accepted: send JSON-RPC in text frames".utf8)
            _ = wslay_event_queue_close(context, UInt16(WSLAY_CODE_UNSUPPORTED_DATA.rawValue), reason, reason.count)
            wslay_event_shutdown_read(context)
        default:
            // Close, ping and pong: wslay answers them itself.
            break
        }
    }

    // MARK: Reading

    /// Each read is one text message (its payload and a "\n"), never part of one or
    /// two: see `ByteStream.deliversMessages`.
    public var deliversMessages: Bool { true }

    /// See `ByteStream.startReading`. Input that arrived while the owner was not reading
    /// is delivered from the loop, never inside this call.
    public func startReading(_ onRead: @escaping (EventLoop.Stream.ReadEvent) -> Void) throws {
        guard !isClosed else { throw UVError(UV_EBADF.rawValue, "WebSocket read on a closed stream") }
        self.onRead = onRead
        ownerReading = true
        guard case .open = phase, !inputFinished else { return }
        if inputEnd == nil, !inputHeldForOutput {
            try transport.startReading { [self] event in transportRead(event) }
        }
        timer.start(timeout: 0) { [self] in pump() }
    }

    /// See `ByteStream.stopReading`. Once open, the transport stops being read too.
    public func stopReading() {
        guard !isClosed else { return }
        ownerReading = false
        onRead = nil
        if case .open = phase { transport.stopReading() }
    }

    private func transportRead(_ event: EventLoop.Stream.ReadEvent) {
        if isClosed {
            // Lingering after the close frame: the peer's last bytes are dropped.
            if case .data = event { return }
            finishClose()
            return
        }
        switch phase {
        case .handshake:
            switch event {
            case .data(let bytes):
                head.append(contentsOf: bytes)
                upgradeRequestRead()
            case .eof:
                handshakeFailed(UVError(UV_EPROTO.rawValue, "WebSocket: the peer closed before its upgrade request was complete"))
            case .error(let error):
                handshakeFailed(error)
            }
        case .open:
            switch event {
            case .data(let bytes): inbound.append(contentsOf: bytes)
            case .eof: inputEnd = .eof
            case .error(let error): inputEnd = .error(error)
            }
            pump()
        case .refused(let why):
            // Waiting for the refused client to go; its bytes are dropped.
            if case .data = event { return }
            refusalDone(why)
        }
    }

    /// Judges the head once it is complete (or too large, or not HTTP).
    private func upgradeRequestRead() {
        switch HTTPRequestHead.parse(head, limit: settings.headLimit) {
        case .needMore:
            return
        case .tooLarge:
            refuse(431, "the upgrade request head is larger than \(settings.headLimit) bytes")
        case .malformed:
            refuse(400, "not an HTTP/1.1 upgrade request")
        case .complete(let request):
            switch WebSocketHandshake.evaluate(request, allowedOrigins: settings.allowedOrigins) {
            case .refuse(let status, let message):
                refuse(status, message)
            case .accept(let response):
                let end = HTTPRequestHead.endOfHead(head) ?? head.count
                inbound = Array(head[end...])
                head = []
                upgraded(response)
            }
        }
    }

    private func upgraded(_ response: [UInt8]) {
        phase = .open
        timer.stop()
        transport.write(response)
        if !early.isEmpty {
            let held = early
            early = []
            held.withUnsafeBytes { frameLines($0) }
        }
        if !ownerReading { transport.stopReading() }
        pump()
        checkDrained()
    }

    /// No more input is fed to wslay while this much waits to be sent. wslay answers each
    /// ping it reads with a pong of the same payload, so a peer that pings and never
    /// reads would otherwise grow the queue without bound, below the owner's back-pressure
    /// (which sees messages, not control frames). 1 MiB: well above one reply line's
    /// worth, which the owner's own limits bound.
    static let heldOutputLimit = 1 << 20

    /// Stops reading the transport until what waits to be sent has drained
    /// (`releaseHeldInput`, from the transport's `onDrain`).
    private func holdInputForOutput() {
        inputHeldForOutput = true
        transport.stopReading()
    }

    /// Reads again, once the output that held the input back has gone.
    private func releaseHeldInput() {
        guard inputHeldForOutput, !isClosed, pendingWriteBytes < Self.heldOutputLimit else { return }
        inputHeldForOutput = false
        guard case .open = phase, ownerReading, !inputFinished else { return }
        if inputEnd == nil {
            do {
                try transport.startReading { [self] event in transportRead(event) }
            } catch {
                return finishInput(.error(error as? UVError ?? UVError(UV_EIO.rawValue, "WebSocket: \(error)")))
            }
        }
        pump()
    }

    /// Feeds wslay what was read and hands complete messages to the owner while it reads;
    /// then, with nothing left, the end of input if it came.
    private func pump() {
        guard case .open = phase, let context else { return }
        while !isClosed, ownerReading, !inputFinished {
            if !ready.isEmpty {
                let message = ready.removeFirst()
                message.withUnsafeBytes { onRead?(.data($0)) }
                continue
            }
            if inbound.count > inboundOffset, wslay_event_get_read_enabled(context) != 0 {
                if pendingWriteBytes >= Self.heldOutputLimit {
                    holdInputForOutput()
                    return
                }
                insideWslay = true
                let rc = wslay_event_recv(context)
                insideWslay = false
                sendQueued()
                if rc != 0 {
                    finishInput(.error(UVError(UV_EPROTO.rawValue, "WebSocket: wslay_event_recv failed (\(rc))")))
                    return
                }
                continue
            }
            if wslay_event_get_read_enabled(context) == 0 {
                // A close frame came, or we failed the connection (1003, 1009, a
                // protocol error): no more messages.
                inbound = []
                inboundOffset = 0
                finishInput(.eof)
            } else if let end = inputEnd {
                switch end {
                case .eof: finishInput(.eof)
                case .error(let error): finishInput(.error(error))
                }
            }
            return
        }
    }

    private func finishInput(_ event: EventLoop.Stream.ReadEvent) {
        let owner = onRead
        onRead = nil
        ownerReading = false
        inputFinished = true
        transport.stopReading()
        owner?(event)
    }

    // MARK: The upgrade's failures

    private func handshakeTimedOut() {
        guard case .handshake = phase else { return }
        if head.isEmpty {
            handshakeFailed(UVError(UV_ETIMEDOUT.rawValue, "WebSocket: no upgrade request within \(settings.handshakeTimeout) ms"))
        } else {
            refuse(408, "the upgrade request did not arrive within \(settings.handshakeTimeout) ms")
        }
    }

    /// Answers `status` and waits (up to the linger time) for the client to close.
    private func refuse(_ status: Int, _ message: String) {
        let why = UVError(UV_EPROTO.rawValue, "WebSocket upgrade refused with \(status): \(message) (peer \(peerDescription))")
        phase = .refused(why)
        early = []
        head = []
        transport.write(WebSocketHandshake.refusalResponse(status: status, message: message))
        timer.start(timeout: Self.lingerTimeout) { [self] in refusalDone(why) }
    }

    private func refusalDone(_ why: UVError) {
        guard !isClosed else { return }
        handshakeFailed(why)
    }

    /// Closes, then tells the owner why, so it forgets the connection whether or not it
    /// reads: as `.error` while it reads, through `onWriteError` when it does not (as
    /// `TLSStream.handshakeFailed` does, and for the same reason).
    private func handshakeFailed(_ error: UVError) {
        let owner = ownerReading ? onRead : nil
        let writer = ownerReading ? nil : onWriteError
        closeNow(nil)
        owner?(.error(error))
        writer?(error)
    }

    // MARK: Writing

    /// See `ByteStream.write`. Each complete line becomes one text frame.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed, writeFailure == nil, bytes.count > 0 else { return }
        switch phase {
        case .handshake: early.append(contentsOf: bytes)
        case .open: frameLines(bytes)
        case .refused: return
        }
        if !isClosed, pendingWriteBytes > 0 { drainOwed = true }
    }

    /// See `ByteStream.writeLine`. A whole line (a large reply, `RPCConnection`) is one
    /// text frame at once, unless the start of a line is still held, which it then ends.
    public func writeLine(_ bytes: UnsafeRawBufferPointer) {
        guard case .open = phase, lines.partial.isEmpty else {
            write(bytes)
            withUnsafeBytes(of: UInt8(ascii: "\n")) { write($0) }
            return
        }
        guard !isClosed, writeFailure == nil else { return }
        queueMessage(bytes)
        sendQueued()
        if !isClosed, pendingWriteBytes > 0 { drainOwed = true }
    }

    private func frameLines(_ bytes: UnsafeRawBufferPointer) {
        lines.split(bytes) { line in queueMessage(line) }
        sendQueued()
    }

    /// Queues one line as a text frame; an empty line is none.
    private func queueMessage(_ line: UnsafeRawBufferPointer) {
        guard let context, !line.isEmpty else { return }
        // wslay copies the message. Refused once a close frame was queued: what
        // follows is dropped.
        var message = wslay_event_msg(opcode: UInt8(WSLAY_TEXT_FRAME.rawValue),
                                      msg: line.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                      msg_length: line.count)
        _ = wslay_event_queue_msg(context, &message)
    }

    /// Hands wslay's queued frames to the transport.
    private func sendQueued() {
        guard let context, !insideWslay, writeFailure == nil, wslay_event_want_write(context) != 0 else { return }
        insideWslay = true
        let rc = wslay_event_send(context)
        insideWslay = false
        if rc != 0 { writeFailed(UVError(UV_EPIPE.rawValue, "WebSocket: wslay_event_send failed (\(rc))")) }
    }

    /// See `ByteStream.pendingWriteBytes`.
    public var pendingWriteBytes: Int {
        guard !isClosed, writeFailure == nil else { return 0 }
        let queued = context.map { wslay_event_get_queued_msg_length($0) } ?? 0
        return early.count + lines.partial.count + queued + transport.pendingWriteBytes
    }

    private func checkDrained() {
        guard drainOwed, pendingWriteBytes == 0, !isClosed else { return }
        drainOwed = false
        onDrain?()
    }

    private func writeFailed(_ error: UVError) {
        guard writeFailure == nil, !isClosed else { return }
        writeFailure = error
        early = []
        lines.reset()
        onWriteError?(error)
    }

    // MARK: Closing and details

    /// See `ByteStream.close`. Sends a close frame (1000) when none was sent, then
    /// lingers until the peer closes or `lingerTimeout` passes.
    public func close(_ completion: (() -> Void)?) {
        guard !isClosed else { return }
        guard case .open = phase, let context, writeFailure == nil, !insideWslay else {
            closeNow(completion)
            return
        }
        if wslay_event_get_close_sent(context) == 0 {
            _ = wslay_event_queue_close(context, UInt16(WSLAY_CODE_NORMAL_CLOSURE.rawValue), nil, 0)
        }
        closeCompletion = completion ?? {}
        sendQueued()
        markClosed()
        // The peer has already closed (or will not): no reason to wait.
        if case .eof? = inputEnd { return finishClose() }
        if case .error? = inputEnd { return finishClose() }
        if writeFailure != nil { return finishClose() }
        do {
            try transport.startReading { [self] event in transportRead(event) }
        } catch {
            return finishClose()
        }
        timer.start(timeout: Self.lingerTimeout) { [self] in finishClose() }
    }

    /// Ends the linger: the transport closes.
    private func finishClose() {
        guard let completion = closeCompletion else { return }
        closeCompletion = nil
        timer.close()
        transport.close(completion)
    }

    /// Closed for the owner: nothing more is delivered or accepted.
    private func markClosed() {
        isClosed = true
        onRead = nil
        onDrain = nil
        onWriteError = nil
        early = []
        lines.reset()
    }

    private func closeNow(_ completion: (() -> Void)?) {
        guard !isClosed else { return }
        markClosed()
        timer.close()
        transport.close(completion)
    }

    /// Whether the transport is TLS (a `wss:` listener's).
    public var overTLS: Bool { transport is TLSStream }

    /// The transport's peer, as `Stream.peerDescription` gives it.
    public var peerDescription: String { transport.peerDescription }
    public var isTCP: Bool { transport.isTCP }
    public var peerUID: UInt32? { transport.peerUID }
    public var peerHasClosed: Bool { transport.peerHasClosed }
    public var peerIsGone: Bool { transport.peerIsGone }

    /// The socket's peer, watched the same way.
    public func watchForPeerGone(every interval: UInt64, _ onGone: @escaping () -> Void) {
        transport.watchForPeerGone(every: interval, onGone)
    }
}
