import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct BackPressureTests {
    /// With a 64 KiB buffer, a 6 MiB body only flows as the client reads it; read in
    /// odd-sized pieces, it arrives byte-exact.
    @Test func fullBufferPausesAndDrainingResumes() throws {
        try withServer({ $0.maxBufferBytes = 64 << 10 }) { server, up in
            let c = try server.connect()
            let n = 6 << 20
            let r = try c.start(up.base + "/bytes/\(n)?seed=3")
            _ = try c.waitNotification { $0["params"]?["stateName"] == "LOADING" }
            usleep(200_000)
            // Paused: far from done while nothing is read.
            #expect(try c.call("getState", ["request": .string(r)])["stateName"] == "LOADING")
            let block = FixturePattern.block(seed: 3)
            var got = 0
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                let chunk = try c.call("getReceiveBuffer", ["request": .string(r), "maxBytes": 50_000])
                let bytes = [UInt8](Data(base64Encoded: chunk["data"]?.stringValue ?? "") ?? Data())
                #expect(bytes.count <= 50_000)
                #expect(FixturePattern.matches(bytes[...], at: got, block: block))
                got += bytes.count
                if chunk["done"] == true { break }
            }
            #expect(got == n)
        }
    }

    @Test(arguments: ["/chunked/3000000?chunk=7000&seed=1", "/gzip/3000000?seed=1", "/deflate/3000000?seed=1", "/br/3000000?seed=1"])
    func encodedBodiesArriveDecodedAndExact(path: String) throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + path)
            let body = try c.readBody(r)
            #expect(body.count == 3_000_000)
            #expect(FixturePattern.matches(body[...], at: 0, block: FixturePattern.block(seed: 1)))
        }
    }

    @Test func slowDripReadIncrementally() throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + "/drip/3000?chunk=100&delay=5")
            var reads = 0
            var body: [UInt8] = []
            for _ in 0..<100_000 {
                let chunk = try c.call("getReceiveBuffer", ["request": .string(r)])
                let bytes = [UInt8](Data(base64Encoded: chunk["data"]?.stringValue ?? "") ?? Data())
                if !bytes.isEmpty { reads += 1 }
                body += bytes
                if chunk["done"] == true { break }
                usleep(3000)
            }
            #expect(body == FixturePattern.bytes(count: 3000))
            #expect(reads > 3)
        }
    }

    @Test func largeBodyByteExact() throws {
        try withServer { server, up in
            let c = try server.connect()
            let n = 256 << 20
            let r = try c.start(up.base + "/bytes/\(n)?seed=5")
            let block = FixturePattern.block(seed: 5)
            var got = 0
            let deadline = Date().addingTimeInterval(300)
            while Date() < deadline {
                let chunk = try c.call("getReceiveBuffer", ["request": .string(r)], timeout: 60)
                let bytes = [UInt8](Data(base64Encoded: chunk["data"]?.stringValue ?? "") ?? Data())
                if !FixturePattern.matches(bytes[...], at: got, block: block) {
                    Issue.record("mismatch near byte \(got)")
                    return
                }
                got += bytes.count
                if chunk["done"] == true { break }
                if bytes.isEmpty { usleep(1000) }
            }
            #expect(got == n)
        }
    }
}
