import Testing
@testable import HTTPEngine

/// A response that started and then broke is a failure, after the bytes that did arrive.
@Suite struct BrokenResponseTests {
    @Test func resetMidBodyFails() throws {
        let h = try Harness()
        let r = try h.fetch("/reset/200000?seed=1", seed: 1)
        #expect(r.completions == 1)
        #expect(r.failure?.code == 56, "\(String(describing: r.failure))")  // CURLE_RECV_ERROR
        #expect(r.failure?.text.contains("Connection reset by peer") == true, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect(r.bodyCount > 0 && r.bodyCount <= 200_000)
        #expect(r.checker?.firstMismatch == nil)
        #expect(r.order == ["head", "body", "done"])
        #expect(try h.finish() == [])
    }

    @Test func closedEarlyFails() throws {
        let h = try Harness()
        let r = try h.fetch("/close-early/100000?seed=1", seed: 1)
        #expect(r.completions == 1)
        #expect(r.failure?.code == 18)  // CURLE_PARTIAL_FILE
        #expect(r.bodyCount == 100_000)
        #expect(r.checker?.matches(count: 100_000) == true)
        #expect(r.order == ["head", "body", "done"])
        #expect(try h.finish() == [])
    }
}
