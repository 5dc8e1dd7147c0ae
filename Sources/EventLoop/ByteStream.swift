/// What a client connection needs of its transport, and no more: a plain `Stream` (TCP
/// or Unix-domain) and a TLS stream layered on one (`SecureStream.TLSStream`) both offer
/// it, so `RPCConnection` and `Server.adopt` serve either without knowing which.
///
/// The contract is `Stream`'s, which documents each member in full: reads are delivered
/// as `Stream.ReadEvent`s until `.eof` or `.error`; `write` never blocks and never drops
/// bytes; `pendingWriteBytes` counts every byte accepted and not yet handed to the
/// kernel, so the owner can apply back-pressure; `onDrain` fires when that count falls
/// back to 0 after having been above it; `onWriteError` fires once when writing fails;
/// after `close` nothing is delivered any more. A stream that ends by itself before it
/// carries anything (a TLS or WebSocket handshake that fails or times out) tells its
/// owner either way: `.error` to a reading owner, `onWriteError` to one that is not
/// reading. Confined to the loop's thread.
public protocol ByteStream: AnyObject {
    /// Starts delivering reads to `onRead`, replacing any previous callback. Throws if
    /// the stream is closed.
    func startReading(_ onRead: @escaping (Stream.ReadEvent) -> Void) throws
    /// Stops delivering reads until `startReading` is called again (back-pressure).
    func stopReading()
    /// The most bytes one `.data` read delivers (treated as at least 1); `Int.max`, the
    /// default, leaves the size to the stream. An owner that buffers what it reads up to
    /// a limit keeps this at the room left, so that no read takes it past the limit
    /// (`RawSocket`): the bytes beyond wait in the kernel, or, over TLS, in OpenSSL's
    /// buffer. Changing it takes effect from the next read. Streams that deliver whole
    /// messages (`deliversMessages`) cannot cut them and ignore it.
    var maxReadBytes: Int { get set }
    /// Queues `bytes` for writing, in call order; ignored after close or a write error.
    func write(_ bytes: UnsafeRawBufferPointer)
    /// Queues `bytes` and a newline after them: one whole line, which a stream framed by
    /// lines (`WebSocketStream`) sends as it is instead of holding it back as the start
    /// of a line until its newline comes. The others write the two one after the other.
    func writeLine(_ bytes: UnsafeRawBufferPointer)
    /// Bytes accepted by `write` and not yet handed to the kernel; 0 once closed.
    var pendingWriteBytes: Int { get }
    /// Whether each `.data` read is one whole message of the peer's and nothing else
    /// (`WebSocketStream`: one text frame's payload): the owner then reads each alone,
    /// so a message cut short is an error of its own and never joined to the next.
    /// Byte streams (TCP, Unix-domain, TLS) say no: their reads fall anywhere.
    var deliversMessages: Bool { get }
    /// Runs when `pendingWriteBytes` falls back to 0 after having been above 0.
    var onDrain: (() -> Void)? { get set }
    /// Runs once when a write fails; the stream accepts no more writes.
    var onWriteError: ((UVError) -> Void)? { get set }
    /// Closes the stream, discarding what is still queued; `completion` runs from the
    /// loop once the socket is closed. A second call does nothing.
    func close(_ completion: (() -> Void)?)
    /// The peer for logs ("127.0.0.1:5555", "[::1]:80", "unix").
    var peerDescription: String { get }
    /// Whether the stream runs over TCP (otherwise a Unix-domain pipe).
    var isTCP: Bool { get }
    /// The uid of the process at the other end of a Unix-domain pipe; nil over TCP.
    var peerUID: UInt32? { get }
    /// True when the peer has closed its end (or shut it for writing) and nothing it
    /// sent before is left unread: the next read would be the end of input. Looked at
    /// now, without reading, so a server can reap such connections before the loop gets
    /// round to their reads.
    var peerHasClosed: Bool { get }
    /// True when the peer has closed both ways, so that nothing written can reach it: a
    /// Unix-domain peer that closed its socket (or exited), a TCP peer that reset the
    /// connection. A peer that only shut its end for writing still reads, and is not
    /// gone; nor is a TCP peer that closed with a FIN, which looks the same until a
    /// write is refused. Looked at now, without reading.
    var peerIsGone: Bool { get }
    /// Looks at `peerIsGone` every `interval` ms from now on and runs `onGone` once, when
    /// it turns true; never after `close`. For a connection whose peer has sent its end
    /// of input and still waits for answers: a peer that goes afterwards (a Unix-domain
    /// one that closes, a TCP one whose socket stops answering keep-alive probes) is
    /// let go then, instead of when an answer fails to be written. A second call does
    /// nothing.
    func watchForPeerGone(every interval: UInt64, _ onGone: @escaping () -> Void)
}

extension ByteStream {
    /// Queues `bytes` for writing; see `write(_: UnsafeRawBufferPointer)`.
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    public func writeLine(_ bytes: UnsafeRawBufferPointer) {
        write(bytes)
        withUnsafeBytes(of: UInt8(ascii: "\n")) { write($0) }
    }

    /// Closes the stream without waiting for the close to finish.
    public func close() { close(nil) }

    /// Byte streams: a read ends wherever the kernel or TLS cut it.
    public var deliversMessages: Bool { false }

    /// Streams that do not size their reads: reads are what they are.
    public var maxReadBytes: Int {
        get { Int.max }
        set {}
    }

    /// Streams that cannot tell say no: their end of input arrives as a read.
    public var peerHasClosed: Bool { false }

    /// Streams that cannot tell say no: a peer that has gone is found when a write fails.
    public var peerIsGone: Bool { false }

    /// Streams that cannot tell watch nothing.
    public func watchForPeerGone(every interval: UInt64, _ onGone: @escaping () -> Void) {}
}

extension Stream: ByteStream {}
