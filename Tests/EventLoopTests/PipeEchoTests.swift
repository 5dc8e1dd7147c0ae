import Testing
@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// The same echo round trip over a Unix-domain socket in a private temporary directory.
/// libuv removes the socket file when the listener closes, so the directory is empty
/// afterwards.
@Test func pipeEchoRoundTrip() throws {
    let directory = try makeTemporaryDirectory()
    defer { rmdir(directory) }
    let path = directory + "/xhrpc.sock"

    let harness = try LoopHarness()
    let listener = harness.track(try Listener.pipe(loop: harness.loop, path: path))
    #expect(!listener.isTCP)
    #expect(listener.boundPort == nil)
    #expect(pathExists(path))

    try listener.listen { result in
        guard case .success(let connection) = result else {
            Issue.record("accept failed: \(result)")
            return harness.finish()
        }
        harness.track(connection)
        #expect(!connection.isTCP)
        #expect(connection.peerDescription == "unix")
        echo(connection, harness)
    }

    let message = patternBytes(100_000)  // more than one read's worth
    var received: [UInt8] = []
    Stream.connectPipe(loop: harness.loop, path: path) { result in
        guard case .success(let client) = result else {
            Issue.record("connect failed: \(result)")
            return harness.finish()
        }
        harness.track(client)
        harness.attempt("client startReading") {
            try client.startReading { event in
                switch event {
                case .data(let bytes):
                    received += bytes
                    if received.count >= message.count { harness.finish() }
                case .eof, .error:
                    Issue.record("client read ended early: \(event)")
                    harness.finish()
                }
            }
        }
        client.write(message)
    }

    try harness.run()
    #expect(received == message)
    #expect(!pathExists(path), "libuv unlinks the bound path on close")
}
