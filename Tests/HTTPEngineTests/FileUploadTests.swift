import Foundation
import Testing
@testable import HTTPEngine
import TestSupport

/// A file body is streamed from disk (sendWithFile): PUT unless the method is custom,
/// byte-exact, with Content-Length from the file's size.
@Suite struct FileUploadTests {
    static func tempFile(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "xhrpc-upload-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The body of the file at `path`, opened as the Service layer hands files over.
    static func opened(_ path: String) -> TransferBody { .file(upload(path)) }

    static func upload(_ path: String) -> UploadFile {
        UploadFile(descriptor: open(path, O_RDONLY | O_CLOEXEC), name: path)
    }

    /// GET and PUT send the file as a PUT; POST sends it as a POST (`upload`'s default;
    /// sendWithFile's POST is made a PUT by the Service layer before it gets here).
    @Test(arguments: [("GET", "PUT"), ("PUT", "PUT"), ("POST", "POST")])
    func fileIsSentExactly(method: String, sentAs: String) throws {
        let h = try Harness()
        let body = FixturePattern.bytes(count: 5 << 20, seed: 11)
        let path = try FileUploadTests.tempFile(body)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var req = TransferRequest(method: method, url: h.url("/echo"))
        req.body = FileUploadTests.opened(path)
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        let echo = json(r)
        #expect(echo["method"] as? String == sentAs)
        #expect(echo["bodyLength"] as? Int == body.count)
        #expect(echo["bodySha256"] as? String == sha256Hex(body))
        #expect((echo["headers"] as? [String: Any])?["content-length"] as? String == "\(body.count)")
        #expect(r.lastProgress?.uploaded == Int64(body.count))
        #expect(r.lastProgress?.uploadTotal == Int64(body.count))
        #expect(try h.finish() == [])
    }

    @Test func customMethodIsKept() throws {
        let h = try Harness()
        let body = FixturePattern.bytes(count: 100_000, seed: 2)
        let path = try FileUploadTests.tempFile(body)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var req = TransferRequest(method: "REPORT", url: h.url("/echo"))
        req.body = FileUploadTests.opened(path)
        let r = try h.fetch(req)
        #expect(json(r)["method"] as? String == "REPORT")
        #expect(json(r)["bodySha256"] as? String == sha256Hex(body))
        #expect(try h.finish() == [])
    }

    /// A 307 makes libcurl send the body again: the seek callback rewinds the file.
    @Test func bodyIsRewoundFor307() throws {
        let h = try Harness()
        let body = FixturePattern.bytes(count: 200_000, seed: 4)
        let path = try FileUploadTests.tempFile(body)
        defer { try? FileManager.default.removeItem(atPath: path) }
        var req = TransferRequest(method: "PUT", url: h.url("/redirect-to?url=%2Fecho&status=307"))
        req.body = FileUploadTests.opened(path)
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        #expect(json(r)["method"] as? String == "PUT")
        #expect(json(r)["bodySha256"] as? String == sha256Hex(body))
        #expect(try h.finish() == [])
    }

    @Test func aFileThatIsNotRegularIsRefusedAtStart() throws {
        let h = try Harness()
        var req = TransferRequest(method: "PUT", url: h.url("/echo"))
        req.body = FileUploadTests.opened("/dev/null")
        let r = Recorder()
        let t = Transfer(request: req, delegate: r)
        #expect {
            try h.engine.start(t)
        } throws: { e in
            let f = e as? TransferFailure
            return f?.code == 26 && f?.text.contains("not a regular file") == true
        }
        #expect(h.engine.activeTransfers == 0)
        h.idle(seconds: 0.05)
        #expect(r.order == [])
        #expect(try h.finish() == [])
    }
}
