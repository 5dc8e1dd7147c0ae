import EventLoop
import Foundation
import HTTPEngine
import Logging
@testable import Service
import TestSupport

/// A real server on a real Unix socket, run on its own loop thread. `stop()` shuts it
/// down through the loop's one thread-safe door and reports the handles left open
/// (there must be none); `signalStop()` knocks on that door as a SIGTERM would, without
/// waiting, for tests of the drain (a second knock ends the drain at once).
final class TestServer: @unchecked Sendable {
    let directory: String
    let socketPath: String
    private var stopSender: AsyncSender?
    private let ready = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private var handlesLeft: [String] = []
    private var startError: Error?

    /// The egress policy test servers run with unless a test says otherwise: loopback
    /// allowed, since every upstream a test starts listens there. Tests of the policy
    /// itself set their own (`config.engine.egressPolicy = EgressPolicy()` for the
    /// server's default).
    static let loopbackPolicy: EgressPolicy = {
        do {
            return try EgressPolicy(allow: ["127.0.0.0/8", "::1", "localhost"], deny: [])
        } catch {
            preconditionFailure("the test policy's patterns are valid: \(error)")
        }
    }()

    init(_ tweak: @escaping @Sendable (inout ServerConfig) -> Void = { _ in }) throws {
        // A write to a client that has gone raises SIGPIPE; xhrpcd ignores it in main,
        // and so must the test process the server runs in.
        signal(SIGPIPE, SIG_IGN)
        directory = try makeTemporaryDirectory()
        socketPath = directory + "/xhrpc.sock"
        let path = socketPath
        let thread = Thread { [self] in
            do {
                TransferEngine.globalInit()
                let loop = try Loop()
                var config = ServerConfig()
                config.listen = [.unix(path: path)]
                config.engine.egressPolicy = TestServer.loopbackPolicy
                // Short, so that a test that leaves a transfer running still stops well
                // within `stop()`'s wait; tests of the drain set their own.
                config.drainSeconds = 2
                tweak(&config)
                var logger = Logger(label: "test")
                logger.logLevel = .warning
                let server = try Server(config: config, loop: loop, logger: logger)
                try server.start()
                var wake: AsyncWakeup?
                // Open until the server is done, so that a second knock reaches it.
                wake = try AsyncWakeup(loop: loop) {
                    server.shutdown { wake?.close() }
                }
                stopSender = wake?.sender
                ready.signal()
                loop.run()
                handlesLeft = loop.handleNames()
                try loop.close()
            } catch {
                startError = error
                ready.signal()
            }
            finished.signal()
        }
        thread.stackSize = 8 << 20
        thread.start()
        ready.wait()
        if let startError { throw startError }
    }

    /// Begins a graceful stop, as SIGTERM does, and returns at once.
    func signalStop() { stopSender?.send() }

    /// Waits until the server has stopped by itself (after `signalStop`); false when it
    /// has not within `timeout` seconds.
    func waitStopped(timeout: Double = 10) -> Bool {
        guard finished.wait(timeout: .now() + timeout) == .success else { return false }
        finished.signal()  // for `stop()`, which waits again
        return true
    }

    /// Stops the server; returns the names of handles still open afterwards.
    @discardableResult
    func stop() -> [String] {
        stopSender?.send()
        _ = finished.wait(timeout: .now() + 10)
        try? FileManager.default.removeItem(atPath: directory)
        return handlesLeft
    }

    func connect() throws -> TestClient { try TestClient(unixPath: socketPath) }
}
