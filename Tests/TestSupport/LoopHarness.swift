import CUV
import EventLoop
#if canImport(Glibc)
import Glibc
#endif

/// One real loop for one test, with a deadline so that no test can hang.
///
/// A test tracks the handles it makes (`track`, or `onFinish` for anything else that
/// must be closed, such as a stream layered on a handle), calls `finish()` when it has
/// seen what it waited for, and ends with `try run()`, which runs the loop until every
/// handle has closed. What goes wrong inside callbacks cannot be thrown from there: the
/// harness collects it (`attempt`, `fail`, the deadline passing) and `run()` throws it,
/// together with any handle left open, so that the test fails with every reason. If the
/// deadline passes first, the harness closes what was tracked and then every other
/// handle still open on the loop, so the test fails instead of hanging.
public final class LoopHarness {
    public let loop: Loop
    private let deadline: EventLoop.Timer
    private var closers: [() -> Void] = []
    private var failures: [String] = []

    /// What `run()` throws: everything that went wrong, in order.
    public struct Failure: Error, CustomStringConvertible {
        public let reasons: [String]
        public var description: String { reasons.joined(separator: "; ") }
    }

    public init(deadlineMilliseconds: UInt64 = 10_000) throws {
        // Writing to a reset peer raises SIGPIPE; the server ignores it in main, and so
        // must the test process.
        signal(SIGPIPE, SIG_IGN)
        loop = try Loop()
        deadline = try EventLoop.Timer(loop: loop)
        deadline.start(timeout: deadlineMilliseconds) { [unowned self] in
            fail("deadline of \(deadlineMilliseconds) ms passed; closing every handle")
            closeEverything()
        }
    }

    /// Remembers `handle` so that `finish()` closes it.
    @discardableResult
    public func track<H: UVHandle>(_ handle: H) -> H {
        onFinish { handle.close() }
        return handle
    }

    /// Remembers `close` to run at `finish()`, in the order registered.
    public func onFinish(_ close: @escaping () -> Void) {
        closers.append(close)
    }

    /// Closes everything tracked. The deadline stays armed but no longer keeps the loop
    /// running, so `run()` returns as soon as the closes are done — or, if the test left
    /// an untracked handle open, the deadline still fires and reports it.
    public func finish() {
        let all = closers
        closers = []
        for close in all { close() }
        deadline.keepsLoopAlive = false
    }

    /// Records `reason` for `run()` to throw, and finishes the test.
    public func fail(_ reason: String) {
        failures.append(reason)
        finish()
    }

    /// Runs a throwing step inside a callback, recording a failure instead of crashing.
    public func attempt(_ what: String, _ body: () throws -> Void) {
        do { try body() } catch { fail("\(what) failed: \(error)") }
    }

    /// Runs the loop to completion and closes it; throws `Failure` if anything was
    /// recorded or a handle is left open.
    public func run() throws {
        loop.run()
        deadline.close()
        loop.run()
        let left = loop.handleNames()
        if left.isEmpty {
            try loop.close()
        } else {
            failures.append("handles left: \(left)")
        }
        if !failures.isEmpty { throw Failure(reasons: failures) }
    }

    /// Closes whatever handle is still open on the loop through its wrapper.
    private func closeEverything() {
        final class Found { var wrappers: [UVHandle] = [] }
        let found = Found()
        withExtendedLifetime(found) {
            uv_walk(loop.raw, { handle, arg in
                guard let handle, uv_is_closing(handle) == 0, let data = handle.pointee.data else { return }
                let found = Unmanaged<Found>.fromOpaque(arg!).takeUnretainedValue()
                found.wrappers.append(Unmanaged<UVHandle>.fromOpaque(data).takeUnretainedValue())
            }, Unmanaged.passUnretained(found).toOpaque())
        }
        for wrapper in found.wrappers { wrapper.close() }
    }
}
