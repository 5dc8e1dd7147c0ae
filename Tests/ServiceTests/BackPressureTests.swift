import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct BackPressureTests {
    /// With a 64 KiB buffer, a 6 MiB body only flows as the client reads it: unread, the
    /// bytes held stop at the limit, at most one libcurl write (16 KiB,
    /// CURL_MAX_WRITE_SIZE) past it, and stay there while another 6 MiB download from
    /// the same upstream goes through in full (the paused transfer's socket has bytes
    /// waiting all that time, so a transfer that did not pause would take them). Then,
    /// read in odd-sized pieces, it arrives byte-exact. The figure is the principal's
    /// `bufferedBytes`, which counts the request's response head too (docs/operations/budgets.md):
    /// a few hundred bytes, allowed for with 4 KiB.
    @Test func fullBufferPausesAndDrainingResumes() throws {
        let limit = 64 << 10
        try withServer({ $0.maxBufferBytes = limit }) { server, up in
            let c = try server.connect()
            let n = 6 << 20
            let r = try c.start(up.base + "/bytes/\(n)?seed=3")
            let held = try c.bufferedBytes(atLeast: limit)
            #expect(held < limit + (16 << 10) + 4096, "\(held) bytes held with a limit of \(limit)")
            let witness = try c.start(up.base + "/bytes/\(n)?seed=4")
            let other = try c.readBody(witness)
            #expect(other.count == n)
            #expect(FixturePattern.matches(other[...], at: 0, block: FixturePattern.block(seed: 4)))
            // The witness's head counts until its release. The paused request may still
            // have taken the rest of libcurl's last write after `held` was sampled, so the
            // figure is compared with one taken just before the release.
            let beforeRelease = try #require(try c.call("server.stats")["bufferedBytes"]?.int64Value)
            _ = try c.call("release", ["request": .string(witness)])
            let afterRelease = try #require(try c.call("server.stats")["bufferedBytes"]?.int64Value)
            #expect(afterRelease < beforeRelease, "the witness's head was given back")
            #expect(afterRelease >= Int64(held) && afterRelease < Int64(limit + (16 << 10) + 4096))
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
            let deadline = Date().addingTimeInterval(60)
            for _ in 0..<100_000 where Date() < deadline {
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

extension TestClient {
    /// Polls `server.stats` until the caller's principal holds at least `atLeast` unread
    /// bytes, and returns how many; throws `Timeout` after `timeout` s.
    func bufferedBytes(atLeast: Int, timeout: Double = 30) throws -> Int {
        let deadline = Date().addingTimeInterval(timeout)
        for _ in 0..<100_000 where Date() < deadline {
            let held = Int(try call("server.stats")["bufferedBytes"]?.int64Value ?? 0)
            if held >= atLeast { return held }
            usleep(2000)
        }
        throw Timeout()
    }
}
