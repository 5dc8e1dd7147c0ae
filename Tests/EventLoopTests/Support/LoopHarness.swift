import CUV
import Testing
@testable import EventLoop

#if canImport(Glibc)
import Glibc
#endif

/// One real loop for one test, with a deadline so that no test can hang.
///
/// A test tracks the handles it makes, calls `finish()` when it has seen what it waited
/// for, and ends with `try run()`, which runs the loop until every handle has closed and
/// then checks that none is left and that `Loop.close()` succeeds. If the deadline passes
/// first, it records a failure and closes every handle on the loop (tracked or not), so
/// the test fails instead of hanging.
final class LoopHarness {
    let loop: Loop
    private let deadline: Timer
    private var handles: [UVHandle] = []
    private(set) var timedOut = false

    init(deadlineMilliseconds: UInt64 = 10_000) throws {
        // Writing to a reset peer raises SIGPIPE; the server ignores it in main, and so
        // must the test process.
        signal(SIGPIPE, SIG_IGN)
        loop = try Loop()
        deadline = try Timer(loop: loop)
        deadline.start(timeout: deadlineMilliseconds) { [unowned self] in
            self.timedOut = true
            Issue.record("deadline of \(deadlineMilliseconds) ms passed; closing every handle")
            self.closeEverything()
        }
    }

    /// Remembers `handle` so that `finish()` closes it.
    @discardableResult
    func track<H: UVHandle>(_ handle: H) -> H {
        handles.append(handle)
        return handle
    }

    /// Closes every tracked handle. The deadline stays armed but no longer keeps the loop
    /// running, so `run()` returns as soon as the closes are done — or, if the test left
    /// an untracked handle open, the deadline still fires and reports it.
    func finish() {
        for handle in handles { handle.close() }
        handles.removeAll()
        deadline.keepsLoopAlive = false
    }

    /// Runs a throwing step inside a callback, recording a failure instead of crashing.
    func attempt(_ what: String, _ body: () throws -> Void) {
        do {
            try body()
        } catch {
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

    /// Closes whatever handle is still open on the loop through its wrapper.
    private func closeEverything() {
        final class Found { var wrappers: [UVHandle] = [] }
        let found = Found()
        withExtendedLifetime(found) {
            uv_walk(loop.raw, { handle, arg in
                guard let handle, uv_is_closing(handle) == 0, let data = handle.pointee.data else { return }
                let found = Unmanaged<Found>.fromOpaque(arg!).takeUnretainedValue()
                found.wrappers.append(Unmanaged<UVHandle>.fromOpaque(data).takeUnretainedValue())
            }, Unmanaged.passUnretained(found).toOpaque())
        }
        handles.removeAll()
        for wrapper in found.wrappers { wrapper.close() }
    }
}

/// Makes `stream` echo everything back, half-closing its write side after the peer's
/// EOF once the echoes are written, and closing on a read error.
func echo(_ stream: Stream, _ harness: LoopHarness) {
    harness.attempt("server startReading") {
        try stream.startReading { event in
            switch event {
            case .data(let bytes): stream.write(bytes)
            case .eof: stream.shutdown { _ in }
            case .error: stream.close()
            }
        }
    }
}

/// Bytes `0, 1, …, 250, 0, 1, …` — a pattern whose period (a prime) does not line up
/// with any buffer size, so a dropped, repeated or reordered chunk shows.
func patternBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { out in
        for i in 0..<min(251, count) { out[i] = UInt8(i) }
        var filled = min(251, count)
        while filled < count {
            let chunk = min(filled, count - filled) / 251 * 251
            let take = chunk > 0 ? chunk : count - filled
            (out.baseAddress! + filled).copyMemory(from: out.baseAddress!, byteCount: take)
            filled += take
        }
    }
    return bytes
}

/// A fresh private directory for Unix-domain sockets; the caller removes it.
func makeTemporaryDirectory() throws -> String {
    var template = Array("/tmp/xhrpc-eventloop-XXXXXX".utf8CString)
    guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
        throw UVError(-errno, "mkdtemp")
    }
    return String(cString: made)
}

/// Whether anything exists at `path`.
func pathExists(_ path: String) -> Bool { access(path, F_OK) == 0 }
