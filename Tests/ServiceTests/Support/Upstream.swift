import Foundation

/// The fixture HTTP upstream (Tests/Fixtures/upstream.py) started for a test on
/// 127.0.0.1 and stopped by its process id at the end.
final class Upstream: @unchecked Sendable {
    let process = Process()
    let port: Int
    var base: String { "http://127.0.0.1:\(port)" }
    private let stdinPipe = Pipe()

    static let repoRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<4 { url.deleteLastPathComponent() }
        return url.path
    }()

    init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", Upstream.repoRoot + "/Tests/Fixtures/upstream.py", "--port", "0"]
        let out = Pipe()
        process.standardOutput = out
        process.standardInput = stdinPipe
        try process.run()
        // The READY line, read byte by byte so nothing after it is swallowed.
        var line = ""
        let h = out.fileHandleForReading
        while !line.hasSuffix("\n") {
            let d = h.readData(ofLength: 1)
            if d.isEmpty { break }
            line += String(decoding: d, as: UTF8.self)
        }
        guard line.hasPrefix("READY "), let p = Int(line.dropFirst(6).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw POSIXError(.ECONNREFUSED)
        }
        port = p
    }

    /// Closing its stdin is the fixture's stop signal (a signal could be blocked by
    /// the mask this process hands down); SIGTERM backs it up.
    /// Closing stdin asks the fixture to stop; SIGTERM, then SIGKILL, follow if it has
    /// not within two seconds each, so a stuck fixture cannot hang the test run.
    func stop() {
        try? stdinPipe.fileHandleForWriting.close()
        for signal in [SIGTERM, SIGKILL] {
            for _ in 0..<100 where process.isRunning { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, signal) }
        }
        process.waitUntilExit()
    }

    deinit { stop() }
}

/// The fixture's deterministic body: a 65521-byte block, repeated.
enum Pattern {
    static func block(seed: Int = 0) -> [UInt8] {
        (0..<65521).map { j in UInt8(truncatingIfNeeded: j * 131 + (j >> 8) * 7 + seed * 17) }
    }

    static func bytes(_ n: Int, seed: Int = 0) -> [UInt8] {
        let b = block(seed: seed)
        return (0..<n).map { b[$0 % b.count] }
    }

    /// Checks a received run against the pattern from `offset`, without building it:
    /// memcmp against the block, a segment at a time (fast even in debug builds).
    static func matches(_ received: ArraySlice<UInt8>, at offset: Int, block b: [UInt8]) -> Bool {
        received.withUnsafeBytes { r in
            b.withUnsafeBytes { blk in
                var done = 0
                var i = offset % blk.count
                while done < r.count {
                    let n = min(r.count - done, blk.count - i)
                    if memcmp(r.baseAddress! + done, blk.baseAddress! + i, n) != 0 { return false }
                    done += n
                    i = 0
                }
                return true
            }
        }
    }
}
