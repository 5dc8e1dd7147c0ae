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
    try listener.listen { result in
        guard case .success(let connection) = result else {
            Issue.record("accept failed: \(result)")
            return harness.finish()
        }
        harness.track(connection)
        #expect(connection.isTCP)
        serverSawPeer = connection.peerDescription
        echo(connection, harness)
    }

    let message = Array(#"{"jsonrpc":"2.0","method":"ping","id":1}"#.utf8) + [10]
    var received: [UInt8] = []
    var clientSawPeer = ""
    Stream.connectTCP(loop: harness.loop, host: "127.0.0.1", port: port) { result in
        guard case .success(let client) = result else {
            Issue.record("connect failed: \(result)")
            return harness.finish()
        }
        harness.track(client)
        clientSawPeer = client.peerDescription
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
    try listener.listen { result in
        guard case .success(let connection) = result else {
            Issue.record("accept failed: \(result)")
            return harness.finish()
        }
        harness.track(connection)
        serverSawPeer = connection.peerDescription
        echo(connection, harness)
    }

    let message = Array("over six".utf8)
    var received: [UInt8] = []
    var clientSawPeer = ""
    Stream.connectTCP(loop: harness.loop, host: "::1", port: port) { result in
        guard case .success(let client) = result else {
            Issue.record("connect failed: \(result)")
            return harness.finish()
        }
        harness.track(client)
        clientSawPeer = client.peerDescription
        harness.attempt("client startReading") {
            try client.startReading { event in
                guard case .data(let bytes) = event else {
                    Issue.record("client read ended early: \(event)")
                    return harness.finish()
                }
                received += bytes
                if received.count >= message.count { harness.finish() }
            }
        }
        client.write(message)
    }

    try harness.run()
    #expect(received == message)
    #expect(clientSawPeer == "[::1]:\(port)")
    #expect(serverSawPeer.hasPrefix("[::1]:"))
}
