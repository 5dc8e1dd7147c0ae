import CUV

/// A libuv timer. One callback, re-armed with `start`.
public final class Timer: UVHandle {
    private var callback: (() -> Void)?

    public init(loop: Loop) throws {
        super.init(loop: loop, size: MemoryLayout<uv_timer_t>.size)
        let rc = uv_timer_init(loop.raw, raw(uv_timer_t.self))
        if rc < 0 { initFailed(); throw UVError(rc, "uv_timer_init") }
        opened()
    }

    /// Fires `callback` after `timeout` ms, then every `repeat` ms if non-zero. A
    /// timeout of 0 fires on the next turn of the loop, never inside this call.
    public func start(timeout: UInt64, repeat: UInt64 = 0, _ callback: @escaping () -> Void) {
        guard !isClosed else { return }
        self.callback = callback
        uv_timer_start(raw(uv_timer_t.self), { h in
            let t = Timer.from(h)
            t.callback?()
        }, timeout, `repeat`)
    }

    public func stop() {
        guard !isClosed else { return }
        uv_timer_stop(raw(uv_timer_t.self))
    }

    public var isActive: Bool { !isClosed && uv_is_active(uvHandle) != 0 }

    public override func willClose() { callback = nil }
}
