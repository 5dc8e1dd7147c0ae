import Testing
@testable import HTTPEngine

/// gzip, deflate and br bodies arrive decoded (CURLOPT_ACCEPT_ENCODING ""), byte-exact,
/// with the Content-Encoding header still visible in the head.
@Suite struct ContentEncodingTests {
    @Test(arguments: ["gzip", "deflate", "br"], [false, true])
    func encodedBodyArrivesDecoded(encoding: String, chunked: Bool) throws {
        let h = try Harness()
        let size = 1_000_000
        let r = try h.fetch("/\(encoding)/\(size)?seed=7\(chunked ? "&chunked=1" : "")", seed: 7)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect(r.head?.value(of: "content-encoding") == encoding)
        #expect(r.checker?.matches(count: size) == true,
                "got \(r.checker?.offset ?? -1) bytes, first mismatch \(String(describing: r.checker?.firstMismatch))")
        #expect(try h.finish() == [])
    }

    /// The request offers every decoder libcurl has.
    @Test func acceptEncodingIsOffered() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/headers")))
        let offered = (json(r)["accept-encoding"] as? String) ?? ""
        for e in ["gzip", "deflate", "br", "zstd"] { #expect(offered.contains(e), "\(offered)") }
        #expect(try h.finish() == [])
    }
}
