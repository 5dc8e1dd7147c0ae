#if canImport(Glibc)
import Glibc
#endif
import Foundation
import EventLoop
@testable import HTTPEngine
import TestSupport

/// libcurl's global init, once per test process, before the first engine.
enum CurlSetup {
    static let done: Bool = TransferEngine.globalInit()
}

/// A loop, an engine and an upstream for one test, with the checks every test ends with:
/// after `shutdown`, no libuv handle is left and the loop closes.
final class Harness {
    let loop: Loop
    let engine: TransferEngine
    let upstream: Upstream

    /// `upstreamArguments` go to the upstream fixture (`--tls-cert …` makes it HTTPS);
    /// `upstreamHost` is where it listens (127.0.0.1, or ::1 for tests that need IPv6).
    init(options: EngineOptions = .init(), upstreamArguments: [String] = [], upstreamHost: String = "127.0.0.1") throws {
        precondition(CurlSetup.done, "curl_global_init failed")
        loop = try Loop()
        engine = try TransferEngine(loop: loop, options: options)
        upstream = try Upstream(host: upstreamHost, arguments: upstreamArguments)
    }

    /// A harness around an upstream already started (a test whose engine options name
    /// the upstream's port); `finish` stops it.
    init(options: EngineOptions, upstream: Upstream) throws {
        precondition(CurlSetup.done, "curl_global_init failed")
        loop = try Loop()
        engine = try TransferEngine(loop: loop, options: options)
        self.upstream = upstream
    }

    func url(_ path: String) -> String { upstream.url(path) }
    func httpsURL(_ path: String) -> String { upstream.httpsURL(path) }

    /// Runs the loop until `done()` holds or `seconds` pass (a deadline timer, no
    /// sleeping). Returns whether `done()` held.
    @discardableResult
    func run(seconds: Double, until done: () -> Bool) -> Bool {
        guard let deadline = try? Timer(loop: loop) else { return false }
        var expired = false
        // The loop's clock stands still while the loop does not run (starting the
        // upstream, a test's own waiting): counted from it, a short deadline would be
        // over before the first turn.
        loop.updateTime()
        deadline.start(timeout: UInt64(seconds * 1000)) { expired = true }
        // One turn that does not wait first: `runOnce` runs due timers *before* it
        // blocks for I/O, so an event delivered from a timer (a transfer the egress
        // policy refused at start completes from the engine's next-turn timer) would
        // otherwise be seen only after the next I/O or the deadline.
        loop.runNoWait()
        while !done() && !expired { loop.runOnce() }
        deadline.close()
        return done()
    }

    /// Runs the loop for `seconds` whatever happens (to show that nothing more does).
    func idle(seconds: Double) {
        run(seconds: seconds) { false }
    }

    /// Starts a GET (or the given request) with a fresh recorder.
    func start(_ request: TransferRequest, _ recorder: Recorder = Recorder()) throws -> (Transfer, Recorder) {
        let t = Transfer(request: request, delegate: recorder)
        try engine.start(t)
        return (t, recorder)
    }

    /// Runs one request to completion (bounded) and returns its recorder.
    func fetch(_ request: TransferRequest, _ recorder: Recorder = Recorder(), seconds: Double = 30) throws -> Recorder {
        let (t, r) = try start(request, recorder)
        run(seconds: seconds) { r.completions > 0 }
        withExtendedLifetime(t) {}
        return r
    }

    func fetch(_ path: String, seed: Int = 0, seconds: Double = 30) throws -> Recorder {
        try fetch(TransferRequest(url: url(path)), Recorder(expectingSeed: seed), seconds: seconds)
    }

    /// Shuts the engine down and checks the loop closes with no handle left. Returns the
    /// handle names left (empty when clean) and stops the upstream.
    func finish() throws -> [String] {
        defer { upstream.stop() }
        var shut = false
        engine.shutdown { shut = true }
        run(seconds: 10) { shut }
        loop.run()  // close callbacks of anything closed last
        let left = loop.handleNames()
        if left.isEmpty { try loop.close() }
        return shut ? left : ["shutdown completion never ran"] + left
    }
}

/// Records what a transfer says, in order, and checks pattern bodies as they arrive.
final class Recorder: TransferDelegate {
    var head: ResponseHead?
    /// "head", "body" (once per run of body calls), "done": the order of events.
    var order: [String] = []
    var headCount = 0
    var bodyCalls = 0
    var bodyCount = 0
    var body: [UInt8] = []
    var keepBody = true
    var progressCalls = 0
    var lastProgress: TransferProgress?
    var completions = 0
    var failure: TransferFailure?
    var callsAfterCompletion = 0
    /// Checks pattern bytes incrementally when set.
    var checker: PatternChecker?
    /// Decides whether to take body bytes (default: always).
    var accept: ((UnsafeRawBufferPointer) -> Bool)?
    var onHead: ((Transfer) -> Void)?
    var onBody: ((Transfer) -> Void)?
    var onDone: ((Transfer) -> Void)?

