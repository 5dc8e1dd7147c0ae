import Foundation
import JSON
import Testing
@testable import Service

/// `--request-ttl`: a request that is not in flight and that no call names for the TTL
/// is released; one that a call names, or one in flight, stays. The server runs on a
/// manual clock, so every expiry happens exactly when the test moves time past it.
@Suite(.serialized) struct RequestExpiryTests {
    @Test func unusedRequestsExpireAndUsedOrInFlightOnesStay() throws {
        let time = ManualClock()
        try withServer({ config in
            config.clock = time.clock
            config.requestTTL = 0.4
        }) { server, up in
            let c = try server.connect()
            let read = try c.start(up.base + "/bytes/10", name: "read")
            let unread = try c.start(up.base + "/bytes/10", name: "unread")
            #expect(try c.statesUntilDone(read).last == "DONE")
            #expect(try c.statesUntilDone(unread).last == "DONE")
            try c.call("create", ["request": "unsent"])
            // Headers, then nothing for a minute: in flight the whole test.
            let flying = try c.start(up.base + "/drip/2?hold=60000", name: "flying")
            _ = try c.waitNotification {
                $0["params"]?["request"]?.stringValue == flying && $0["params"]?["stateName"] == "HEADERS_RECEIVED"
            }

            time.advance(0.3)
            #expect(try c.call("getState", ["request": .string(read)])["stateName"] == "DONE")
            time.advance(0.2)
            // `unread` and `unsent` are 0.5 s unused, `read` 0.2 s, `flying` in flight.
            try c.waitUntilReleased([unread, "unsent"])
            #expect(try c.listedHandles() == [flying, read])
            #expect(try c.failureReason("getState", ["request": .string(unread)]) == "unknown_handle")
            #expect(try c.failureReason("getReceiveBuffer", ["request": "unsent"]) == "unknown_handle")

            // In flight for ever longer than the TTL, still there; once DONE it counts
            // from then, not from its last call.
            time.advance(10)
            try c.waitUntilReleased([read])
            #expect(try c.listedHandles() == [flying])
            #expect(try c.call("abort", ["request": .string(flying)]) == true)
            time.advance(0.3)
            #expect(try c.call("getState", ["request": .string(flying)])["stateName"] == "DONE")
        }
    }
}
