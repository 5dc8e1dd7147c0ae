import Testing
@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// 16 MiB written in one loop turn — one large write, then thousands of small ones — to
/// a peer that reads one buffer per loop turn. Everything arrives byte-exact and in
/// order, `pendingWriteBytes` only falls while nothing new is written and ends at 0,
/// and `onDrain` fires exactly once.
@Test func sixteenMiBToSlowReaderArrivesExactly() throws {
    let total = 16 << 20
    let payload = patternBytes(total)
    let harness = try LoopHarness(deadlineMilliseconds: 60_000)
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    let port = try #require(listener.boundPort)

    let resume = harness.track(try Timer(loop: harness.loop))
    var server: Stream?
    var drains = 0
    var pendingAtDrain = -1
    var pendingAfterWriting = -1
    var received = 0
    var mismatchAt: Int?
    var pendingNeverRose = true
    var lastPending = Int.max
    // Restarted after each pause, so it refers to itself: cleared at the end to free it.
    var onRead: ((Stream.ReadEvent) -> Void)?

    func finishIfDone() {
        if received == total && drains > 0 { harness.finish() }
    }

    try harness.acceptEach(on: listener) { connection in
        server = connection
        connection.onWriteError = { error in
            Issue.record("unexpected write error: \(error)")
            harness.finish()
        }
        connection.onDrain = {
            drains += 1
            pendingAtDrain = connection.pendingWriteBytes
            finishIfDone()
        }
        payload.withUnsafeBytes { bytes in
            var offset = 0
            var chunk = 1 << 20  // first a large write (try_write takes part, the rest is copied)
            while offset < total {
                let end = min(offset + chunk, total)
                connection.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<end]))
                offset = end
                chunk = 4099  // then many small ones, which coalesce behind the first
                #expect(connection.pendingWriteBytes <= offset)
            }
        }
        pendingAfterWriting = connection.pendingWriteBytes
    }

    harness.connectTCP(port: port) { client in
        onRead = { event in
            switch event {
            case .data(let bytes):
                let matches = payload.withUnsafeBytes { expected in
                    received + bytes.count <= total
                        && memcmp(expected.baseAddress! + received, bytes.baseAddress!, bytes.count) == 0
                }
                if !matches && mismatchAt == nil { mismatchAt = received }
                received += bytes.count
                if let server {
                    let pending = server.pendingWriteBytes
                    if pending > lastPending { pendingNeverRose = false }
                    lastPending = pending
                }
                finishIfDone()
                // Slow: one buffer per loop turn, so the writer keeps meeting a full socket.
                client.stopReading()
                resume.start(timeout: 0) {
                    guard let onRead else { return }
                    harness.attempt("resume reading") { try client.startReading(onRead) }
                }
            case .eof, .error:
                Issue.record("client read ended early: \(event)")
                harness.finish()
            }
        }
        guard let onRead else { return }
        harness.read(client, as: "client", onRead)
    }

    try harness.run()
    onRead = nil
    #expect(received == total)
    #expect(mismatchAt == nil, "first mismatch at byte \(mismatchAt ?? -1)")
    #expect(pendingAfterWriting > 0, "16 MiB cannot all fit in the socket buffers")
    #expect(pendingAfterWriting <= total)
    #expect(pendingNeverRose)
    #expect(drains == 1)
    #expect(pendingAtDrain == 0)
}
