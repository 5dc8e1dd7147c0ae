import Testing
@testable import EventLoop
import TestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Binding a TCP port another listener holds throws EADDRINUSE from `Listener.tcp`
/// itself (libuv would otherwise hold the error back until `listen`).
@Test func busyPortThrowsEADDRINUSE() throws {
    let harness = try LoopHarness()
    let first = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    try first.listen { _ in }
    let port = try #require(first.boundPort)
    let error = #expect(throws: UVError.self) {
        _ = try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: port)
    }
    #expect(error?.name == "EADDRINUSE")
    harness.finish()
    try harness.run()  // also finishes closing the half-made second listener
}

/// A host that is not an IP literal, or a port out of range, is refused with EINVAL
/// before anything reaches the loop. IPv6 literals work, with or without brackets.
@Test func listenerAddressValidation() throws {
    let harness = try LoopHarness()
    for (host, port) in [("localhost", 0), ("127.0.0.1", 70000), ("127.0.0.1", -1), ("", 0)] {
        let error = #expect(throws: UVError.self) {
            _ = try Listener.tcp(loop: harness.loop, host: host, port: port)
        }
        #expect(error?.name == "EINVAL", "\(host):\(port)")
    }
    // IPv6 loopback may be disabled on a host; only check the literal parses.
    if let v6 = try? Listener.tcp(loop: harness.loop, host: "[::1]", port: 0) {
        harness.track(v6)
        #expect((v6.boundPort ?? 0) > 0)
    }
    harness.finish()
    try harness.run()
}

/// A pipe path that already exists is EADDRINUSE; the existing file is left alone.
@Test func pipePathInUseThrows() throws {
    let directory = try makeTemporaryDirectory()
    defer { rmdir(directory) }
    let path = directory + "/busy.sock"
    let harness = try LoopHarness()
    let first = harness.track(try Listener.pipe(loop: harness.loop, path: path))
    try first.listen { _ in }
    let error = #expect(throws: UVError.self) {
        _ = try Listener.pipe(loop: harness.loop, path: path)
    }
    #expect(error?.name == "EADDRINUSE")
    harness.finish()
    try harness.run()
    #expect(!pathExists(path))
}
