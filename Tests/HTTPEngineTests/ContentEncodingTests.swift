import CCurl
import CShims
import Foundation
import Testing
@testable import HTTPEngine

/// gzip, deflate (zlib or raw) and br bodies arrive decoded by the engine
/// (`ContentDecoder`), byte-exact, with the Content-Encoding header still visible in
/// the head; a coded body cut short inside whole framing is a failure, never a success
/// with the part decoded.
@Suite struct ContentEncodingTests {
    @Test(arguments: ["gzip", "deflate", "raw-deflate", "br"], [false, true])
    func encodedBodyArrivesDecoded(encoding: String, chunked: Bool) throws {
        let h = try Harness()
        let size = 1_000_000
        let r = try h.fetch("/\(encoding)/\(size)?seed=7\(chunked ? "&chunked=1" : "")", seed: 7)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.status == 200)
        #expect(r.head?.value(of: "content-encoding") == (encoding == "raw-deflate" ? "deflate" : encoding))
        #expect(r.checker?.matches(count: size) == true,
                "got \(r.checker?.offset ?? -1) bytes, first mismatch \(String(describing: r.checker?.firstMismatch))")
        #expect(try h.finish() == [])
    }

    /// The first 200 bytes of a 10,240-byte body's coded stream (of 350 to 493), in a
    /// Content-Length of 200 or in chunks with their last chunk: the framing is whole,
    /// the stream is not. libcurl 7.88 called this a success with 177 bytes decoded.
    @Test(arguments: ["gzip", "deflate", "raw-deflate", "br"], [false, true])
    func truncatedStreamFails(encoding: String, chunked: Bool) throws {
        let h = try Harness()
        let r = try h.fetch("/\(encoding)/10240?seed=7&truncate=200\(chunked ? "&chunked=1" : "")", seed: 7)
        let name = encoding == "raw-deflate" ? "deflate" : encoding
        #expect(r.completions == 1)
        #expect(r.head?.status == 200)
        #expect(r.failure?.code == Int32(CURLE_BAD_CONTENT_ENCODING.rawValue))
        #expect(r.failure?.text == "Truncated \(name) body: the response ended before its \(name) stream did")
        #expect((r.checker?.offset ?? 0) < 10240)
        #expect(try h.finish() == [])
    }

    /// A HEAD of a coded resource has no body to decode: a success.
    @Test func headOfACodedResourceSucceeds() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(method: "HEAD", url: h.url("/gzip/10240")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(r.head?.value(of: "content-encoding") == "gzip")
        #expect(r.bodyCount == 0)
        #expect(try h.finish() == [])
    }

    /// The request offers every coding the engine decodes.
    @Test func acceptEncodingIsOffered() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/headers")))
        let offered = (json(r)["accept-encoding"] as? String) ?? ""
        for e in ["gzip", "deflate", "br", "zstd"] { #expect(offered.contains(e), "\(offered)") }
        #expect(try h.finish() == [])
    }

    /// The engine offers the codings it decodes (`TransferEngine.acceptEncoding`); the
    /// header it sends is the one libcurl sends for `""`, so nothing changed for servers
    /// when decoding moved out of libcurl.
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
