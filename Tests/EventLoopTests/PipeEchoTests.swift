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

    try harness.acceptEach(on: listener) { connection in
        #expect(!connection.isTCP)
        #expect(connection.peerDescription == "unix")
        harness.echo(connection)
    }

    let message = patternBytes(100_000)  // more than one read's worth
    let received = ReceivedBytes()
    harness.connectPipe(path: path) { client in
        harness.collect(client, count: message.count, into: received)
        client.write(message)
    }

    try harness.run()
    #expect(received.bytes == message)
    #expect(!pathExists(path), "libuv unlinks the bound path on close")
}
