import CUV
import EventLoop

/// TLS over a connected `Stream`, done inside the loop: ciphertext read from the socket
/// goes into OpenSSL through a memory buffer (`TLSSession`), plaintext comes out to the
/// owner's read callback; plaintext written is encrypted into another memory buffer whose
/// bytes are written to the socket. Nothing blocks and OpenSSL never touches the socket.
///
/// It is a `ByteStream` with `Stream`'s contract, so a client connection runs over it
/// unchanged:
/// - Reads: `.data` with decrypted bytes (in a buffer reused by the next read, as with
///   `Stream`), then `.eof` when the peer sent close_notify or closed its socket, or
///   `.error` when TLS or the socket failed. A socket closed without close_notify is
///   still `.eof` (a client of the listener that just closes is no failure), but sets
///   `inputTruncated`: an owner for whom the end of the stream means something (a raw
///   socket's reader) learns that an attacker on the path could have cut it there. A record split across socket reads at any
///   byte simply waits for the rest.
/// - Writes: accepted at any time, also before the handshake has finished (they are
///   held and encrypted when it does). `pendingWriteBytes` counts the plaintext held
///   plus the ciphertext not yet handed to the kernel, and `onDrain` fires when both are
///   gone, so the owner's back-pressure works as on a plain stream.
/// - Close: sends close_notify when the handshake had finished and writing still works,
///   then closes the socket (what the kernel has not taken is discarded, as with
///   `Stream.close`; after a flush, that is nothing).
///
/// The handshake starts at once, whether or not the owner reads, and must finish within
/// `handshakeTimeout` ms: a peer that connects and sends nothing, too little or garbage
/// does not hold a connection slot. When the handshake fails or times out, the stream
/// closes itself and hands the owner the error (EPROTO or ETIMEDOUT, with OpenSSL's
/// reason): as `.error` if it is reading, through `onWriteError` if it is not, so an
/// owner that stopped reading hears of the end all the same.
///
/// Lifetime: like `Stream`, it keeps itself alive while open (the socket's callbacks and
/// the timer's hold it), so whoever receives one must eventually `close()` it.
///
/// Confined to the loop's thread. All streams of one `TLSContext` share its scratch
/// buffers: each use fills one and hands it over before anything else can run on the
/// thread (a read callback gets the plaintext buffer, and nothing it can do reads into
/// that buffer again before it returns, since reads only start from the loop).
public final class TLSStream: ByteStream {
    /// How long a handshake may take by default: ten seconds.
    public static let defaultHandshakeTimeout: UInt64 = 10_000

    /// How the socket's input ended.
    private enum InputEnd {
        case eof
        case error(UVError)
    }

    private let transport: EventLoop.Stream
    private let context: TLSContext
    private let session: TLSSession
    /// The handshake deadline; once the handshake is done, it schedules the delivery of
    /// input that was buffered while the owner was not reading.
    private let timer: EventLoop.Timer
    private let handshakeTimeout: UInt64

    private var onRead: ((EventLoop.Stream.ReadEvent) -> Void)?
    private var onHandshake: ((UVError?) -> Void)?

    /// See `ByteStream.onDrain`.
    public var onDrain: (() -> Void)?

    /// See `ByteStream.onWriteError`.
    public var onWriteError: ((UVError) -> Void)?

    /// Whether `close()` was called (or the stream closed itself after a failed handshake).
    public private(set) var isClosed = false
    /// Whether the handshake has finished; plaintext flows only from then on.
    public private(set) var handshakeDone = false
    private var ownerReading = false
    /// Set when the socket reported EOF or an error; decrypted bytes still waiting are
    /// delivered before it.
    private var inputEnd: InputEnd?
    /// Set once `.eof` or `.error` was delivered to the owner: nothing more comes.
    private var inputFinished = false
    /// The `.eof` delivered came from the socket closing with no close_notify before it
    /// (RFC 8446 §6.1): nothing proves the peer's stream ended there.
    public private(set) var inputTruncated = false
    private var writeFailure: UVError?
    /// Plaintext written before the handshake finished, encrypted when it does.
    private var early: [UInt8] = []
    /// Whether `pendingWriteBytes` has been above 0 since `onDrain` last ran.
    private var drainOwed = false

