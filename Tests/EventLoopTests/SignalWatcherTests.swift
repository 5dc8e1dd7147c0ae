import Testing
@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A signal sent to the process arrives as a callback on the loop.
@Test func signalWatcherReceivesSIGUSR1() throws {
    let harness = try LoopHarness()
    var deliveries = 0
    let watcher = harness.track(try SignalWatcher(loop: harness.loop, signal: SIGUSR1) {
        deliveries += 1
        harness.finish()
    })
    #expect(watcher.signal == SIGUSR1)
    // libuv's handler is installed now, so this cannot take the default action (exit).
    #expect(kill(getpid(), SIGUSR1) == 0)
    try harness.run()
    #expect(deliveries == 1)
}

/// A signal that cannot be caught is refused with EINVAL, and nothing is left open.
@Test func signalWatcherRejectsSIGKILL() throws {
    let harness = try LoopHarness()
    let error = #expect(throws: UVError.self) {
        _ = try SignalWatcher(loop: harness.loop, signal: SIGKILL) {}
    }
    #expect(error?.name == "EINVAL")
    harness.finish()
    try harness.run()
}
