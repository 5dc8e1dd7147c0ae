import Foundation
import Testing
@testable import HTTPEngine
import TestSupport

/// Request bodies from memory reach the upstream exactly, with the method asked for, the
/// headers given (in order, empty values kept) and no Content-Type the caller did not set.
@Suite struct RequestBodyTests {
    /// Small bodies are copied into libcurl, large ones read in place: both exact.
    @Test(arguments: [0, 1, 1000, 64 * 1024, 64 * 1024 + 1, 3 << 20])
    func postBodyIsEchoedExactly(size: Int) throws {
        let h = try Harness()
        let body = FixturePattern.bytes(count: size, seed: 9)
        var req = TransferRequest(method: "POST", url: h.url("/echo"))
        req.body = .bytes(body)
        req.headers = [("Content-Type", "application/octet-stream")]
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        let echo = json(r)
        #expect(echo["method"] as? String == "POST")
        #expect(echo["bodyLength"] as? Int == size)
        #expect(echo["bodySha256"] as? String == sha256Hex(body))
        if size <= 1 << 20 {
            #expect(echo["bodyBase64"] as? String == Data(body).base64EncodedString())
        }
        if size > 0 {
            #expect(r.lastProgress?.uploaded == Int64(size))
        }
        #expect(try h.finish() == [])
    }

    @Test func customMethodCarriesItsBody() throws {
        let h = try Harness()
        var req = TransferRequest(method: "PATCH", url: h.url("/echo"))
        req.body = .bytes(Array("{\"a\":1}".utf8))
        req.headers = [("Content-Type", "application/json")]
        let r = try h.fetch(req)
        let echo = json(r)
        #expect(echo["method"] as? String == "PATCH")
        #expect(echo["bodyBase64"] as? String == Data("{\"a\":1}".utf8).base64EncodedString())
        #expect((echo["headers"] as? [String: Any])?["content-type"] as? String == "application/json")
        #expect(try h.finish() == [])
    }

    @Test func customMethodWithoutBody() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(method: "DELETE", url: h.url("/echo")))
        #expect(json(r)["method"] as? String == "DELETE")
        #expect(json(r)["bodyLength"] as? Int == 0)
        #expect(try h.finish() == [])
    }

    /// An empty POST sends Content-Length: 0 and no invented Content-Type.
    @Test func emptyPostHasNoContentType() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(method: "POST", url: h.url("/echo")))
        let headers = json(r)["headers"] as? [String: Any] ?? [:]
        #expect(json(r)["method"] as? String == "POST")
        #expect(headers["content-length"] as? String == "0")
        #expect(headers["content-type"] == nil)
        #expect(try h.finish() == [])
    }

    /// Headers go out in order with their spelling, an empty value as an empty header.
    @Test func requestHeadersAsGiven() throws {
        let h = try Harness()
        var req = TransferRequest(url: h.url("/echo"))
        req.headers = [("X-First", "1"), ("X-Empty", ""), ("x-MiXeD", "Case"), ("X-First", "again")]
        let r = try h.fetch(req)
        let raw = (json(r)["rawHeaders"] as? [[String]]) ?? []
        let ours = raw.filter { $0.first?.lowercased().hasPrefix("x-") == true }
        #expect(ours == [["X-First", "1"], ["X-Empty", ""], ["x-MiXeD", "Case"], ["X-First", "again"]])
        #expect(try h.finish() == [])
    }
}
