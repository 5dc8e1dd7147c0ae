import Testing
@testable import EventLoop
import TestSupport

/// A client that sends its request and then shuts down its write side still gets its
/// reply: the server sees the data, then EOF, then answers, then half-closes too.
@Test func halfClosedClientStillGetsItsReply() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    let port = try #require(listener.boundPort)

    let request = Array(#"{"jsonrpc":"2.0","method":"sum","params":[1,2],"id":7}"#.utf8)
    let reply = Array(#"{"jsonrpc":"2.0","result":3,"id":7}"#.utf8)
    var serverEvents: [String] = []
    var serverReceived: [UInt8] = []
    var serverShutdownResult: UVError?? = .none

    try harness.acceptEach(on: listener) { connection in
        harness.read(connection, as: "server") { event in
            switch event {
            case .data(let bytes):
                serverEvents.append("data")
                serverReceived += bytes
            case .eof:
                serverEvents.append("eof")
                // The request is complete only now; answer, then half-close.
                connection.write(reply)
                connection.shutdown { serverShutdownResult = .some($0) }
            case .error(let error):
                serverEvents.append("error \(error.name)")
                harness.finish()
            }
        }
    }

    var clientReceived: [UInt8] = []
    var clientSawEOF = false
    var clientShutdownResult: UVError?? = .none
    harness.connectTCP(port: port) { client in
        harness.read(client, as: "client") { event in
            switch event {
            case .data(let bytes): clientReceived += bytes
            case .eof:
                clientSawEOF = true
                harness.finish()
            case .error(let error):
                Issue.record("client read error: \(error)")
                harness.finish()
            }
        }
        client.write(request)
        client.shutdown { clientShutdownResult = .some($0) }
        client.write(Array("ignored after shutdown".utf8))
    }

    try harness.run()
    #expect(serverReceived == request)
    #expect(serverEvents.last == "eof")
    #expect(clientReceived == reply)
    #expect(clientSawEOF)
    #expect(clientShutdownResult == .some(nil))
    #expect(serverShutdownResult == .some(nil))
}
