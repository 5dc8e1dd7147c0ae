import CUV
import Glibc

/// A connected byte stream: a TCP connection or a Unix-domain pipe, accepted by a
/// `Listener` or made by `connectTCP` / `connectPipe`.
///
/// Lifetime: like every handle here, a stream keeps itself alive while it is open, so
/// whoever receives one must eventually `close()` it (dropping the last reference does
/// not close the socket). After `close()` every operation is a no-op, no callback of this
/// stream runs any more (`onRead`, `onDrain`, `onWriteError`, a pending shutdown
/// completion and the callback of a connect still under way are dropped), and bytes not
/// yet handed to the kernel are discarded.
/// `close()` may be called from inside any of the stream's own callbacks.
///
/// Writing never blocks and never drops bytes (until close or a write error): what the
/// kernel does not take at once is copied and written as the socket drains, in order.
/// `pendingWriteBytes` says how much that is, so the owner can apply back-pressure.
///
/// Writing to a peer that has gone away raises SIGPIPE, which kills the process unless
/// it is ignored: the executable must call `signal(SIGPIPE, SIG_IGN)` before serving.
/// The failed write then reports EPIPE through `onWriteError` instead.
///
/// Confined to the loop's thread, like everything in this module.
public final class Stream: UVHandle {
    /// What a read delivered.
    public enum ReadEvent {
        /// Bytes that arrived. The buffer belongs to the loop and is reused by the next
        /// read: copy what must outlive the callback.
        case data(UnsafeRawBufferPointer)
        /// The peer closed its write side. No more data will come; writing may continue
        /// (a half-closed client still expects its replies). Reading has stopped.
        case eof
        /// Reading failed (ECONNRESET, …). Reading has stopped; close the stream.
        case error(UVError)
    }

    /// Whether this is a TCP connection (otherwise a Unix-domain pipe).
    public let isTCP: Bool

    /// The handle as the `uv_stream_t` every stream call takes.
    private var stream: UnsafeMutablePointer<uv_stream_t> { raw(uv_stream_t.self) }

    /// The loop's shared read buffer, cached so `alloc_cb` need not go through the
    /// unowned `loop` reference on every read.
    private let readBuffer: UnsafeMutableRawPointer

    private var onRead: ((ReadEvent) -> Void)?

    /// Called whenever `pendingWriteBytes` drops back to 0 after having been above 0:
    /// everything written so far is with the kernel. Use it to resume producing output
    /// after back-pressure, or to close after a last reply ("flush then close"). It is
    /// not called when `write` hands everything to the kernel at once, nor after a write
    /// error or close. Runs on the loop; may write or close.
    public var onDrain: (() -> Void)?

    /// Called once, from the loop, when a write fails (EPIPE, ECONNRESET, …). From then
    /// on the stream accepts no more writes and `pendingWriteBytes` is 0; reading is not
    /// affected. The owner normally closes the stream here.
    public var onWriteError: ((UVError) -> Void)?

    // MARK: Write state
    //
    // Invariant: `pending` is non-empty only while `writeInFlight` is true. Bytes go to
    // the kernel in this order: whatever libuv still holds of the in-flight `uv_write`
    // (`inFlight`), then `pending`. When the in-flight write completes, `pending` becomes
    // the next `uv_write`, so any number of small writes in one loop turn coalesce into
    // one request. Exactly one `uv_write_t` exists per stream and it is reused.

    /// Where the write side stands. Transitions: `open` → `shutdownRequested` (shutdown
    /// asked while `pending` still held bytes) → `shutDown`; `open` → `shutDown`;
    /// `open` or `shutdownRequested` → `failed`. Writes are accepted only when `open`.
    private enum WriteSide {
        case open
        /// `shutdown()` was called while bytes were waiting in `pending`; `uv_shutdown`
        /// is issued right after those bytes are handed to libuv, because libuv only
        /// orders a shutdown after writes it already knows about.
        case shutdownRequested
        /// `uv_shutdown` has been issued.
        case shutDown
        /// A write failed and was reported.
        case failed(UVError)
    }

