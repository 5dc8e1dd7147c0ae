import Testing
@testable import HTTPEngine

/// GET of pattern bodies of several sizes arrives byte-exact, head first, then body, then
/// one completion.
@Suite struct GetBodyTests {
    @Test(arguments: [0, 1000, 1 << 20, 64 << 20])
    func patternBodyArrivesExactly(size: Int) throws {
        let h = try Harness()
        let r = try h.fetch("/bytes/\(size)?seed=3", seed: 3, seconds: 60)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect(r.head?.statusText == "OK")
        #expect(r.head?.httpVersion == "1.1")
        #expect(r.head?.value(of: "content-length") == "\(size)")
        #expect(r.checker?.matches(count: size) == true, "offset \(r.checker?.offset ?? -1), mismatch at \(String(describing: r.checker?.firstMismatch))")
        #expect(r.order == (size == 0 ? ["head", "done"] : ["head", "body", "done"]))
        #expect(r.headCount == 1)
        if size > 0 {
            #expect(r.lastProgress?.downloaded == Int64(size))
            #expect(r.lastProgress?.downloadTotal == Int64(size))
        }
        #expect(h.engine.activeTransfers == 0)
        #expect(try h.finish() == [])
    }
}