    init() {}
    init(expectingSeed seed: Int) {
        checker = PatternChecker(seed: seed)
        keepBody = false
    }

    var bodyText: String { String(decoding: body, as: UTF8.self) }
    var succeeded: Bool { completions == 1 && failure == nil }

    func transfer(_ t: Transfer, receivedHead head: ResponseHead) {
        if completions > 0 { callsAfterCompletion += 1 }
        self.head = head
        headCount += 1
        order.append("head")
        onHead?(t)
    }

    func transfer(_ t: Transfer, receivedBody bytes: UnsafeRawBufferPointer) -> Bool {
        if completions > 0 { callsAfterCompletion += 1 }
        if let accept, !accept(bytes) { return false }
        bodyCalls += 1
        if order.last != "body" { order.append("body") }
        bodyCount += bytes.count
        if keepBody { body.append(contentsOf: bytes) }
        checker?.check(bytes)
        onBody?(t)
        return true
    }

    func transfer(_ t: Transfer, progressed p: TransferProgress) {
        if completions > 0 { callsAfterCompletion += 1 }
        progressCalls += 1
        lastProgress = p
    }

    func transfer(_ t: Transfer, completedWith failure: TransferFailure?) {
        completions += 1
        self.failure = failure
        order.append("done")
        onDone?(t)
    }
}

/// The fixture's body pattern (`FixturePattern`), compared as it arrives.
struct PatternChecker {
    /// Two blocks back to back, so any run up to a block long starting anywhere is one
    /// contiguous slice.
    let doubled: [UInt8]
    private(set) var offset = 0
    private(set) var firstMismatch: Int?

    init(seed: Int) {
        let block = FixturePattern.block(seed: seed)
        doubled = block + block
    }

    mutating func check(_ bytes: UnsafeRawBufferPointer) {
        var done = 0
        while done < bytes.count {
            let start = offset % FixturePattern.blockSize
            let n = min(bytes.count - done, FixturePattern.blockSize)
            let same = doubled.withUnsafeBytes { d in
                memcmp(d.baseAddress! + start, bytes.baseAddress! + done, n) == 0
            }
            if !same, firstMismatch == nil {
                for k in 0..<n where doubled[start + k] != bytes[done + k] {
                    firstMismatch = offset + k
                    break
                }
            }
            offset += n
            done += n
        }
    }

    /// True when exactly `count` bytes arrived and all matched.
    func matches(count: Int) -> Bool { offset == count && firstMismatch == nil }
}

/// SHA-256 (FIPS 180-4), small and slow, to check what the upstream echoes back.
func sha256Hex(_ message: [UInt8]) -> String {
    let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]
    var h: [UInt32] = [0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]
    var data = message
    let bitLength = UInt64(message.count) * 8
    data.append(0x80)
    while data.count % 64 != 56 { data.append(0) }
    for i in (0..<8).reversed() { data.append(UInt8(truncatingIfNeeded: bitLength >> (UInt64(i) * 8))) }
    func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
    var w = [UInt32](repeating: 0, count: 64)
    for chunk in stride(from: 0, to: data.count, by: 64) {
        for i in 0..<16 {
            let b = chunk + i * 4
            w[i] = UInt32(data[b]) << 24 | UInt32(data[b + 1]) << 16 | UInt32(data[b + 2]) << 8 | UInt32(data[b + 3])
        }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, hh) = (h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7])
        for i in 0..<64 {
            let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
            let ch = (e & f) ^ (~e & g)
            let t1 = hh &+ s1 &+ ch &+ k[i] &+ w[i]
            let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            hh = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
        }
        h[0] &+= a; h[1] &+= b; h[2] &+= c; h[3] &+= d; h[4] &+= e; h[5] &+= f; h[6] &+= g; h[7] &+= hh
    }
    return h.map { String(format: "%08x", $0) }.joined()
}

/// The JSON object an echo endpoint answered with.
func json(_ r: Recorder) -> [String: Any] {
    (try? JSONSerialization.jsonObject(with: Data(r.body))) as? [String: Any] ?? [:]
}

extension TestCertificates {
    /// Engine options trusting the test CA only.
    static var trustingTestCA: EngineOptions {
        var o = EngineOptions()
        o.caFile = path("ca")
        return o
    }
}