    /// Wraps an accepted (server context) or connected (client context) `transport` and
    /// starts the handshake. `serverName` is what a client verifies the certificate
    /// against. Throws `TLSError` or `UVError` when OpenSSL or libuv refuse; the
    /// transport is then left as it was, for the caller to close.
    /// `verifyPeer` and `verifyHost` switch a client's checks off (`TLSSession`).
    /// `onHandshake` runs once when the handshake has finished (nil) or failed (why),
    /// before any read event.
    public init(wrapping transport: EventLoop.Stream, context: TLSContext, serverName: String? = nil,
                verifyPeer: Bool = true, verifyHost: Bool = true,
                handshakeTimeout: UInt64 = TLSStream.defaultHandshakeTimeout,
                onHandshake: ((UVError?) -> Void)? = nil) throws {
        self.transport = transport
        self.context = context
        self.handshakeTimeout = handshakeTimeout
        self.onHandshake = onHandshake
        session = try TLSSession(context: context, serverName: serverName, verifyPeer: verifyPeer, verifyHost: verifyHost)
        timer = try EventLoop.Timer(loop: transport.loop)
        do {
            try transport.startReading { [self] event in transportRead(event) }
        } catch {
            timer.close()
            throw error
        }
        transport.onDrain = { [self] in checkDrained() }
        transport.onWriteError = { [self] error in writeFailed(error) }
        timer.start(timeout: handshakeTimeout) { [self] in handshakeTimedOut() }
        // A client speaks first; a server waits for the ClientHello.
        if context.role == .client { advanceHandshake() }
    }

    // MARK: Reading

    /// See `ByteStream.startReading`. Input that arrived while the owner was not reading
    /// is delivered from the loop, never inside this call.
    public func startReading(_ onRead: @escaping (EventLoop.Stream.ReadEvent) -> Void) throws {
        guard !isClosed else { throw UVError(UV_EBADF.rawValue, "TLS read on a closed stream") }
        self.onRead = onRead
        ownerReading = true
        // During the handshake the socket is read anyway; after the end nothing comes.
        guard handshakeDone, !inputFinished else { return }
        if inputEnd == nil {
            do {
                try transport.startReading { [self] event in transportRead(event) }
            } catch {
                self.onRead = nil
                ownerReading = false
                throw error
            }
        }
        if session.hasBufferedInput || inputEnd != nil {
            timer.start(timeout: 0) { [self] in deliver() }
        }
    }

    /// See `ByteStream.stopReading`. After the handshake this also stops reading the
    /// socket, so a paused owner leaves the peer's bytes in the kernel.
    public func stopReading() {
        guard !isClosed else { return }
        ownerReading = false
        onRead = nil
        if handshakeDone { transport.stopReading() }
    }

    private func transportRead(_ event: EventLoop.Stream.ReadEvent) {
        switch event {
        case .data(let bytes): session.receive(bytes)
        case .eof: inputEnd = .eof
        case .error(let error): inputEnd = .error(error)
        }
        if handshakeDone { deliver() } else { advanceHandshake() }
    }

    /// The most plaintext bytes one read delivers (`ByteStream.maxReadBytes`); what a
    /// record holds beyond it stays in OpenSSL's buffer for the next read.
    public var maxReadBytes = Int.max

    /// Decrypts and delivers while the owner reads, then the end of input if it came.
    private func deliver() {
        while ownerReading, !isClosed, !inputFinished {
            // Sized on each turn: the owner may change it from its read callback.
            let buffer = UnsafeMutableRawBufferPointer(start: context.plaintextScratch,
                                                       count: max(1, min(TLSContext.scratchSize, maxReadBytes)))
            let result = session.read(into: buffer)
            // Reading may produce output (an alert, a key update's answer).
            flushCiphertext()
            guard !isClosed else { return }
            switch result {
            case .data(let count):
                onRead?(.data(UnsafeRawBufferPointer(rebasing: buffer[..<count])))
            case .none(.needsInput):
                switch inputEnd {
                case nil: return
                case .eof?:
                    inputTruncated = true
                    finishInput(.eof)
                case .error(let error)?: finishInput(.error(error))
                }
            case .none(.closedByPeer):
                finishInput(.eof)
            case .none(.failed(let reason)):
                finishInput(.error(UVError(UV_EPROTO.rawValue, reason)))
            }
        }
    }

    /// Hands the owner its last read event; reading stops for good.
    private func finishInput(_ event: EventLoop.Stream.ReadEvent) {
        let owner = onRead
        onRead = nil
        ownerReading = false
        inputFinished = true
        transport.stopReading()
        owner?(event)
    }

    // MARK: Handshake

    private func advanceHandshake() {
        let outcome = session.handshake()
        // The next flight, or the alert that tells the peer why it failed.
        flushCiphertext()
        guard !isClosed else { return }
        switch outcome {
        case nil:
            handshakeFinished()
        case .needsInput?:
            switch inputEnd {
            case nil: break
            case .eof?: handshakeFailed(UV_EPROTO.rawValue, "TLS handshake: the peer closed the connection before it finished")
            case .error(let error)?: handshakeFailed(error.code, "TLS handshake: \(error)")
            }
        case .closedByPeer?:
            handshakeFailed(UV_EPROTO.rawValue, "TLS handshake: the peer closed the connection before it finished")
        case .failed(let reason)?:
            handshakeFailed(UV_EPROTO.rawValue, reason)
        }
    }

