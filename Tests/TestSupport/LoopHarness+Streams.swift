import EventLoop

/// The set-ups the stream tests share: accepting, connecting, reading and echoing on a
/// `LoopHarness`. Each tracks what it opens, so `finish()` closes it, and turns a failed
/// accept, connect or read start into a recorded failure that ends the test (thrown by
/// `run()`), so no test repeats the same `guard case .success` lines.
extension LoopHarness {
    /// Listens on `listener`; each accepted connection is tracked and given to `body`.
    public func acceptEach(on listener: Listener, _ body: @escaping (EventLoop.Stream) -> Void) throws {
        try listener.listen { [unowned self] result in
            switch result {
            case .success(let connection):
                track(connection)
                body(connection)
            case .failure(let error):
                fail("accept failed: \(error)")
            }
        }
    }

    /// Connects to `host:port` over TCP; the connected stream is tracked and given to `body`.
    public func connectTCP(host: String = "127.0.0.1", port: Int, _ body: @escaping (EventLoop.Stream) -> Void) {
        _ = EventLoop.Stream.connectTCP(loop: loop, host: host, port: port, connected(body))
    }

    /// Connects to the Unix-domain socket at `path`; the stream is tracked and given to `body`.
    public func connectPipe(path: String, _ body: @escaping (EventLoop.Stream) -> Void) {
        EventLoop.Stream.connectPipe(loop: loop, path: path, connected(body))
    }

    /// One server end and one client end of a TCP connection to `listener` (on
    /// 127.0.0.1), given to `body` once both exist, whichever comes first.
    public func connectedPair(
        _ listener: Listener, _ body: @escaping (_ server: EventLoop.Stream, _ client: EventLoop.Stream) -> Void
    ) throws {
        guard let port = listener.boundPort else { return fail("the listener has no port") }
        var server: EventLoop.Stream?
        var client: EventLoop.Stream?
        func proceed() {
            guard let server, let client else { return }
            body(server, client)
        }
        try acceptEach(on: listener) { server = $0; proceed() }
        connectTCP(port: port) { client = $0; proceed() }
    }

    /// Starts reading `stream` (`who` names it in a failure to start).
    public func read(_ stream: EventLoop.Stream, as who: String, _ onRead: @escaping (EventLoop.Stream.ReadEvent) -> Void) {
        attempt("\(who) startReading") { try stream.startReading(onRead) }
    }

    /// Reads `stream` into `received` until `count` bytes have come, then finishes the
    /// test; an end of the stream or an error before that is a failure.
    public func collect(_ stream: EventLoop.Stream, count: Int, into received: ReceivedBytes) {
        read(stream, as: "client") { [unowned self] event in
            switch event {
            case .data(let bytes):
                received.bytes += bytes
                if received.bytes.count >= count { finish() }
            case .eof, .error:
                fail("client read ended early: \(event)")
            }
        }
    }

    /// Makes `stream` echo everything back, half-closing its write side after the
    /// peer's EOF once the echoes are written, and closing on a read error.
    public func echo(_ stream: EventLoop.Stream) {
        read(stream, as: "server") { event in
            switch event {
            case .data(let bytes): stream.write(bytes)
            case .eof: stream.shutdown { _ in }
            case .error: stream.close()
            }
        }
    }

    private func connected(_ body: @escaping (EventLoop.Stream) -> Void) -> (Result<EventLoop.Stream, UVError>) -> Void {
        { [unowned self] result in
            switch result {
            case .success(let stream):
                track(stream)
                body(stream)
            case .failure(let error):
                fail("connect failed: \(error)")
            }
        }
    }
}

/// The bytes `LoopHarness.collect` gathered, read after `run()`.
public final class ReceivedBytes {
    public var bytes: [UInt8] = []
    public init() {}
}
