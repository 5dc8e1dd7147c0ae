import CUV

/// A listening socket, TCP or Unix-domain, that accepts connections into `Stream`s.
///
/// Lifetime: open from the factory until `close()`, keeping itself alive meanwhile.
/// Closing stops accepting; streams already accepted are independent and stay open.
/// A pipe listener removes its socket file when it closes (libuv unlinks the path it
/// bound).
///
/// When a factory throws after the handle reached the loop (a failed bind), it has
/// already closed that handle; the loop must run once more to finish the close before
/// `Loop.close()` can succeed.
public final class Listener: UVHandle {
    /// Whether this listens on TCP (otherwise on a Unix-domain path).
    public let isTCP: Bool

    /// The port actually bound, for TCP (the kernel's choice when 0 was asked); nil for
    /// a pipe.
    public private(set) var boundPort: Int?

    private var onConnection: ((Result<Stream, UVError>) -> Void)?

    private init(loop: Loop, tcp: Bool) {
        isTCP = tcp
        super.init(loop: loop, size: tcp ? MemoryLayout<uv_tcp_t>.size : MemoryLayout<uv_pipe_t>.size)
    }

    /// Binds a TCP socket to `host` (an IPv4 or IPv6 literal such as "127.0.0.1", "::1",
    /// "0.0.0.0") and `port` (0 for an ephemeral port, then read `boundPort`). Throws
    /// `UVError` — EADDRINUSE when the port is taken, EINVAL for a host that is not a
    /// literal. Call `listen` to start accepting.
    public static func tcp(loop: Loop, host: String, port: Int) throws -> Listener {
        var address = try SocketAddress.parse(host: host, port: port)
        let listener = Listener(loop: loop, tcp: true)
        let rc = uv_tcp_init(loop.raw, listener.raw(uv_tcp_t.self))
        if rc < 0 {
            listener.initFailed()
            throw UVError(rc, "uv_tcp_init")
        }
        listener.opened()
        do {
            let handle = listener.raw(uv_tcp_t.self)
            try UVError.check(
                SocketAddress.withSockaddr(&address) { uv_tcp_bind(handle, $0, 0) }, "bind \(host):\(port)")
            // libuv keeps a bind's EADDRINUSE to itself until listen or connect;
            // uv_tcp_getsockname reports it now, which is where the caller expects it.
            var bound = sockaddr_storage()
            var length = Int32(MemoryLayout<sockaddr_storage>.size)
            try UVError.check(
                SocketAddress.withSockaddr(&bound) { uv_tcp_getsockname(handle, $0, &length) },
                "bind \(host):\(port)")
            listener.boundPort = withUnsafePointer(to: &bound) { SocketAddress.port($0) }
        } catch {
            listener.close()
            throw error
        }
        return listener
    }

    /// Binds a Unix-domain socket at `path`. The caller removes a stale socket file first
    /// and sets permissions after (EADDRINUSE if the path exists). Throws `UVError`.
    public static func pipe(loop: Loop, path: String) throws -> Listener {
        let listener = Listener(loop: loop, tcp: false)
        let rc = uv_pipe_init(loop.raw, listener.raw(uv_pipe_t.self), 0)
        if rc < 0 {
            listener.initFailed()
            throw UVError(rc, "uv_pipe_init")
        }
        listener.opened()
        let bound = uv_pipe_bind(listener.raw(uv_pipe_t.self), path)
        if bound < 0 {
            listener.close()
            throw UVError(bound, "bind \(path)")
        }
        return listener
    }

    /// Starts accepting. Each connection becomes a new `Stream` of the listener's kind
    /// (TCP_NODELAY set on TCP) handed to `onConnection`, which then owns it and must
    /// close it. A failure to accept one connection (EMFILE, …) is handed over as
    /// `.failure`; the listener keeps listening. Throws if listening fails (for example
    /// EADDRINUSE on a pipe path another process listens on).
    public func listen(backlog: Int32 = 511, _ onConnection: @escaping (Result<Stream, UVError>) -> Void) throws {
        guard !isClosed else { throw UVError(UVErrorCode.ebadf, "uv_listen on a closed listener") }
        self.onConnection = onConnection
        let rc = uv_listen(raw(uv_stream_t.self), backlog) { server, status in
            Listener.from(server).connectionArrived(status)
        }
        if rc < 0 {
            self.onConnection = nil
            throw UVError(rc, "uv_listen")
        }
    }

    private func connectionArrived(_ status: Int32) {
        guard let onConnection else { return }
        if status < 0 {
            onConnection(.failure(UVError(status, "accept")))
            return
        }
        let stream = Stream(loop: loop, tcp: isTCP)
        do {
            // Cannot fail for an unconnected TCP or pipe handle in libuv 1.44; if it ever
            // did, the connection stays in libuv's hands and listening pauses.
            try stream.initialize()
        } catch {
            onConnection(.failure(error as? UVError ?? UVError(UVErrorCode.einval, "accept")))
            return
        }
        let rc = uv_accept(raw(uv_stream_t.self), stream.raw(uv_stream_t.self))
        if rc < 0 {
            stream.close()
            onConnection(.failure(UVError(rc, "uv_accept")))
            return
        }
        stream.setNoDelay(true)
        onConnection(.success(stream))
    }

    /// Drops the connection callback, which may capture the listener.
    public override func willClose() { onConnection = nil }
}
