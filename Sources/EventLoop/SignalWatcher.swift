import CUV

/// Delivers a process signal (SIGINT, SIGTERM, …) as a callback on the loop, where it is
/// safe to do anything, instead of in a signal handler where almost nothing is.
///
/// libuv installs its own handler for the signal while at least one watcher for it is
/// open, and restores the default disposition when the last one closes; a signal that
/// arrives after that gets the default behaviour (often: the process ends). Several
/// signals arriving before the loop gets to them may be reported as one call.
///
/// Lifetime: open until `close()`, keeping itself alive meanwhile. Callers usually
/// `keepsLoopAlive = false` so a pending watcher does not keep `run()` from returning.
public final class SignalWatcher: UVHandle {
    /// The signal number being watched.
    public let signal: Int32
    private var callback: (() -> Void)?

    /// Starts watching `signal`. Throws `UVError` (EINVAL for a signal that cannot be
    /// caught, such as SIGKILL).
    public init(loop: Loop, signal: Int32, _ callback: @escaping () -> Void) throws {
        self.signal = signal
        self.callback = callback
        super.init(loop: loop, size: MemoryLayout<uv_signal_t>.size)
        let rc = uv_signal_init(loop.raw, raw(uv_signal_t.self))
        if rc < 0 {
            initFailed()
            throw UVError(rc, "uv_signal_init")
        }
        opened()
        let started = uv_signal_start(raw(uv_signal_t.self), { handle, _ in
            // A local copy: the callback may close the watcher, which drops `callback`.
            let callback = SignalWatcher.from(handle).callback
            callback?()
        }, signal)
        if started < 0 {
            close()
            throw UVError(started, "uv_signal_start(\(signal))")
        }
    }

    /// Drops the callback, which may capture the watcher.
    public override func willClose() { callback = nil }
}