    private var writeSide = WriteSide.open
    private let writeRequest: UnsafeMutablePointer<uv_write_t>
    private var writeInFlight = false
    /// The bytes of the in-flight `uv_write`; never appended to while in flight.
    private var inFlight = OutboundBuffer()
    /// Bytes accepted while a `uv_write` was in flight, waiting for it to finish.
    private var pending = OutboundBuffer()

    private var shutdownRequest: UnsafeMutablePointer<uv_shutdown_t>?
    private var shutdownCompletion: ((UVError?) -> Void)?

    /// The peer address, formatted once on first use.
    private var cachedPeerDescription: String?

    /// The callback of `connectTCP` / `connectPipe` until the connect request finishes.
    private var connectDone: ((Result<Stream, UVError>) -> Void)?

    /// Makes an unopened stream; the caller runs `uv_tcp_init` / `uv_pipe_init` through
    /// `initialize()`.
    init(loop: Loop, tcp: Bool) {
        isTCP = tcp
        readBuffer = loop.readBuffer
        writeRequest = .allocate(capacity: 1)
        super.init(loop: loop, size: tcp ? MemoryLayout<uv_tcp_t>.size : MemoryLayout<uv_pipe_t>.size)
    }

    /// Initializes the libuv handle; on failure nothing reached the loop and the stream
    /// is dead.
    func initialize() throws {
        let rc = isTCP
            ? uv_tcp_init(loop.raw, raw(uv_tcp_t.self))
            : uv_pipe_init(loop.raw, raw(uv_pipe_t.self), 0)
        if rc < 0 {
            initFailed()
            throw UVError(rc, isTCP ? "uv_tcp_init" : "uv_pipe_init")
        }
        opened()
    }

    /// Runs only after the close callback dropped the self-retain (or when init failed),
    /// so libuv has finished with the write and shutdown requests: it runs their
    /// callbacks, with ECANCELED if need be, before the close callback.
    deinit {
        inFlight.release()
        pending.release()
        writeRequest.deallocate()
        shutdownRequest?.deallocate()
    }

    /// Drops every callback (they may capture the stream; this breaks those cycles and
    /// guarantees none runs after close) and frees the bytes that were still waiting.
    public override func willClose() {
        peerWatch?.close()
        peerWatch = nil
        onRead = nil
        onDrain = nil
        onWriteError = nil
        shutdownCompletion = nil
        // Whoever closed a connecting stream gave the connect up (a socket's connect
        // cancelled or timed out): libuv still answers the request, with ECANCELED, and
        // that answer would reach an owner who may be gone.
        connectDone = nil
        // Nobody can write any more; give back the memory now. `inFlight` may still be
        // read by libuv until the write callback (ECANCELED) and is freed there.
        pending.release()
    }

    // MARK: Reading

    /// The most bytes one read delivers (`ByteStream.maxReadBytes`): the size of the
    /// buffer offered to libuv for the next read, at most the loop's 64 KiB.
    public var maxReadBytes = Int.max

    /// Starts delivering reads to `onRead`, replacing any previous callback. Reading stops
    /// by itself after `.eof` or `.error`; the owner decides when to close. Throws if the
    /// stream is closed or libuv refuses (ENOTCONN).
    public func startReading(_ onRead: @escaping (ReadEvent) -> Void) throws {
        guard !isClosed else { throw UVError(UVErrorCode.ebadf, "uv_read_start on a closed stream") }
        self.onRead = onRead
        let rc = uv_read_start(
            stream,
            { handle, _, buf in
                let me = Stream.from(handle)
                buf!.pointee = uv_buf_t(
                    base: me.readBuffer.assumingMemoryBound(to: CChar.self),
                    len: max(1, min(Loop.readBufferSize, me.maxReadBytes)))
            },
            { handle, nread, buf in
                let me = Stream.from(handle)
                // A local copy keeps the closure alive even if it closes the stream
                // (which clears `onRead`) while running.
                guard let onRead = me.onRead else { return }
                if nread > 0 {
                    onRead(.data(UnsafeRawBufferPointer(start: buf!.pointee.base, count: nread)))
                } else if nread == Int(UVErrorCode.eof) {
                    onRead(.eof)
                } else if nread < 0 {
                    onRead(.error(UVError(Int32(truncatingIfNeeded: nread), "read")))
                }
                // nread == 0 is libuv's "nothing this time" (EAGAIN): ignore.
            })
        if rc < 0 {
            self.onRead = nil
            throw UVError(rc, "uv_read_start")
        }
    }

