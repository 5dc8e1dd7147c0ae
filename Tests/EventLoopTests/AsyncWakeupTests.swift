import Foundation
import Synchronization
import Testing
@testable import EventLoop
import TestSupport

/// A flag other threads can set, for tests.
private final class SharedFlag: Sendable {
    let value = Atomic<Bool>(false)
}

/// Sends from another thread wake the loop; many sends may coalesce into fewer callbacks,
/// and a send made after the sender's last state change is always followed by one.
@Test func asyncWakeupFromAnotherThread() throws {
    let harness = try LoopHarness()
    let senderFinished = SharedFlag()
    var wakeups = 0
    let wakeup = harness.track(try AsyncWakeup(loop: harness.loop) {
        wakeups += 1
        if senderFinished.value.load(ordering: .acquiring) { harness.finish() }
    })
    let sender = wakeup.sender
    let thread = Thread {
        for _ in 0..<1000 { sender.send() }
        senderFinished.value.store(true, ordering: .releasing)
        sender.send()
    }
    thread.start()
    try harness.run()
    #expect(wakeups >= 1)
    #expect(wakeups <= 1001)
}

/// The race rule: a sender may keep sending while, and after, the loop closes the
/// wakeup. Sends that lose the race do nothing; nothing touches freed memory.
@Test func sendsRacingCloseAreHarmless() throws {
    let harness = try LoopHarness()
    let wakeup = harness.track(try AsyncWakeup(loop: harness.loop) { harness.finish() })
    let sender = wakeup.sender
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        for _ in 0..<200_000 { sender.send() }
        done.signal()
    }
    thread.start()
    try harness.run()  // closes the wakeup on its first callback, frees the handle
    #expect(wakeup.isClosed)
    sender.send()  // from the loop's thread, after the free
    #expect(done.wait(timeout: .now() + 30) == .success, "sender thread did not finish")
}
