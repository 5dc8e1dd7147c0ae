import EventLoop
import Testing
@testable import SecureStream
import TestSupport

/// What a server TLS stream's reading owner got, and what the client saw; the test
/// ends when both sides have seen the end.
private final class Outcome {
    let harness: LoopHarness
    var events: [String] = []
    var error: UVError?
    var clientEnd: String?

    init(_ harness: LoopHarness) { self.harness = harness }

    func clientEnded(_ how: String) {
        clientEnd = how
        finishIfBoth()
    }

    func finishIfBoth() {
        if clientEnd != nil, !events.isEmpty { harness.finish() }
    }
}

/// Starts a TLS listener whose streams report their first read event into `outcome`
/// and end the test.
private func listen(_ harness: LoopHarness, _ outcome: Outcome, handshakeTimeout: UInt64 = 10_000) throws -> Int {
    try harness.tlsListener(context: try TestCertificates.serverContext(), handshakeTimeout: handshakeTimeout) { server in
        harness.attempt("server startReading") {
            try server.startReading { event in
                switch event {
                case .data(let bytes): outcome.events.append("data \(bytes.count)")
                case .eof: outcome.events.append("eof")
                case .error(let error):
                    outcome.events.append("error")
                    outcome.error = error
                    #expect(server.isClosed, "the stream closes itself before reporting")
                    #expect(server.pendingWriteBytes == 0)
                }
                outcome.finishIfBoth()
            }
        }
        // A reply written before the handshake: discarded with the failed handshake.
        server.write(Array("too early\n".utf8))
    }
}

/// Connects a plain TCP client to `port`, which reports how its input ended into
/// `outcome` and calls `onData` for any bytes; `connected` runs once it is reading.
private func plainClient(_ harness: LoopHarness, _ outcome: Outcome, port: Int, onData: @escaping () -> Void,
                         connected: @escaping (Stream) -> Void = { _ in }) {
    Stream.connectTCP(loop: harness.loop, host: "127.0.0.1", port: port) { result in
        guard case .success(let client) = result else { return harness.finish() }
        harness.track(client)
        harness.attempt("client") {
            try client.startReading { event in
                switch event {
                case .data: onData()
                case .eof: outcome.clientEnded("eof")
                case .error(let error): outcome.clientEnded(error.name)
                }
            }
        }
        connected(client)
    }
}

/// Plain text to a TLS port: the handshake fails at once with OpenSSL's reason, the
/// server stream closes itself and tells its owner; nothing crashes, no handle is left.
@Test func plaintextClientIsClosed() throws {
    let harness = try LoopHarness(deadlineMilliseconds: 30_000)
    let outcome = Outcome(harness)
    let port = try listen(harness, outcome)
    plainClient(harness, outcome, port: port, onData: {}) { client in  // data: an alert record, perhaps
        client.write(Array("{\"jsonrpc\":\"2.0\",\"method\":\"server.info\",\"id\":1}\n".utf8))
    }
    try harness.run()
    #expect(outcome.events == ["error"])
    #expect(outcome.error?.name == "EPROTO")
    #expect(outcome.error?.operation.hasPrefix("TLS handshake: error:") == true, "\(String(describing: outcome.error))")
    #expect(outcome.clientEnd == "eof" || outcome.clientEnd == "ECONNRESET")
}

/// A client that connects and sends nothing is closed when the handshake deadline
/// passes, with ETIMEDOUT.
@Test func silentClientIsClosedAtTheDeadline() throws {
    let harness = try LoopHarness(deadlineMilliseconds: 30_000)
    let outcome = Outcome(harness)
    let port = try listen(harness, outcome, handshakeTimeout: 200)
    plainClient(harness, outcome, port: port, onData: { Issue.record("data from a server that never finished a handshake") })
    try harness.run()
    #expect(outcome.events == ["error"])
    #expect(outcome.error?.name == "ETIMEDOUT")
    #expect(outcome.error?.operation.contains("did not finish within 200 ms") == true)
    #expect(outcome.clientEnd == "eof")
}

/// A client that does not trust the server's CA aborts the handshake; its own stream
/// reports the verification failure and the server's owner gets an error too.
@Test func clientWithTheWrongCAFailsBothSides() throws {
    let harness = try LoopHarness(deadlineMilliseconds: 30_000)
    let outcome = Outcome(harness)
    let port = try listen(harness, outcome)
    var clientError: UVError?
    harness.tlsClient(port: port, context: try TestCertificates.clientContext(trusting: "untrusted_ca")) { client in
        harness.attempt("client") {
            try client.startReading { event in
                if case .error(let error) = event { clientError = error }
                outcome.clientEnded("\(event)")
            }
        }
    }
    try harness.run()
    #expect(outcome.events == ["error"])
    #expect(outcome.error?.operation.contains("alert") == true, "\(String(describing: outcome.error))")
    #expect(clientError?.operation.hasPrefix("SSL certificate problem: unable to get local issuer certificate") == true,
            "the verification result says why: \(String(describing: clientError))")
}

/// An owner that stopped reading before the handshake ended (a connection that waits
/// for its replies to drain before it closes) still hears of a handshake that times
/// out, through `onWriteError`: told nothing, it would wait for a drain that never
/// comes, and its connection would be counted for ever.
@Test func anOwnerThatIsNotReadingIsToldOfTheTimeout() throws {
    let harness = try LoopHarness(deadlineMilliseconds: 30_000)
    let outcome = Outcome(harness)
    var told: [String] = []
    let port = try harness.tlsListener(context: try TestCertificates.serverContext(), handshakeTimeout: 200) { server in
        harness.attempt("server startReading") {
            try server.startReading { event in told.append("read \(event)") }
        }
        server.write(Array("waits for the handshake\n".utf8))
        server.stopReading()
        server.onDrain = { told.append("drain") }
        server.onWriteError = { error in
            told.append("write error \(error.name)")
            #expect(server.isClosed)
            outcome.events.append("told")
            outcome.finishIfBoth()
        }
    }
    plainClient(harness, outcome, port: port, onData: { Issue.record("data from a server that never finished a handshake") })
    try harness.run()
    #expect(told == ["write error ETIMEDOUT"])
    #expect(outcome.clientEnd == "eof")
}
