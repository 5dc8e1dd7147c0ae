import EventLoop
import Foundation
import HTTPEngine
import Logging
@testable import Service

/// A real server on a real Unix socket, run on its own loop thread. `stop()` shuts it
/// down through the loop's one thread-safe door and reports the handles left open
/// (there must be none).
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
                tweak(&config)
                var logger = Logger(label: "test")
                logger.logLevel = .warning
                let server = try Server(config: config, loop: loop, logger: logger)
                try server.start()
                var wake: AsyncWakeup?
                wake = try AsyncWakeup(loop: loop) {
                    wake?.close()
                    server.shutdown {}
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

func makeTemporaryDirectory() throws -> String {
    var template = Array((NSTemporaryDirectory() + "xhrpc-test-XXXXXX").utf8CString)
    guard let p = mkdtemp(&template) else { throw POSIXError(.EIO) }
    return String(cString: p)
}