    private func handshakeFinished() {
        handshakeDone = true
        timer.stop()
        if !early.isEmpty {
            let held = early
            early = []
            held.withUnsafeBytes { encrypt($0) }
            guard !isClosed else { return }
            checkDrained()
        }
        if ownerReading {
            deliver()
        } else if inputEnd == nil {
            transport.stopReading()
        }
        // Last, so that an owner who starts reading from here finds the socket settled.
        if let told = onHandshake, !isClosed {
            onHandshake = nil
            told(nil)
        }
    }

    private func handshakeTimedOut() {
        guard !handshakeDone else { return }
        handshakeFailed(UV_ETIMEDOUT.rawValue, "TLS handshake did not finish within \(handshakeTimeout) ms")
    }

    /// Closes, then tells the owner why, so it forgets the connection whether or not it
    /// reads: a reading owner through its read callback, one that is not reading (it
    /// paused, or it waits for a flush before closing) through `onWriteError`, since
    /// nothing it wrote can go out now. Told neither, an owner that stopped reading
    /// would wait for a drain that never comes, and hold its connection slot for ever.
    private func handshakeFailed(_ code: Int32, _ reason: String) {
        let owner = ownerReading ? onRead : nil
        let writer = ownerReading ? nil : onWriteError
        let told = onHandshake
        onHandshake = nil
        let error = UVError(code, "\(reason) (peer \(peerDescription))")
        close()
        told?(error)
        owner?(.error(error))
        writer?(error)
    }

    // MARK: Writing

    /// See `ByteStream.write`. Before the handshake has finished the bytes are held.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed, writeFailure == nil, bytes.count > 0 else { return }
        if handshakeDone {
            encrypt(bytes)
        } else {
            early.append(contentsOf: bytes)
        }
        if !isClosed, pendingWriteBytes > 0 { drainOwed = true }
    }

    /// Encrypts in slices, each handed to the socket before the next is encrypted, so
    /// OpenSSL's output buffer stays small and a large write is not held twice.
    private func encrypt(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count, !isClosed, writeFailure == nil {
            let end = min(offset + TLSContext.scratchSize, bytes.count)
            if let reason = session.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) {
                writeFailed(UVError(UV_EPROTO.rawValue, reason))
                return
            }
            flushCiphertext()
            offset = end
        }
    }

    /// Moves OpenSSL's output to the socket, which takes it all (copying what the kernel
    /// does not take at once).
    private func flushCiphertext() {
        let buffer = UnsafeMutableRawBufferPointer(start: context.ciphertextScratch, count: TLSContext.scratchSize)
        while true {
            let count = session.takeCiphertext(into: buffer)
            if count == 0 { return }
            transport.write(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
        }
    }

    /// See `ByteStream.pendingWriteBytes`: plaintext held for the handshake, ciphertext
    /// not yet moved to the socket (none between calls) and what the socket still holds.
    public var pendingWriteBytes: Int {
        guard !isClosed, writeFailure == nil else { return 0 }
        return early.count + session.ciphertextPending + transport.pendingWriteBytes
    }

    /// Runs `onDrain` when it is owed and everything is out.
    private func checkDrained() {
        guard drainOwed, pendingWriteBytes == 0, !isClosed else { return }
        drainOwed = false
        onDrain?()
    }

    private func writeFailed(_ error: UVError) {
        guard writeFailure == nil, !isClosed else { return }
        writeFailure = error
        early = []
        onWriteError?(error)
    }

    // MARK: Closing and details

    /// See `ByteStream.close`. Sends close_notify first when the handshake had finished.
    public func close(_ completion: (() -> Void)?) {
        guard !isClosed else { return }
        isClosed = true
        onRead = nil
        onDrain = nil
        onWriteError = nil
        onHandshake = nil
        early = []
        if handshakeDone, writeFailure == nil {
            session.shutdown()
            flushCiphertext()
        }
        timer.close()
        transport.close(completion)
    }

    /// The socket's peer, as `Stream.peerDescription` gives it.
    public var peerDescription: String { transport.peerDescription }

    /// Always true today: TLS runs on TCP connections.
    public var isTCP: Bool { transport.isTCP }

    public var peerUID: UInt32? { transport.peerUID }

    /// The socket's end of input with nothing unread: whatever the TLS session holds,
    /// no more records can come.
    public var peerHasClosed: Bool { transport.peerHasClosed }

    /// The socket's peer has gone both ways: no record can reach it.
    public var peerIsGone: Bool { transport.peerIsGone }

    /// The socket's peer, watched the same way.
    public func watchForPeerGone(every interval: UInt64, _ onGone: @escaping () -> Void) {
        transport.watchForPeerGone(every: interval, onGone)
    }
}
