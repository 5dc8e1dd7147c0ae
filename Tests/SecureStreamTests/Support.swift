import EventLoop
import Foundation
import Testing
@testable import SecureStream
import TestSupport

/// The TLS contexts the tests build from the test certificates.
extension TestCertificates {
    /// The server context of the tests: the CA-signed certificate for localhost.
    static func serverContext() throws -> TLSContext {
        try TLSContext(certificateFile: path("good_cert"), keyFile: path("good_key"))
    }

    /// A client context trusting the test CA.
    static func clientContext(trusting ca: String = "ca") throws -> TLSContext {
        try TLSContext(trusting: path(ca))
    }
}

/// One real loop for one test, with a deadline so that no test can hang: the test
/// registers what must be closed at the end (`onFinish`), calls `finish()` when it has
/// seen what it waited for, and ends with `try run()`, which runs the loop until
/// everything has closed and checks that no handle is left and the loop closes.
final class TLSLoopHarness {
    let loop: Loop
    private let deadline: EventLoop.Timer
    private var closers: [() -> Void] = []
    private(set) var timedOut = false

    init(deadlineMilliseconds: UInt64 = 30_000) throws {
        signal(SIGPIPE, SIG_IGN)
        loop = try Loop()
        deadline = try EventLoop.Timer(loop: loop)
        deadline.start(timeout: deadlineMilliseconds) { [unowned self] in
            timedOut = true
            Issue.record("deadline of \(deadlineMilliseconds) ms passed")
            finish()
        }
    }

    /// Remembers a stream or handle to close at `finish()`.
    func track(_ stream: any ByteStream) { closers.append { stream.close() } }
    func trackHandle(_ handle: UVHandle) { closers.append { handle.close() } }

    /// Closes everything tracked; the deadline stops keeping the loop alive.
    func finish() {
        let all = closers
        closers = []
        for close in all { close() }
        deadline.keepsLoopAlive = false
    }

    /// Runs a throwing step inside a callback, recording a failure instead of crashing.
    func attempt(_ what: String, _ body: () throws -> Void) {
        do { try body() } catch {
            Issue.record("\(what) failed: \(error)")
            finish()
        }
    }

    /// Runs the loop to completion and checks it closes with no handle left.
    func run() throws {
        loop.run()
        deadline.close()
        loop.run()
        #expect(loop.handleNames().isEmpty, "handles left: \(loop.handleNames())")
        try loop.close()
    }

    /// Listens on 127.0.0.1 (ephemeral port) and wraps each accepted connection in a
    /// server TLS stream handed to `accepted`; returns the port.
    func tlsListener(context: TLSContext, handshakeTimeout: UInt64 = TLSStream.defaultHandshakeTimeout,
                     _ accepted: @escaping (TLSStream) -> Void) throws -> Int {
        let listener = try Listener.tcp(loop: loop, host: "127.0.0.1", port: 0)
        trackHandle(listener)
        try listener.listen { [unowned self] result in
            guard case .success(let stream) = result else {
                Issue.record("accept failed: \(result)")
                return finish()
            }
            attempt("wrapping in TLS") {
                do {
                    let tls = try TLSStream(wrapping: stream, context: context, handshakeTimeout: handshakeTimeout)
                    track(tls)
                    accepted(tls)
                } catch {
                    stream.close()
                    throw error
                }
            }
        }
        return listener.boundPort ?? 0
    }

    /// Connects a TLS client to 127.0.0.1:`port`, verifying the name "localhost".
    func tlsClient(port: Int, context: TLSContext, _ connected: @escaping (TLSStream) -> Void) {
        Stream.connectTCP(loop: loop, host: "127.0.0.1", port: port) { [unowned self] result in
            guard case .success(let stream) = result else {
                Issue.record("connect failed: \(result)")
                return finish()
            }
            attempt("client TLS") {
                do {
                    let tls = try TLSStream(wrapping: stream, context: context, serverName: "localhost")
                    track(tls)
                    connected(tls)
                } catch {
                    stream.close()
                    throw error
                }
            }
        }
    }
}

/// Bytes `0, 1, …, 250, 0, 1, …`: a period (a prime) that no buffer size lines up with,
/// so a dropped, repeated or reordered chunk shows.
func patternBytes(_ count: Int) -> [UInt8] {
    (0..<count).map { UInt8($0 % 251) }
}
