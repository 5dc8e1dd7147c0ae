import EventLoop
import Foundation
import JSON
import JSONRPC
import Logging
import Testing
@testable import Service
import TestSupport

/// api/openrpc.json is the contract: the server's methods and the document's are the
/// same set, with the same parameter names in the same order.
@Test func registeredMethodsMatchTheOpenRPCDocument() throws {
    let loop = try Loop()
    let server = try Server(config: ServerConfig(), loop: loop, logger: Logger(label: "contract"))
    let text = try String(contentsOfFile: Repository.root + "/api/openrpc.json", encoding: .utf8)
    let doc = try JSON.decode(text)
    var documented: [String: [String]] = [:]
    for m in doc["methods"]?.arrayValue ?? [] {
        documented[m["name"]?.stringValue ?? "?"] = (m["params"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue }
    }
    #expect(server.methodParameterNames == documented)
    #expect(Server.openRPCDocument == doc)
    // Every application error reason, and every reason of a -32602 refusal, is
    // documented, with its code.
    let errors = doc["components"]?["errors"]?.objectValue?.members ?? []
    func reasons(_ code: (Int64) -> Bool) -> Set<String> {
        Set(errors.filter { code($0.value["code"]?.int64Value ?? 0) }.compactMap { $0.value["data"]?["reason"]?.stringValue })
    }
    #expect(reasons { $0 != -32602 } == Set(RPCError.Reason.allCases.map(\.rawValue)))
    #expect(reasons { $0 == -32602 } == Set(RPCError.ParamsReason.allCases.map(\.rawValue)))
    for e in errors {
        if let reason = e.value["data"]?["reason"]?.stringValue, let r = RPCError.Reason(rawValue: reason) {
            #expect(e.value["code"]?.int64Value == Int64(r.code), "\(reason)")
        }
    }
    var done = false
    server.shutdown { done = true }
    loop.run()
    #expect(done)
    try loop.close()
}
