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
/// before anything reaches the loop. IPv6 literals parse, with or without brackets, and
/// bind where the host has IPv6 loopback.
@Test func listenerAddressValidation() throws {
    let harness = try LoopHarness()
    for (host, port) in [("localhost", 0), ("127.0.0.1", 70000), ("127.0.0.1", -1), ("", 0)] {
        let error = #expect(throws: UVError.self) {
            _ = try Listener.tcp(loop: harness.loop, host: host, port: port)
        }
        #expect(error?.name == "EINVAL", "\(host):\(port)")
    }
    // The IPv6 literals parse, bracketed or not, on every host.
    for host in ["[::1]", "::1", "[0:0:0:0:0:0:0:1]"] {
        var address = try SocketAddress.parse(host: host, port: 4242)
        #expect(address.ss_family == sa_family_t(AF_INET6), "\(host)")
        #expect(withUnsafePointer(to: &address) { SocketAddress.describe($0) } == "[::1]:4242", "\(host)")
    }
    // Binding one needs IPv6 loopback, which a host may have disabled: then the bind
    // itself fails (EADDRNOTAVAIL), never the parse (EINVAL).
    do {
        let v6 = harness.track(try Listener.tcp(loop: harness.loop, host: "[::1]", port: 0))
        #expect((v6.boundPort ?? 0) > 0)
    } catch let error as UVError {
        #expect(error.name != "EINVAL", "[::1] refused as if it were not a literal: \(error)")
        #expect(!ipv6LoopbackWorks(), "binding [::1] failed on a host where IPv6 loopback works: \(error)")
    }
    harness.finish()
    try harness.run()
}

/// Whether this host can bind a TCP socket to ::1, asked of the kernel directly.
func ipv6LoopbackWorks() -> Bool {
    let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in6()
    address.sin6_family = sa_family_t(AF_INET6)
    address.sin6_addr = in6addr_loopback
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0
        }
    }
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
