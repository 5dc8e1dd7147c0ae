import CCurl
import CShims
import Foundation
import Testing
@testable import HTTPEngine

/// gzip, deflate and br bodies arrive decoded (CURLOPT_ACCEPT_ENCODING with every
/// decoder libcurl has), byte-exact, with the Content-Encoding header still visible in
/// the head.
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

    /// The engine sets the list itself (`TransferEngine.acceptEncoding`) rather than
    /// `""`; the header it sends is the one libcurl sends for `""`.
    @Test func offeredListIsLibcurlsOwn() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/headers")))
        let engineOffers = json(r)["accept-encoding"] as? String

        final class Sink { var body: [UInt8] = [] }
        let sink = Sink()
        let e = try #require(curl_easy_init())
        defer { curl_easy_cleanup(e) }
        _ = xh_easy_setopt_str(e, CURLOPT_URL, h.url("/headers"))
        _ = xh_easy_setopt_str(e, CURLOPT_ACCEPT_ENCODING, "")
        _ = xh_easy_setopt_long(e, CURLOPT_NOSIGNAL, 1)
        _ = xh_easy_setopt_write_cb(e, CURLOPT_WRITEFUNCTION) { data, size, count, userp in
            let sink = Unmanaged<Sink>.fromOpaque(userp!).takeUnretainedValue()
            sink.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: size * count))
            return size * count
        }
        _ = xh_easy_setopt_ptr(e, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque())
        #expect(curl_easy_perform(e) == CURLE_OK)
        let object = (try? JSONSerialization.jsonObject(with: Data(sink.body))) as? [String: Any]
        let libcurlOffers = object?["accept-encoding"] as? String
        #expect(libcurlOffers != nil)
        #expect(engineOffers == libcurlOffers)
        #expect(TransferEngine.acceptEncoding == libcurlOffers)
        #expect(try h.finish() == [])
    }
}
