import CUV

/// One libuv loop. Everything in xhrpc runs on the thread that calls `run()`; the
/// wrappers in this module are confined to that thread and need no locks.
///
/// Handle lifetime, the rule every wrapper here follows: the handle is allocated at a
/// stable address when the wrapper is made, and the wrapper retains itself (through
/// `handle.data`) while the handle is open. `close()` calls `uv_close`; the close
/// callback frees the handle and drops that retain. So a handle is never freed while
/// libuv may still touch it, and a wrapper nobody holds stays alive until it is closed.
public final class Loop {
    public let raw: UnsafeMutablePointer<uv_loop_t>

    /// The size of `readBuffer`: libuv suggests 64 KiB per read and reads at most that.
    static let readBufferSize = 64 * 1024

    /// Scratch space every `Stream` of this loop reads into. One buffer per loop is enough:
    /// the bytes of a read are only valid during its callback, and libuv runs one callback
    /// at a time on the loop's thread (`uv_run` must not be re-entered from a callback), so
    /// no two reads can use it at once. Freed in `deinit`, after the last callback.
    let readBuffer: UnsafeMutableRawPointer

    private var isClosed = false

    public init() throws {
        raw = .allocate(capacity: 1)
        let rc = uv_loop_init(raw)
        if rc < 0 {
            raw.deallocate()
            throw UVError(rc, "uv_loop_init")
        }
        readBuffer = .allocate(byteCount: Loop.readBufferSize, alignment: 16)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Runs until there is nothing left to do or `stop()` is called.
    public func run() { uv_run(raw, UV_RUN_DEFAULT) }

    /// Runs one turn, waiting for I/O if there is any pending. Returns true while
    /// handles or requests remain active.
    @discardableResult
    public func runOnce() -> Bool { uv_run(raw, UV_RUN_ONCE) != 0 }

    /// Runs one turn without waiting.
    @discardableResult
    public func runNoWait() -> Bool { uv_run(raw, UV_RUN_NOWAIT) != 0 }

    /// Makes `run()` return after the current turn.
    public func stop() { uv_stop(raw) }

    /// Milliseconds of the loop's cached clock (updated once a turn).
    public var now: UInt64 { uv_now(raw) }

    /// Refreshes the cached clock.
    public func updateTime() { uv_update_time(raw) }

    /// The names of the handles still known to the loop ("tcp", "timer", …), closing
    /// or not. Empty once everything was closed and the loop ran its close callbacks.
    public func handleNames() -> [String] {
        final class Box { var names: [String] = [] }
        let box = Box()
        withExtendedLifetime(box) {
            uv_walk(raw, { handle, arg in
                let box = Unmanaged<Box>.fromOpaque(arg!).takeUnretainedValue()
                box.names.append(String(cString: uv_handle_type_name(handle!.pointee.type)))
            }, Unmanaged.passUnretained(box).toOpaque())
        }
        return box.names
    }

    /// Closes the loop. Fails with EBUSY, naming the handles left, if any is still
    /// open: close them and run the loop first. A second call does nothing (the first
    /// one freed the loop; calling `uv_loop_close` again would read freed memory).
    public func close() throws {
        guard !isClosed else { return }
        let rc = uv_loop_close(raw)
        if rc < 0 { throw UVError(rc, "uv_loop_close (handles left: \(handleNames().joined(separator: ", ")))") }
        isClosed = true
        raw.deallocate()
    }
}

/// Shared plumbing for the handle wrappers: the self-retain while open and the close
/// callback that frees. Subclasses allocate their concrete libuv struct (`uv_timer_t`,
/// `uv_tcp_t`, …) with `allocate`, init it, and call `opened()`. Not generic: a C
/// callback cannot be formed inside a generic context.
open class UVHandle {
    public let uvHandle: UnsafeMutablePointer<uv_handle_t>
    public unowned let loop: Loop
    public private(set) var isClosed = false
    private var onClose: (() -> Void)?

    /// `size` is `MemoryLayout<uv_xxx_t>.size` of the concrete handle.
    public init(loop: Loop, size: Int) {
        self.loop = loop
        uvHandle = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 16)
            .bindMemory(to: uv_handle_t.self, capacity: 1)
    }

    /// The handle as its concrete libuv type.
    @inlinable
    public func raw<H>(_: H.Type) -> UnsafeMutablePointer<H> {
        UnsafeMutableRawPointer(uvHandle).assumingMemoryBound(to: H.self)
    }

    /// Called by subclasses once `uv_*_init` succeeded: from here the handle belongs to
    /// the loop and the wrapper keeps itself alive until its close callback.
    public func opened() {
        uvHandle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    }

    /// Called by subclasses when `uv_*_init` failed: nothing reached the loop.
    public func initFailed() {
        isClosed = true
        UnsafeMutableRawPointer(uvHandle).deallocate()
    }

    /// The wrapper behind a handle that libuv hands to a callback.
    @inlinable
    public static func from(_ h: UnsafeMutableRawPointer?) -> Self {
        let base = h!.assumingMemoryBound(to: uv_handle_t.self)
        return Unmanaged<Self>.fromOpaque(base.pointee.data!).takeUnretainedValue()
    }

    /// Closes the handle. `completion` runs in the close callback, after which the
    /// memory is gone. Closing twice is a no-op.
    public func close(_ completion: (() -> Void)? = nil) {
        guard !isClosed else { return }
        isClosed = true
        onClose = completion
        willClose()
        uv_close(uvHandle) { h in
            let me = Unmanaged<UVHandle>.fromOpaque(h!.pointee.data!)
            let wrapper = me.takeUnretainedValue()
            UnsafeMutableRawPointer(wrapper.uvHandle).deallocate()
            let done = wrapper.onClose
            wrapper.onClose = nil
            me.release()  // the retain taken in opened()
            done?()
        }
    }

    /// Hook for subclasses: drop callbacks that would otherwise form cycles.
    open func willClose() {}

    /// Whether this handle keeps the loop alive (`uv_ref` / `uv_unref`). A closed handle
    /// reads as false and ignores writes: its memory may already be freed.
    public var keepsLoopAlive: Bool {
        get { !isClosed && uv_has_ref(uvHandle) != 0 }
        set {
            guard !isClosed else { return }
            if newValue { uv_ref(uvHandle) } else { uv_unref(uvHandle) }
        }
    }
}
