import CUV

/// The one thread-safe door into the loop (`uv_async_t`). Another thread calls
/// `sender.send()`; the loop thread then runs `callback`.
///
/// Sends coalesce: however many happen before the loop gets round to it, the callback
/// may run only once. So the callback must drain whatever shared queue the senders fill,
/// not take one item per call.
///
/// Lifetime and the race with `close()`: senders on other threads hold `AsyncSender`
/// tokens that outlive nothing by themselves — each token shares a small lock-protected
/// gate with this handle. `close()` shuts the gate (under the lock) before `uv_close`, and
/// `send()` only calls `uv_async_send` with the gate open (under the same lock). So a send
/// either completes before the close starts, or finds the gate shut and does nothing; no
/// sender ever touches the handle after its memory is freed, and there is no need to join
/// sender threads before closing. A send that loses the race is simply dropped: whoever
/// closes the wakeup must not rely on callbacks after that.
///
/// The handle itself is confined to the loop's thread; only `AsyncSender` crosses threads.
public final class AsyncWakeup: UVHandle {
    private var callback: (() -> Void)?
    private let gate: AsyncGate

    /// Creates the handle on `loop`. Throws `UVError` if libuv cannot set it up.
    public init(loop: Loop, _ callback: @escaping () -> Void) throws {
        self.callback = callback
        gate = try AsyncGate()
        super.init(loop: loop, size: MemoryLayout<uv_async_t>.size)
        let rc = uv_async_init(loop.raw, raw(uv_async_t.self)) { handle in
            // A local copy: the callback may close the wakeup, which drops `callback`.
            let callback = AsyncWakeup.from(handle).callback
            callback?()
        }
        if rc < 0 {
            initFailed()
            throw UVError(rc, "uv_async_init")
        }
        opened()
        gate.open(raw(uv_async_t.self))
    }

    /// A token for other threads. Valid for the wakeup's whole life and harmless after it:
    /// once `close()` has started, `send()` does nothing.
    public var sender: AsyncSender { AsyncSender(gate: gate) }

    /// Shuts the senders' gate before `uv_close` (see the race rule above) and drops the
    /// callback.
    public override func willClose() {
        gate.shut()
        callback = nil
    }
}

/// A `Sendable` token that wakes an `AsyncWakeup`'s loop from any thread.
public struct AsyncSender: @unchecked Sendable {
    // Unchecked because `AsyncGate` guards its only mutable state with its own mutex.
    fileprivate let gate: AsyncGate

    /// Asks the loop to run the wakeup's callback soon (`uv_async_send`). Thread-safe and
    /// cheap (an uncontended lock and, at most, one write to the loop's eventfd). Does
    /// nothing once the wakeup is closing or closed.
    public func send() { gate.send() }
}

/// The lock-protected pointer shared between an `AsyncWakeup` and its senders; see the
/// race discussion on `AsyncWakeup`. Freed when the last of them lets go.
final class AsyncGate: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<uv_mutex_t>
    /// The handle while it is open; nil before `open` and after `shut`. Read and written
    /// only with `mutex` held.
    private var target: UnsafeMutablePointer<uv_async_t>?

    init() throws {
        mutex = .allocate(capacity: 1)
        let rc = uv_mutex_init(mutex)
        if rc < 0 {
            mutex.deallocate()
            throw UVError(rc, "uv_mutex_init")
        }
    }

    deinit {
        uv_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func open(_ handle: UnsafeMutablePointer<uv_async_t>) {
        uv_mutex_lock(mutex)
        target = handle
        uv_mutex_unlock(mutex)
    }

    /// Called on the loop thread before `uv_close`. Waits for a send in progress.
    func shut() {
        uv_mutex_lock(mutex)
        target = nil
        uv_mutex_unlock(mutex)
    }

    func send() {
        uv_mutex_lock(mutex)
        if let target {
            // Fails only for a handle that is not an async handle; nothing to do then.
            _ = uv_async_send(target)
        }
        uv_mutex_unlock(mutex)
    }
}
