import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct FetchTests {
    @Test func fetchReturnsTheWholeExchange() throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.call("fetch", ["url": .string(up.base + "/echo"), "method": "PUT", "headers": ["X-Test": "1"],
                                         "body": "hello", "responseType": "json"])
            #expect(r["status"] == 200)
            #expect(r["statusText"] == "OK")
            #expect(r["encoding"] == "json")
            #expect(r["body"]?["method"] == "PUT")
            #expect(r["body"]?["headers"]?["x-test"] == "1")
            #expect(r["headers"]?["Content-Type"] == "application/json")
            let bin = try c.call("fetch", ["url": .string(up.base + "/bytes/300")])
            #expect(bin["encoding"] == "base64")
            #expect(bin["body"]?.stringValue.flatMap { Data(base64Encoded: $0) }.map { [UInt8]($0) } == FixturePattern.bytes(count: 300))
            // Longer than one piece of the base64 writer (`Base64Text.pieceBytes`), ending mid-group.
            let long = try c.call("fetch", ["url": .string(up.base + "/bytes/200000")])
            #expect(long["body"]?.stringValue.flatMap { Data(base64Encoded: $0) }.map { [UInt8]($0) }
                    == FixturePattern.bytes(count: 200_000))
            let failed = try c.call("fetch", ["url": .string("http://127.0.0.1:\(try closedPort())/")])
            #expect(failed["status"] == 0)
        }
    }

    @Test func fetchRefusesBodiesOverTheBuffer() throws {
        try withServer({ $0.maxBufferBytes = 100_000 }) { server, up in
            let c = try server.connect()
            let r = try c.call("fetch", ["url": .string(up.base + "/bytes/1000000")])
            #expect(r["status"] == 0)
            #expect(r["statusText"]?.stringValue?.contains("larger than 100000 bytes") == true)
        }
    }
}
