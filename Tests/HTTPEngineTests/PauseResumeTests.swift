import EventLoop
import Testing
@testable import HTTPEngine

/// A delegate that refuses bytes pauses the transfer; `resume()` from a later turn lets
/// the same bytes come again, and the whole body still arrives byte-exact.
@Suite struct PauseResumeTests {
    /// Refuses every 3rd offer and resumes 20 ms later from a timer.
    func run(path: String, size: Int, seed: Int) throws {
        let h = try Harness()
        let r = Recorder(expectingSeed: seed)
        let resumeTimer = try Timer(loop: h.loop)
        var offers = 0
        var refusals = 0
        var pausedSeen = 0
        var transfer: Transfer?
        var offeredWhilePaused = 0
        r.accept = { _ in
            offers += 1
            if let t = transfer, t.isPaused { offeredWhilePaused += 1 }
            guard offers % 3 == 0 else { return true }
            refusals += 1
            resumeTimer.start(timeout: 20) {
                if transfer?.isPaused == true { pausedSeen += 1 }
                transfer?.resume()
            }
            return false
        }
        let (t, _) = try h.start(TransferRequest(url: h.url(path)), r)
        transfer = t
        h.run(seconds: 60) { r.completions > 0 }
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(refusals > 3)
        #expect(pausedSeen == refusals)
        #expect(offeredWhilePaused == 0)
        #expect(r.checker?.matches(count: size) == true,
                "got \(r.checker?.offset ?? -1), mismatch \(String(describing: r.checker?.firstMismatch))")
        #expect(!t.isPaused)
        resumeTimer.close()
        transfer = nil
        #expect(try h.finish() == [])
    }

    @Test func plainBodySurvivesPauses() throws {
        try run(path: "/bytes/2000000?seed=8", size: 2_000_000, seed: 8)
    }

    @Test func chunkedBodySurvivesPauses() throws {
        try run(path: "/chunked/500000?seed=8&chunk=3000", size: 500_000, seed: 8)
    }

    /// Decoded by the engine: a refusal mid-way through one raw piece's output holds
    /// the rest of it (`ContentDecoder`).
    @Test(arguments: ["gzip", "deflate", "raw-deflate", "br"]) func codedBodySurvivesPauses(encoding: String) throws {
        try run(path: "/\(encoding)/2000000?seed=8", size: 2_000_000, seed: 8)
    }

    /// The same bytes are offered again after resume: refuse the very first offer and
    /// check the next offer starts with the same bytes.
    @Test func refusedBytesAreOfferedAgain() throws {
        let h = try Harness()
        let r = Recorder(expectingSeed: 0)
        var first: [UInt8]?
        var again: [UInt8]?
        var transfer: Transfer?
        r.accept = { bytes in
            if first == nil {
                first = Array(bytes)
                transfer?.resume()  // from inside the callback: takes effect next turn
                return false
            }
            if again == nil { again = Array(bytes) }
            return true
        }
        let (t, _) = try h.start(TransferRequest(url: h.url("/bytes/100000")), r)
        transfer = t
        h.run(seconds: 10) { r.completions > 0 }
        #expect(r.succeeded)
        #expect(first != nil && again == first)
        #expect(r.checker?.matches(count: 100_000) == true)
        transfer = nil
        #expect(try h.finish() == [])
    }
}
