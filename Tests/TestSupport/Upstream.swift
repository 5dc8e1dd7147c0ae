import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The fixture upstream (`Tests/Fixtures/upstream.py`, or the proxy fixture), started by
/// the test that needs it on loopback and stopped by the same test: only the process we
/// started is signalled. `@unchecked Sendable`: every stored property is a constant, and
/// `stop` may come from whichever thread the test ends on.
public final class Upstream: @unchecked Sendable {
    private let process = Process()
    private let stdinPipe = Pipe()
    private let stdoutPipe = Pipe()
    public let port: Int
    public let host: String

    public static let script = Repository.fixtures + "/upstream.py"
    /// The forward proxy fixture; it prints the same READY line and stops the same way.
    public static let proxyScript = Repository.fixtures + "/proxy.py"

    /// The fixture did not print its READY line.
    public struct StartFailure: Error, CustomStringConvertible { public var description: String }

    /// Starts `script` (the upstream unless told otherwise) on `host` and a free port,
    /// with `arguments` added (`--tls-cert …` for HTTPS, `--user …` for a proxy). `host`
    /// is a loopback address (127.0.0.2 too: Linux routes all of 127/8 to loopback).
    public init(script: String = Upstream.script, host: String = "127.0.0.1", arguments: [String] = []) throws {
        self.host = host
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script, "--host", host, "--port", "0"] + arguments
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        try process.run()
        // Read the READY line byte by byte (nothing after it is swallowed), bounded by a
        // 20 s deadline (poll, not a sleep).
        let fd = stdoutPipe.fileHandleForReading.fileDescriptor
        var line: [UInt8] = []
        let deadline = Date().addingTimeInterval(20)
        while !line.contains(0x0A) {
            let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard left > 0, poll(&pfd, 1, left) == 1 else { break }
            var byte: UInt8 = 0
            guard read(fd, &byte, 1) == 1 else { break }
            line.append(byte)
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("READY "), let port = Int(text.dropFirst(6)) else {
            process.terminate()
            process.waitUntilExit()
            throw StartFailure(description: "fixture upstream did not become ready (got \"\(text)\")")
        }
        self.port = port
    }

    /// `host:port`, an IPv6 host in brackets.
    public var authority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
    /// `http://host:port`, to which a test appends a path.
    public var base: String { "http://\(authority)" }
    public func url(_ path: String) -> String { base + path }
    public func httpsURL(_ path: String) -> String { "https://\(authority)\(path)" }

    /// Closing stdin asks the fixture to stop (a signal could be blocked by the mask this
    /// process hands down); SIGTERM, then SIGKILL, follow if it has not within two
    /// seconds each, so a stuck fixture cannot hang the test run. A second call, and the
    /// one `deinit` makes, find it stopped and return at once.
    public func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        for signal in [SIGTERM, SIGKILL] {
            for _ in 0..<100 where process.isRunning { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, signal) }
        }
        process.waitUntilExit()
    }

    deinit { stop() }
}
