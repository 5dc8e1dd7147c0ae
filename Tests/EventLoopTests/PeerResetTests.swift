import Testing
@testable import EventLoop
import TestSupport

/// When the peer resets the connection while the server still has megabytes queued,
/// the write error is reported exactly once through `onWriteError`; later writes are
/// ignored and `pendingWriteBytes` reads 0.
@Test func peerResetWhileWritingReportsOnce() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))

    var errors: [UVError] = []
    var pendingAfterError = -1
    var drains = 0

    try harness.connectedPair(listener) { server, client in
        server.onDrain = { drains += 1 }
        server.onWriteError = { error in
            errors.append(error)
            server.write(Array("after the error".utf8))
            pendingAfterError = server.pendingWriteBytes
            harness.finish()
        }
        server.write(patternBytes(8 << 20))  // more than the socket buffers hold
        #expect(server.pendingWriteBytes > 0)
        // The client closes with unread bytes in its receive queue, so its kernel answers
        // with a reset rather than a FIN.
        client.close()
    }

    try harness.run()
    #expect(errors.count == 1)
    #expect(["ECONNRESET", "EPIPE"].contains(errors.first?.name ?? "none"), "got \(errors)")
    #expect(pendingAfterError == 0)
    #expect(drains == 0)
}