    /// Stops delivering reads (back-pressure); `startReading` resumes. Bytes that arrive
    /// meanwhile wait in the kernel.
    public func stopReading() {
        guard !isClosed else { return }
        uv_read_stop(stream)
        onRead = nil
    }

    // MARK: Writing

    /// Queues `bytes` for writing. Never blocks and never drops: when nothing is queued,
    /// it first offers the bytes to the kernel directly (`uv_try_write`, no copy), and
    /// copies only what the kernel did not take. Bytes are written in call order.
    ///
    /// Ignored after `close()`, after `shutdown()` and after a write error. Errors are
    /// reported later through `onWriteError`, from the loop; only if libuv refuses to
    /// queue the request at all (which a connected stream does not do) does
    /// `onWriteError` run before this returns.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard !isClosed, case .open = writeSide, let start = bytes.baseAddress, bytes.count > 0 else {
            return
        }
        var remainder = bytes
        // Only when nothing at all is queued (ours or libuv's) may bytes go straight to
        // the kernel without overtaking earlier ones. libuv's queue can be empty while
        // our write callback is still to come; that is fine, the bytes are out.
        if pending.isEmpty, uv_stream_get_write_queue_size(stream) == 0, bytes.count <= Int(Int32.max) {
            var buf = uv_buf_t(base: UnsafeMutablePointer(mutating: start.assumingMemoryBound(to: CChar.self)),
                               len: bytes.count)
            let written = uv_try_write(stream, &buf, 1)
            if written == bytes.count { return }
            // EAGAIN (full socket buffer) leaves everything to queue. A real error
            // (libuv 1.44 reports most as EAGAIN anyway) is left to uv_write, which hits
            // it again and reports it through the write callback, from the loop.
            if written > 0 {
                remainder = UnsafeRawBufferPointer(rebasing: bytes[Int(written)...])
            }
        }
        pending.append(remainder)
        if !writeInFlight { flushPending() }
    }

    /// Queues `bytes` for writing; see `write(_: UnsafeRawBufferPointer)`.
    public func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { write($0) }
    }

    /// Bytes accepted by `write` and not yet handed to the kernel: what libuv still holds
    /// of the in-flight request plus what waits behind it. Exact at any moment on the
    /// loop; 0 once the stream is closed or a write failed (those bytes are discarded).
    public var pendingWriteBytes: Int {
        guard !isClosed else { return 0 }
        if case .failed = writeSide { return 0 }
        return uv_stream_get_write_queue_size(stream) + pending.count
    }

    /// Hands `pending` to libuv as the one `uv_write`. Called only with no write in flight.
    private func flushPending() {
        swap(&inFlight, &pending)  // `pending` was the full one; `inFlight` was empty.
        guard let base = inFlight.base else { return }
        var buf = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: inFlight.count)
        // libuv copies the uv_buf_t array itself; only the bytes must outlive the call,
        // and `inFlight` keeps them until `writeFinished`.
        let rc = uv_write(writeRequest, stream, &buf, 1) { request, status in
            let me = Stream.from(request!.pointee.handle)
            me.writeFinished(status)
        }
        if rc < 0 {
            inFlight.removeAll()
            writeFailed(UVError(rc, "uv_write"))
            return
        }
        writeInFlight = true
    }

    /// The write callback. Runs from the loop, or during close with ECANCELED (before
    /// the close callback, so `self` and its buffers are still alive).
    private func writeFinished(_ status: Int32) {
        writeInFlight = false
        if isClosed {
            inFlight.release()
            return
        }
        inFlight.removeAll()
        if status < 0 {
            writeFailed(UVError(status, "write"))
            return
        }
        if !pending.isEmpty {
            flushPending()
            if case .shutdownRequested = writeSide, writeInFlight { issueShutdown() }
            return
        }
        onDrain?()
    }

    /// Moves to the failed state and reports the error once. A shutdown waiting for
    /// pending bytes fails with the same error.
    private func writeFailed(_ error: UVError) {
        let waitingShutdown: ((UVError?) -> Void)?
        if case .shutdownRequested = writeSide {
            waitingShutdown = shutdownCompletion
            shutdownCompletion = nil
        } else {
            waitingShutdown = nil
        }
        writeSide = .failed(error)
        pending.removeAll()
        onWriteError?(error)
        if !isClosed { waitingShutdown?(error) }
    }

    // MARK: Shutdown

    /// Half-closes the write side once every byte written so far has reached the kernel
    /// (`uv_shutdown`): the peer reads EOF, and this side can still read. `completion`
    /// gets nil on success or the error. It runs once, from the loop — unless the stream
    /// is closed first, in which case it is dropped; or unless the request is refused
    /// outright (a second shutdown, or the write side already failed), in which case it
    /// runs with that error before this returns. Writes after this are ignored.
    public func shutdown(_ completion: @escaping (UVError?) -> Void) {
        guard !isClosed else { return }
        switch writeSide {
        case .open:
            shutdownCompletion = completion
            if pending.isEmpty {
                issueShutdown()
            } else {
                writeSide = .shutdownRequested
            }
        case .failed(let error):
            completion(error)
        case .shutdownRequested, .shutDown:
            completion(UVError(UVErrorCode.enotconn, "uv_shutdown (shutdown was already requested)"))
        }
    }

    private func issueShutdown() {
        writeSide = .shutDown
        let request = shutdownRequest ?? .allocate(capacity: 1)
        shutdownRequest = request
        let rc = uv_shutdown(request, stream) { request, status in
            let me = Stream.from(request!.pointee.handle)
            // During close this runs with ECANCELED and the completion is already gone.
            let completion = me.shutdownCompletion
            me.shutdownCompletion = nil
            completion?(status < 0 ? UVError(status, "shutdown") : nil)
        }
        if rc < 0 {
            let completion = shutdownCompletion
            shutdownCompletion = nil
            completion?(UVError(rc, "uv_shutdown"))
        }
    }

    // MARK: Socket details

    /// The peer for logs: "127.0.0.1:5555", "[::1]:80", or "unix" for a pipe. Formatted
    /// on first use and remembered, so read it early (say, when the connection is
    /// accepted) if it must be available after the peer is gone: asking the kernel
    /// after a reset fails, and then this returns "unknown (ENOTCONN)" and tries again
    /// next time.
    public var peerDescription: String {
        if let cachedPeerDescription { return cachedPeerDescription }
        guard isTCP else { return "unix" }
        guard !isClosed else { return "unknown (closed)" }
        var storage = sockaddr_storage()
        var length = Int32(MemoryLayout<sockaddr_storage>.size)
        let rc = SocketAddress.withSockaddr(&storage) { uv_tcp_getpeername(raw(uv_tcp_t.self), $0, &length) }
        guard rc == 0 else { return "unknown (\(UVError(rc, "uv_tcp_getpeername").name))" }
        let description = withUnsafePointer(to: &storage) { SocketAddress.describe($0) } ?? "unknown (family)"
        cachedPeerDescription = description
        return description
    }

    /// The uid of the process at the other end of a Unix-domain pipe (SO_PEERCRED, as
    /// the kernel recorded it at connect time); nil for TCP, a closed stream, or when the
    /// kernel does not say.
    public var peerUID: UInt32? {
        guard !isTCP, !isClosed else { return nil }
        var fd = uv_os_fd_t()
        guard uv_fileno(uvHandle, &fd) == 0 else { return nil }
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: Swift does not import it
        // (it needs _GNU_SOURCE), so its layout is spelled out.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
              length == socklen_t(MemoryLayout.size(ofValue: credentials))
        else { return nil }
        return credentials.uid
    }

    /// Whether a one-byte peek finds the end of input: the peer closed (or shut down
    /// writing) and every byte it sent has been read. `MSG_DONTWAIT`, so it never
    /// blocks; an error or data waiting both say no (the read will report them).
    public var peerHasClosed: Bool {
        guard !isClosed else { return false }
        var fd = uv_os_fd_t()
        guard uv_fileno(uvHandle, &fd) == 0 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) == 0
    }

    /// `ByteStream.peerIsGone`: the socket polls as hung up (`POLLHUP`: the kernel's
    /// "shut down both ways", which a Unix-domain socket reports once its peer closes and
    /// a TCP one after a reset) or in error.
    public var peerIsGone: Bool {
        guard !isClosed else { return false }
        var fd = uv_os_fd_t()
        guard uv_fileno(uvHandle, &fd) == 0 else { return false }
        var p = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&p, 1, 0) == 1 && p.revents & Int16(POLLHUP | POLLERR) != 0
    }

    /// Turns TCP keep-alive on: once the connection has carried nothing for
    /// `idleSeconds`, the kernel probes the peer every `idleSeconds / 4` seconds (at least
    /// 1), and after 4 probes unanswered the socket fails (`ETIMEDOUT`): a read reports it,
    /// and `peerIsGone` turns true. So a peer whose machine vanished, or that closed with
    /// a FIN and whose socket has since gone, is found about `2 × idleSeconds` after the
    /// last traffic, instead of never. Does nothing on a pipe or a closed stream.
    public func setKeepAlive(idleSeconds: UInt32) {
        guard isTCP, !isClosed, idleSeconds > 0 else { return }
        var fd = uv_os_fd_t()
        guard uv_fileno(uvHandle, &fd) == 0 else { return }
        // Each fails only on a socket that is gone, where there is nothing to tune.
        for (level, option, value) in [(SOL_SOCKET, SO_KEEPALIVE, 1),
                                       (Int32(IPPROTO_TCP), TCP_KEEPIDLE, Int32(clamping: idleSeconds)),
                                       (Int32(IPPROTO_TCP), TCP_KEEPINTVL, Int32(clamping: max(1, idleSeconds / 4))),
                                       (Int32(IPPROTO_TCP), TCP_KEEPCNT, 4)] {
            var v = value
            _ = setsockopt(fd, level, option, &v, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// The timer of `watchForPeerGone`, closed with the stream.
    private var peerWatch: Timer?

    /// `ByteStream.watchForPeerGone`: a timer on the stream's loop looks at `peerIsGone`
    /// every `interval` ms, a `poll` with no wait each time.
    public func watchForPeerGone(every interval: UInt64, _ onGone: @escaping () -> Void) {
        guard !isClosed, peerWatch == nil, let timer = try? Timer(loop: loop) else { return }
        peerWatch = timer
        timer.start(timeout: interval, repeat: interval) { [unowned self] in
            guard peerIsGone else { return }
            peerWatch?.close()
            peerWatch = nil
            onGone()
        }
    }

    /// Turns Nagle's algorithm off (`true`) or on. JSON-RPC replies are small and latency
    /// bound, so accepted and client-connected TCP streams start with it off. Does
    /// nothing on a pipe or a closed stream.
    public func setNoDelay(_ on: Bool) {
        guard isTCP, !isClosed else { return }
        // Fails only on a socket that is gone, where there is nothing to tune.
        _ = uv_tcp_nodelay(raw(uv_tcp_t.self), on ? 1 : 0)
    }

    // MARK: Connecting

    /// Connects to `host` (an IPv4 or IPv6 literal, not a name) and `port`. `done` runs
    /// once, from the loop, with the connected stream (TCP_NODELAY set) or the error —
    /// even when the arguments are invalid, so callers need only one error path. (The one
    /// exception, a failing `uv_tcp_init`, reports at once; libuv 1.44 never fails it.)
    /// Returns the stream being connected, so that the caller can give up by closing it
    /// (`done` is then never called); nil only in that exceptional case.
    @discardableResult
    public static func connectTCP(
        loop: Loop, host: String, port: Int, _ done: @escaping (Result<Stream, UVError>) -> Void
    ) -> Stream? {
        let stream = Stream(loop: loop, tcp: true)
        do {
            try stream.initialize()
        } catch {
            done(.failure(error as? UVError ?? UVError(UVErrorCode.einval, "uv_tcp_init")))
            return nil
        }
        var address: sockaddr_storage
        do {
            address = try SocketAddress.parse(host: host, port: port)
        } catch {
            // Closing first makes the failure arrive from the loop like every other one.
            let failure = error as? UVError ?? UVError(UVErrorCode.einval, "connect \(host):\(port)")
            stream.close { done(.failure(failure)) }
            return stream
        }
        stream.connectDone = done
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        let rc = SocketAddress.withSockaddr(&address) { sockaddr in
            uv_tcp_connect(request, stream.raw(uv_tcp_t.self), sockaddr) { request, status in
                let me = Stream.from(request!.pointee.handle)
                request!.deallocate()
                me.connectFinished(status, "connect")
            }
        }
        if rc < 0 {
            request.deallocate()
            stream.connectDone = nil
            let failure = UVError(rc, "connect \(host):\(port)")
            stream.close { done(.failure(failure)) }
        }
        return stream
    }

    /// Connects to the Unix-domain socket at `path`. `done` runs once, from the loop,
    /// with the connected stream or the error (ENOENT, ECONNREFUSED, …).
    public static func connectPipe(
        loop: Loop, path: String, _ done: @escaping (Result<Stream, UVError>) -> Void
    ) {
        let stream = Stream(loop: loop, tcp: false)
        do {
            try stream.initialize()
        } catch {
            done(.failure(error as? UVError ?? UVError(UVErrorCode.einval, "uv_pipe_init")))
            return
        }
        stream.connectDone = done
        let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
        // uv_pipe_connect reports every failure through the callback, from the loop.
        uv_pipe_connect(request, stream.raw(uv_pipe_t.self), path) { request, status in
            let me = Stream.from(request!.pointee.handle)
            request!.deallocate()
            me.connectFinished(status, "connect")
        }
    }

    /// Wraps a connected Unix-domain socket that already exists (one end of a
    /// `socketpair`, say) as a pipe stream, without any listener or connect. The stream
    /// takes the descriptor over: closing the stream closes it. On failure the
    /// descriptor is left to the caller. The fuzzer serves one end of a socket pair
    /// this way, so that no network is involved at all.
    public static func openPipe(loop: Loop, fd: Int32) throws -> Stream {
        let stream = Stream(loop: loop, tcp: false)
        try stream.initialize()
        let rc = uv_pipe_open(stream.raw(uv_pipe_t.self), fd)
        if rc < 0 {
            // The handle is open on the loop but owns no descriptor yet: close it alone.
            stream.close()
            throw UVError(rc, "uv_pipe_open")
        }
        return stream
    }

    /// The connect callback: hands over the stream, or closes it and reports the error
    /// once the close has finished. Nothing when the stream was closed meanwhile.
    private func connectFinished(_ status: Int32, _ operation: String) {
        guard let done = connectDone else { return }
        connectDone = nil
        if status < 0 {
            let failure = UVError(status, operation)
            close { done(.failure(failure)) }
            return
        }
        setNoDelay(true)
        done(.success(self))
    }
}
