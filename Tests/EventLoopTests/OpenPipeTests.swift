import Testing
@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Makes a connected Unix socket pair, or records why not.
private func socketPair() throws -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    let rc = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
    try #require(rc == 0, "socketpair failed: errno \(errno)")
    return (fds[0], fds[1])
}

/// Both ends of a socket pair wrapped with `openPipe` talk to each other like an accepted
/// connection and its client: data each way, then EOF after a half-close. This is how the
/// fuzzer serves a connection without any listener.
@Test func openedSocketPairCarriesDataBothWaysAndEOF() throws {
    let harness = try LoopHarness()
    let (a, b) = try socketPair()
    let server = harness.track(try Stream.openPipe(loop: harness.loop, fd: a))
    let client = harness.track(try Stream.openPipe(loop: harness.loop, fd: b))
    #expect(!server.isTCP && server.peerDescription == "unix")

    var serverReceived: [UInt8] = []
    var clientReceived: [UInt8] = []
    try server.startReading { event in
        switch event {
        case .data(let bytes): serverReceived += bytes
        case .eof:
            server.write(Array("pong".utf8))
            server.shutdown { _ in }
        case .error(let e):
            Issue.record("server read error: \(e)")
            harness.finish()
        }
    }
    try client.startReading { event in
        switch event {
        case .data(let bytes): clientReceived += bytes
        case .eof: harness.finish()
        case .error(let e):
            Issue.record("client read error: \(e)")
            harness.finish()
        }
    }
    client.write(Array("ping".utf8))
    client.shutdown { error in #expect(error == nil) }
    try harness.run()
    #expect(String(decoding: serverReceived, as: UTF8.self) == "ping")
    #expect(String(decoding: clientReceived, as: UTF8.self) == "pong")
}

/// A descriptor libuv cannot open is reported, and the caller keeps it: nothing is left
/// on the loop.
@Test func openPipeOnABadDescriptorThrowsAndLeavesNothingOpen() throws {
    let harness = try LoopHarness()
    #expect(throws: UVError.self) { _ = try Stream.openPipe(loop: harness.loop, fd: -1) }
    harness.finish()
    try harness.run()
}
