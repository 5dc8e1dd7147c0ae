import Foundation
import JSON
import Testing

@Suite(.serialized) struct SubscriptionTests {
    @Test func subscriberOnAnotherConnectionSeesEveryTransition() throws {
        try withServer { server, up in
            let owner = try server.connect()
            let watcher = try server.connect()
            try owner.call("create", ["request": "w"])
            let sub = try watcher.call("subscribe", ["request": "w", "events": ["stateChange"]])
            #expect(sub["subscription"]?.stringValue?.hasPrefix("sub_") == true)
            try owner.call("open", ["request": "w", "method": "GET", "url": .string(up.base + "/bytes/10"), "subscribe": false])
            try owner.call("send", ["request": "w"])
            #expect(try watcher.statesUntilDone("w") == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            // The owner opened with subscribe false: it heard nothing.
            _ = try owner.call("server.info")
            #expect(owner.notifications.isEmpty)
        }
    }

    @Test func subscribeAllCoversLaterRequestsAndUnsubscribeStops() throws {
        try withServer { server, up in
            let owner = try server.connect()
            let watcher = try server.connect()
            let sub = try watcher.call("subscribe", ["all": true, "events": ["stateChange"]])
            let r1 = try owner.start(up.base + "/bytes/1", open: ["subscribe": false])
            #expect(try watcher.statesUntilDone(r1) == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            #expect(try watcher.call("unsubscribe", ["subscription": sub["subscription"] ?? nil]) == true)
            let r2 = try owner.start(up.base + "/bytes/1")
            _ = try owner.statesUntilDone(r2)
            _ = try watcher.call("server.info")
            #expect(!watcher.notifications.contains { $0["params"]?["request"]?.stringValue == r2 })
        }
    }

    @Test func progressIsCoalescedAndEndsWithTheTotals() throws {
        try withServer { server, up in
            let c = try server.connect()
            try c.call("create", ["request": "p"])
            try c.call("subscribe", ["request": "p", "events": ["progress"]])
            try c.call("open", ["request": "p", "method": "PUT", "url": .string(up.base + "/echo")])
            let body = Data(count: 3 << 20).base64EncodedString()
            try c.call("send", ["request": "p", "bodyBase64": .string(body)])
            _ = try c.statesUntilDone("p")
            let progress = c.notifications.filter { $0["method"] == "onProgress" }
            // Coalesced: a 3 MiB upload on loopback takes a few ticks at most.
            #expect(progress.count < 40)
            #expect(!progress.isEmpty)
            let written = progress.compactMap { $0["params"]?["bytesWritten"]?.int64Value }.reduce(0, +)
            #expect(written == 3 << 20)
            #expect(progress.last?["params"]?["totalBytesWritten"] == .int(3 << 20))
        }
    }
}
