import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct RequestLifecycleTests {
    @Test func smallResponseReportsEveryStateOnceInOrder() throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + "/bytes/100")
            #expect(try c.statesUntilDone(r) == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            #expect(try c.call("getState", ["request": .string(r)]) == ["state": 5, "stateName": "DONE", "attempt": 1])
            #expect(try c.call("getStatus", ["request": .string(r)]) == 200)
            #expect(try c.call("getStatusText", ["request": .string(r)]) == "OK")
            #expect(try c.call("getResponseHeader", ["request": .string(r), "header": "content-length"]) == "100")
            #expect(try c.call("getResponseHeader", ["request": .string(r), "header": "X-Absent"]) == "")
            let all = try c.call("getAllResponseHeaders", ["request": .string(r)]).stringValue ?? ""
            #expect(all.split(separator: "\n").contains("Content-Length: 100"))
            #expect(try c.readBody(r) == FixturePattern.bytes(count: 100))
            // Nothing twice: the buffer is empty and done.
            #expect(try c.call("getReceiveBuffer", ["request": .string(r)]) == ["data": "", "encoding": "base64", "bytes": 0, "done": true])
        }
    }

    @Test func headAnd204AndStatusTexts() throws {
        try withServer { server, up in
            let c = try server.connect()
            let h = try c.start(up.base + "/bytes/5000", method: "HEAD")
            #expect(try c.statesUntilDone(h) == ["OPENED", "SENT", "HEADERS_RECEIVED", "LOADING", "DONE"])
            #expect(try c.call("getStatus", ["request": .string(h)]) == 200)
            #expect(try c.readBody(h).isEmpty)
            let n = try c.start(up.base + "/status/204")
            _ = try c.statesUntilDone(n)
            #expect(try c.call("getStatus", ["request": .string(n)]) == 204)
            let custom = try c.start(up.base + "/status/418?reason=Short%20and%20stout")
            _ = try c.statesUntilDone(custom)
            #expect(try c.call("getStatusText", ["request": .string(custom)]) == "Short and stout")
            let bare = try c.start(up.base + "/no-reason/404")
            _ = try c.statesUntilDone(bare)
            #expect(try c.call("getStatusText", ["request": .string(bare)]) == "Not Found")
        }
    }

    @Test func redirectsFollowedByDefaultAndNotWhenDisabled() throws {
        try withServer { server, up in
            let c = try server.connect()
            let r = try c.start(up.base + "/redirect/3")
            _ = try c.statesUntilDone(r)
            #expect(try c.call("getStatus", ["request": .string(r)]) == 200)
            #expect(try c.readBody(r) == Array("done".utf8))
            try c.call("create", ["request": "nofollow"])
            try c.call("disableFollowLocation", ["request": "nofollow"])
            try c.call("open", ["request": "nofollow", "method": "GET", "url": .string(up.base + "/redirect/3")])
            try c.call("send", ["request": "nofollow"])
            _ = try c.statesUntilDone("nofollow")
            #expect(try c.call("getStatus", ["request": "nofollow"]) == 302)
            #expect(try c.call("getResponseHeader", ["request": "nofollow", "header": "location"]) == "/redirect/2")
        }
    }

    @Test func requestBodiesHeadersAndFormValuesReachTheServer() throws {
        try withServer { server, up in
            let c = try server.connect()
            try c.call("create", ["request": "post"])
            try c.call("open", ["request": "post", "method": "post", "url": .string(up.base + "/echo")])
            try c.call("setRequestHeader", ["request": "post", "header": "X-One", "value": "a"])
            try c.call("setRequestHeader", ["request": "post", "header": "x-one", "value": "b"])
            let bytes: [UInt8] = (0..<70000).map { UInt8(truncatingIfNeeded: $0 * 7) }
            try c.call("send", ["request": "post", "bodyBase64": .string(Data(bytes).base64EncodedString())])
            _ = try c.statesUntilDone("post")
            let echo = try JSON.decode(try c.readBody("post"))
            #expect(echo["method"] == "POST")
            #expect(echo["headers"]?["x-one"] == "a, b")
            #expect(echo["bodyBase64"]?.stringValue == Data(bytes).base64EncodedString())

            try c.call("create", ["request": "form"])
            try c.call("open", ["request": "form", "method": "POST", "url": .string(up.base + "/echo")])
            try c.call("setPostValue", ["request": "form", "key": "a b", "value": "ü&"])
            try c.call("setPostValue", ["request": "form", "key": "x", "value": "1"])
            try c.call("send", ["request": "form"])
            _ = try c.statesUntilDone("form")
            let form = try JSON.decode(try c.readBody("form"))
            #expect(form["headers"]?["content-type"] == "application/x-www-form-urlencoded")
            #expect(form["bodyBase64"]?.stringValue.flatMap { Data(base64Encoded: $0) } == Data("a+b=%C3%BC%26&x=1".utf8))
        }
    }

    @Test func syncSendAnswersAtDoneWhileTheConnectionKeepsServing() throws {
        try withServer { server, up in
            let c = try server.connect()
            try c.call("create", ["request": "s"])
            try c.call("open", ["request": "s", "method": "GET", "url": .string(up.base + "/delay/300"), "async": false])
            let sendID = c.send("send", ["request": "s"])
            // Served while the send waits.
            let info = try c.call("server.info")
            #expect(info["name"] == "xhrpcd")
            let reply = try c.response(sendID)
            #expect(reply["result"] == ["state": 5, "stateName": "DONE", "status": 200, "statusText": "OK"])
            #expect(try c.readBody("s") == Array("ok".utf8))
        }
    }

    @Test func utf8ReadsInSmallStepsLoseNothing() throws {
        try withServer { server, up in
            let c = try server.connect()
            // Read as utf8 three bytes at a time (splitting characters is covered by UTF8Cut's unit test).
            let r = try c.start(up.base + "/echo", method: "POST", send: ["body": "héllo €"])
            _ = try c.statesUntilDone(r)
            var text = ""
            for _ in 0..<10000 {
                let chunk = try c.call("getReceiveBuffer", ["request": .string(r), "encoding": "utf8", "maxBytes": 3])
                text += chunk["data"]?.stringValue ?? ""
                if chunk["done"] == true { break }
            }
            #expect(try JSON.decode(text)["bodyBase64"] == .string(Data("héllo €".utf8).base64EncodedString()))
        }
    }
}
