import Testing
@testable import SecureStream
import TestSupport

/// A client and a server `TLSSession` wired to each other in memory, with no I/O, so a
/// test decides exactly where the ciphertext is cut.
private struct SessionPair {
    let client: TLSSession
    let server: TLSSession

    init() throws {
        server = try TLSSession(context: try TestCertificates.serverContext())
        client = try TLSSession(context: try TestCertificates.clientContext(), serverName: "localhost")
    }

    /// What `from` has for the peer.
    static func drain(_ from: TLSSession) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { from.takeCiphertext(into: $0) }
            if n == 0 { return out }
            out += buffer[..<n]
        }
    }

    /// Everything `session` decrypts now, and why it stopped.
    static func readAll(_ session: TLSSession) -> ([UInt8], TLSSession.Outcome) {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1000)
        while true {
            switch buffer.withUnsafeMutableBytes({ session.read(into: $0) }) {
            case .data(let n): out += buffer[..<n]
            case .none(let outcome): return (out, outcome)
            }
        }
    }

    /// Runs the handshake, handing each side the other's output one byte at a time, so
    /// every flight is cut at every byte. Returns how many bytes crossed.
    func handshakeByteByByte() -> Int {
        var crossed = 0
        for _ in 0..<50 {
            let clientOutcome = client.handshake()
            let toServer = Self.drain(client)
            for b in toServer { [b].withUnsafeBytes { server.receive($0) }; _ = server.handshake() }
            let toClient = Self.drain(server)
            for b in toClient { [b].withUnsafeBytes { client.receive($0) }; _ = client.handshake() }
            crossed += toServer.count + toClient.count
            if clientOutcome == nil, client.handshakeDone, server.handshakeDone, toServer.isEmpty, toClient.isEmpty {
                return crossed
            }
        }
        return crossed
    }
}

/// The handshake completes when each side gets the other's flights one byte at a time.
@Test func handshakeCompletesFedOneByteAtATime() throws {
    let pair = try SessionPair()
    let crossed = pair.handshakeByteByByte()
    #expect(pair.client.handshakeDone)
    #expect(pair.server.handshakeDone)
    #expect(crossed > 500)
}

/// A message whose records are cut at every byte boundary arrives exactly, in both
/// directions: before the cut nothing past the complete records comes out, after the
/// rest everything does.
@Test func recordsSplitAtEveryByteArriveExactly() throws {
    let pair = try SessionPair()
    _ = pair.handshakeByteByByte()
    try #require(pair.server.handshakeDone)
    // Two records: a long line and a short one, as replies are written.
    let message = Array((String(repeating: "{\"jsonrpc\":\"2.0\",\"result\":42,\"id\":7}", count: 500) + "\n").utf8)
    for (from, to) in [(pair.client, pair.server), (pair.server, pair.client)] {
        var checked = 0
        // A first round, whole, tells the length (sequence numbers make every record
        // count, so the peer reads it too).
        #expect(message.withUnsafeBytes { from.write($0) } == nil)
        let first = SessionPair.drain(from)
        first.withUnsafeBytes { to.receive($0) }
        #expect(SessionPair.readAll(to).0 == message)
        let length = first.count
        for cut in 1..<length {
            #expect(message.withUnsafeBytes { from.write($0) } == nil)
            let ciphertext = SessionPair.drain(from)
            #expect(ciphertext.count == length)
            ciphertext[..<cut].withUnsafeBytes { to.receive($0) }
            let (head, firstOutcome) = SessionPair.readAll(to)
            ciphertext[cut...].withUnsafeBytes { to.receive($0) }
            let (tail, secondOutcome) = SessionPair.readAll(to)
            if head + tail == message, firstOutcome == .needsInput, secondOutcome == .needsInput,
               head.count < message.count {
                checked += 1
            } else {
                Issue.record("cut at \(cut): got \(head.count)+\(tail.count) bytes, outcomes \(firstOutcome), \(secondOutcome)")
                return
            }
        }
        #expect(checked == length - 1)
    }
}

/// close_notify ends the peer's input: `read` says `.closedByPeer` after the data.
@Test func closeNotifyEndsThePeersInput() throws {
    let pair = try SessionPair()
    _ = pair.handshakeByteByByte()
    let message = Array("last words\n".utf8)
    #expect(message.withUnsafeBytes { pair.client.write($0) } == nil)
    pair.client.shutdown()
    SessionPair.drain(pair.client).withUnsafeBytes { pair.server.receive($0) }
    let (data, outcome) = SessionPair.readAll(pair.server)
    #expect(data == message)
    #expect(outcome == .closedByPeer)
    // The server may still answer after the client's close_notify (a half-close).
    #expect(Array("reply\n".utf8).withUnsafeBytes { pair.server.write($0) } == nil)
}

/// Bytes that are not TLS make the server's handshake fail with OpenSSL's reason.
@Test func garbageFailsTheHandshakeWithAReason() throws {
    let server = try TLSSession(context: try TestCertificates.serverContext())
    Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8).withUnsafeBytes { server.receive($0) }
    guard case .failed(let reason)? = server.handshake() else {
        Issue.record("expected a failed handshake")
        return
    }
    #expect(reason.hasPrefix("TLS handshake: error:"))
    #expect(reason.contains("wrong version number") || reason.contains("http request"), "\(reason)")
}
