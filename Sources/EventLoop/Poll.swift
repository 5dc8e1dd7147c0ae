import CUV

/// Readiness of a descriptor, as libuv's `uv_poll_event` bits.
public struct PollEvents: OptionSet, Sendable {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }
    public static let readable = PollEvents(rawValue: Int32(UV_READABLE.rawValue))
    public static let writable = PollEvents(rawValue: Int32(UV_WRITABLE.rawValue))
}

/// Watches a descriptor someone else owns (libcurl's sockets). Stopping keeps the handle
/// for a later restart on the same descriptor; `close` ends it.
public final class Poll: UVHandle {
    /// Called with libuv's status (negative on error) and the ready events.
    private var callback: ((Int32, PollEvents) -> Void)?
    public let fd: Int32

    public init(loop: Loop, socket fd: Int32) throws {
        self.fd = fd
        super.init(loop: loop, size: MemoryLayout<uv_poll_t>.size)
        let rc = uv_poll_init_socket(loop.raw, raw(uv_poll_t.self), fd)
        if rc < 0 { initFailed(); throw UVError(rc, "uv_poll_init_socket(\(fd))") }
        opened()
    }

    public func start(_ events: PollEvents, _ callback: @escaping (Int32, PollEvents) -> Void) throws {
        guard !isClosed else { return }
        self.callback = callback
        try UVError.check(uv_poll_start(raw(uv_poll_t.self), events.rawValue, { h, status, events in
            let p = Poll.from(h)
            p.callback?(status, PollEvents(rawValue: events))
        }), "uv_poll_start(\(fd))")
    }

    public func stop() {
        guard !isClosed else { return }
        uv_poll_stop(raw(uv_poll_t.self))
    }

    public override func willClose() { callback = nil }
}
