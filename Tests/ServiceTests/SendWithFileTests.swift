import Foundation
import JSON
import Testing
import TestSupport

@Suite(.serialized) struct SendWithFileTests {
    @Test func uploadsFromTheRootAndRefusesEscapes() throws {
        let root = try makeTemporaryDirectory()
        let outside = try makeTemporaryDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: outside)
        }
        let content = FixturePattern.bytes(count: 5 << 20, seed: 2)
        try Data(content).write(to: URL(fileURLWithPath: root + "/up.bin"))
        try Data("secret".utf8).write(to: URL(fileURLWithPath: outside + "/secret"))
        try FileManager.default.createSymbolicLink(atPath: root + "/link", withDestinationPath: outside + "/secret")
        try withServer({ $0.uploadRoot = root }) { server, up in
            let c = try server.connect()
            try c.call("create", ["request": "f"])
            try c.call("open", ["request": "f", "method": "GET", "url": .string(up.base + "/echo")])
            try c.call("sendWithFile", ["request": "f", "path": "up.bin"])
            _ = try c.statesUntilDone("f")
            let echo = try JSON.decode(try c.readBody("f"))
            #expect(echo["method"] == "PUT")
            #expect(echo["bodyLength"] == .int(Int64(content.count)))
            for path in ["../" + (outside as NSString).lastPathComponent + "/secret", outside + "/secret", "link"] {
                try c.call("open", ["request": "f", "method": "PUT", "url": .string(up.base + "/echo")])
                do {
                    try c.call("sendWithFile", ["request": "f", "path": .string(path)])
                    Issue.record("\(path) was sent")
                } catch let e as TestClient.RPCFailure {
                    #expect(e.reason == "path_not_allowed", "\(path): \(e)")
                }
            }
        }
    }
}
