import Testing
@testable import EventLoop
import TestSupport

/// A client writes one JSON-RPC-sized line to a TCP server on 127.0.0.1 (ephemeral port)
/// and reads back exactly the same bytes.
@Test func tcpEchoRoundTrip() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    #expect(listener.isTCP)
    let port = try #require(listener.boundPort)
    #expect(port > 0)

    var serverSawPeer = ""
    try harness.acceptEach(on: listener) { connection in
        #expect(connection.isTCP)
        serverSawPeer = connection.peerDescription
        harness.echo(connection)
    }

    let message = Array(#"{"jsonrpc":"2.0","method":"ping","id":1}"#.utf8) + [10]
    let received = ReceivedBytes()
    var clientSawPeer = ""
    harness.connectTCP(port: port) { client in
        clientSawPeer = client.peerDescription
        harness.collect(client, count: message.count, into: received)
        client.write(message)
    }

    try harness.run()
    #expect(received.bytes == message)
    #expect(clientSawPeer == "127.0.0.1:\(port)")
    #expect(serverSawPeer.hasPrefix("127.0.0.1:"))
    #expect(serverSawPeer != "127.0.0.1:\(port)")  // the client's ephemeral port, not ours
}

/// Whether this host has an IPv6 loopback address to test against.
private let hasIPv6Loopback: Bool = {
    guard let loop = try? Loop() else { return false }
    defer {
        loop.run()
        try? loop.close()
    }
    guard let probe = try? Listener.tcp(loop: loop, host: "::1", port: 0) else { return false }
    probe.close()
    return true
}()

/// The same round trip over IPv6 loopback; peers are written `[::1]:port`.
@Test(.enabled(if: hasIPv6Loopback, "no IPv6 loopback on this host"))
func tcpEchoRoundTripOverIPv6() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "[::1]", port: 0))
    let port = try #require(listener.boundPort)

    var serverSawPeer = ""
    try harness.acceptEach(on: listener) { connection in
        serverSawPeer = connection.peerDescription
        harness.echo(connection)
    }

    let message = Array("over six".utf8)
    let received = ReceivedBytes()
    var clientSawPeer = ""
    harness.connectTCP(host: "::1", port: port) { client in
        clientSawPeer = client.peerDescription
        harness.collect(client, count: message.count, into: received)
        client.write(message)
    }

    try harness.run()
    #expect(received.bytes == message)
    #expect(clientSawPeer == "[::1]:\(port)")
    #expect(serverSawPeer.hasPrefix("[::1]:"))
}
