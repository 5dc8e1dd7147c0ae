import EventLoop
import Testing
@testable import SecureStream
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// 8 MiB each way through real TLS streams on loopback, written before the handshake
/// has finished and in one go: the server echoes what it reads; the client checks every
/// byte, then closes with close_notify, which the server reads as `.eof`. Back-pressure
/// is visible: the writer's `pendingWriteBytes` is above 0 after the write, and its
/// `onDrain` runs once everything is out. The loop closes with no handle left.
@Test func eightMiBEachWayArriveExactly() throws {
    let total = 8 << 20
    let payload = patternBytes(total)
    let harness = try LoopHarness(deadlineMilliseconds: 120_000)
    var serverEchoed = 0
    var serverSawEOF = false
    let port = try harness.tlsListener(context: try TestCertificates.serverContext()) { server in
        server.onWriteError = { error in
            Issue.record("server write error: \(error)")
            harness.finish()
        }
        harness.attempt("server startReading") {
            try server.startReading { event in
                switch event {
                case .data(let bytes):
                    serverEchoed += bytes.count
                    server.write(bytes)
                case .eof:
                    serverSawEOF = true
                    harness.finish()
                case .error(let error):
                    Issue.record("server read error: \(error)")
                    harness.finish()
                }
            }
        }
    }
    var received = 0
    var mismatchAt: Int?
    var pendingAfterWrite = -1
    var drains = 0
    harness.tlsClient(port: port, context: try TestCertificates.clientContext()) { client in
        client.onDrain = { drains += 1 }
        harness.attempt("client startReading") {
            try client.startReading { event in
                switch event {
                case .data(let bytes):
                    let matches = payload.withUnsafeBytes { expected in
                        received + bytes.count <= total
                            && memcmp(expected.baseAddress! + received, bytes.baseAddress!, bytes.count) == 0
                    }
                    if !matches, mismatchAt == nil { mismatchAt = received }
                    received += bytes.count
                    // Everything back: close, which sends close_notify to the server.
                    if received >= total { client.close() }
                case .eof, .error:
                    Issue.record("client read ended early: \(event)")
                    harness.finish()
                }
            }
        }
        #expect(!client.handshakeDone)
        client.write(payload)
        pendingAfterWrite = client.pendingWriteBytes
    }
    try harness.run()
    #expect(received == total)
    #expect(mismatchAt == nil, "first mismatch at byte \(mismatchAt ?? -1)")
    #expect(serverEchoed == total)
    #expect(serverSawEOF)
    #expect(pendingAfterWrite == total, "held whole until the handshake finishes")
    #expect(drains == 1)
}

/// A server that stops reading leaves the client's bytes in the kernel, and picks up
/// exactly where it stopped when it reads again, including bytes OpenSSL had already
/// decrypted: nothing is lost or repeated across pauses.
@Test func pausedReadingResumesWithoutLoss() throws {
    let total = 2 << 20
    let payload = patternBytes(total)
    let harness = try LoopHarness(deadlineMilliseconds: 60_000)
    let resume = try EventLoop.Timer(loop: harness.loop)
    harness.track(resume)
    var received: [UInt8] = []
    var pauses = 0
    var onRead: ((EventLoop.Stream.ReadEvent) -> Void)?
    let port = try harness.tlsListener(context: try TestCertificates.serverContext()) { server in
        onRead = { event in
            switch event {
            case .data(let bytes):
                received += bytes
                if received.count >= total { return harness.finish() }
                // Pause after every delivery; resume on the next turn.
                server.stopReading()
                pauses += 1
                resume.start(timeout: 0) {
                    guard let onRead else { return }
                    harness.attempt("resume") { try server.startReading(onRead) }
                }
            case .eof, .error:
                Issue.record("server read ended early: \(event)")
                harness.finish()
            }
        }
        guard let onRead else { return }
        harness.attempt("server startReading") { try server.startReading(onRead) }
    }
    harness.tlsClient(port: port, context: try TestCertificates.clientContext()) { client in
        client.write(payload)
    }
    try harness.run()
    onRead = nil
    #expect(received == payload)
    #expect(pauses > 10)
}
