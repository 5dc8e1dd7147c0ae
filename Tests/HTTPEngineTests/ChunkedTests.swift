import Testing
@testable import HTTPEngine

/// A chunked body (no Content-Length) arrives byte-exact, whatever the chunk size.
@Suite struct ChunkedTests {
    @Test(arguments: [1, 1000, 65521])
    func chunkedBodyArrivesExactly(chunk: Int) throws {
        let h = try Harness()
        let size = 300_000
        let r = try h.fetch("/chunked/\(size)?seed=5&chunk=\(chunk)", seed: 5)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.value(of: "transfer-encoding") == "chunked")
        #expect(r.head?.value(of: "content-length") == nil)
        #expect(r.checker?.matches(count: size) == true)
        #expect(r.order == ["head", "body", "done"])
        #expect(try h.finish() == [])
    }
}
