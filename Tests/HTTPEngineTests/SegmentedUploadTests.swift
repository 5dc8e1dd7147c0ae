import Foundation
import Testing
@testable import HTTPEngine
import TestSupport

/// A `.segments` body (a multipart body whose file parts stream from disk): bytes and
/// files in order, byte-exact, one Content-Length for the whole, rewound for a 307.
@Suite struct SegmentedUploadTests {
    @Test(arguments: ["POST", "PATCH"])
    func segmentsArriveInOrder(method: String) throws {
        let h = try Harness()
        let fileBytes = FixturePattern.bytes(count: 3 << 20, seed: 5)
        let path = try FileUploadTests.tempFile(fileBytes)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let empty = try FileUploadTests.tempFile([])
        defer { try? FileManager.default.removeItem(atPath: empty) }
        let head = Array("head\r\n".utf8), tail = Array("\r\ntail".utf8)
        var req = TransferRequest(method: method, url: h.url("/redirect-to?url=%2Fecho&status=307"))
        req.body = .segments([.bytes(head), .file(FileUploadTests.upload(path)), .bytes([]), .file(FileUploadTests.upload(empty)),
                              .bytes(tail), .file(FileUploadTests.upload(path))])
        let r = try h.fetch(req)
        #expect(r.succeeded, "\(String(describing: r.failure))")
        let whole = head + fileBytes + tail + fileBytes
        let echo = json(r)
        #expect(echo["method"] as? String == method)
        #expect(echo["bodyLength"] as? Int == whole.count)
        #expect(echo["bodySha256"] as? String == sha256Hex(whole))
        #expect(try h.finish() == [])
    }

    @Test func aFileThatIsNotRegularIsRefusedAtStart() throws {
        let h = try Harness()
        var req = TransferRequest(method: "POST", url: h.url("/echo"))
        req.body = .segments([.bytes([1]), .file(FileUploadTests.upload("/dev/null"))])
        let r = Recorder()
        #expect {
            try h.engine.start(Transfer(request: req, delegate: r))
        } throws: { e in
            let f = e as? TransferFailure
            return f?.code == 26 && f?.text.contains("not a regular file") == true
        }
        #expect(h.engine.activeTransfers == 0)
        #expect(try h.finish() == [])
    }
}
