import Testing
@testable import EventLoop
import TestSupport

/// Closing a stream from inside its own read callback is safe: the bytes of that read
/// stay valid until the callback returns, no further read event arrives, and the peer
/// sees an orderly EOF.
@Test func closingFromInsideTheReadCallback() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    let port = try #require(listener.boundPort)

    let message = Array("close me".utf8)
    var serverEvents = 0
    var bytesAfterClose: [UInt8] = []
    var closedInCallback = false
    var closeCompleted = false

    try harness.acceptEach(on: listener) { connection in
        harness.read(connection, as: "server") { event in
            serverEvents += 1
            guard case .data(let bytes) = event else {
                Issue.record("unexpected server event \(event)")
                return
            }
            connection.close { closeCompleted = true }
            closedInCallback = connection.isClosed
            bytesAfterClose = Array(bytes)  // still valid: the callback has not returned
            connection.write(Array("not sent".utf8))
            connection.stopReading()
        }
    }

    var clientEvents: [String] = []
    harness.connectTCP(port: port) { client in
        harness.read(client, as: "client") { event in
            switch event {
            case .data(let bytes): clientEvents.append("data \(bytes.count)")
            case .eof: clientEvents.append("eof")
            case .error(let error): clientEvents.append("error \(error.name)")
            }
            harness.finish()
        }
        client.write(message)
    }

    try harness.run()
    #expect(serverEvents == 1)
    #expect(closedInCallback)
    #expect(closeCompleted)
    #expect(bytesAfterClose == message)
    #expect(clientEvents == ["eof"])
}
