import CUV

/// A libuv prepare handle: its callback runs once per loop turn, right before the loop
/// polls for I/O (and so before it could block). Work queued during any phase of a turn
/// (timers, I/O callbacks) is therefore done before the loop sleeps.
public final class Prepare: UVHandle {
    private var callback: (() -> Void)?

    public init(loop: Loop) throws {
        super.init(loop: loop, size: MemoryLayout<uv_prepare_t>.size)
        let rc = uv_prepare_init(loop.raw, raw(uv_prepare_t.self))
        if rc < 0 { initFailed(); throw UVError(rc, "uv_prepare_init") }
        opened()
    }

    /// Runs `callback` before every poll until `stop()`. An active prepare handle keeps
    /// the loop alive: stop it when there is nothing to do.
    public func start(_ callback: @escaping () -> Void) {
        guard !isClosed else { return }
        self.callback = callback
        uv_prepare_start(raw(uv_prepare_t.self)) { h in
            Prepare.from(h).callback?()
        }
    }

    public func stop() {
        guard !isClosed else { return }
        uv_prepare_stop(raw(uv_prepare_t.self))
    }

    public var isActive: Bool { !isClosed && uv_is_active(uvHandle) != 0 }

    public override func willClose() { callback = nil }
}
