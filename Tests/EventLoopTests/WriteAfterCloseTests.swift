import Testing
@testable import EventLoop
import TestSupport

/// Writes after `close()` are ignored: the peer gets exactly what was written before,
/// then EOF, and `pendingWriteBytes` reads 0.
@Test func writesAfterCloseAreIgnored() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    let port = try #require(listener.boundPort)

    var pendingAfterClose = -1
    try harness.acceptEach(on: listener) { connection in
        connection.write(Array("hello".utf8))  // small: the kernel takes it at once
        connection.close()
        connection.write(Array(" world".utf8))
        connection.write(patternBytes(1 << 20))
        pendingAfterClose = connection.pendingWriteBytes
        connection.setNoDelay(false)
        _ = connection.peerDescription
    }

    var received: [UInt8] = []
    var sawEOF = false
    harness.connectTCP(port: port) { client in
        harness.read(client, as: "client") { event in
            switch event {
            case .data(let bytes): received += bytes
            case .eof:
                sawEOF = true
                harness.finish()
            case .error(let error):
                Issue.record("client read error: \(error)")
                harness.finish()
            }
        }
    }

    try harness.run()
    #expect(received == Array("hello".utf8))
    #expect(sawEOF)
    #expect(pendingAfterClose == 0)
}

/// Closing a stream while a `uv_write` is in flight discards the queued bytes: libuv
/// cancels the request (ECANCELED) during the close, which must neither crash, touch
/// freed memory, nor be reported as a write error or a drain.
@Test func closingWithAWriteInFlightDiscardsIt() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))

    var pendingBeforeClose = 0
    var pendingAfterClose = -1
    var callbacksAfterClose = 0

    try harness.connectedPair(listener) { server, _ in
        server.onWriteError = { _ in callbacksAfterClose += 1 }
        server.onDrain = { callbacksAfterClose += 1 }
        server.write(patternBytes(8 << 20))  // the client never reads: most of it queues
        server.write(Array("and more".utf8))
        pendingBeforeClose = server.pendingWriteBytes
        server.close { harness.finish() }
        pendingAfterClose = server.pendingWriteBytes
        server.write(Array("after".utf8))
    }

    try harness.run()
    #expect(pendingBeforeClose > 0)
    #expect(pendingAfterClose == 0)
    #expect(callbacksAfterClose == 0)
}
