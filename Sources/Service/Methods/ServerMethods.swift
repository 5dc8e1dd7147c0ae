import Foundation
import JSON
import JSONRPC

/// `rpc.discover` and `server.info`.
extension Server {
    /// The OpenRPC document, parsed once from the text embedded at build time.
    static let openRPCDocument: JSONValue = {
        do {
            return try JSON.decode(openRPCDocumentText)
        } catch {
            preconditionFailure("api/openrpc.json embedded in the binary is not JSON: \(error)")
        }
    }()

    func registerServerMethods() {
        registry.register("rpc.discover", params: []) { _ in .result(Server.openRPCDocument) }
        registry.register("server.info", params: []) { [unowned self] _ in
            .result([
                "name": .string(Server.name), "version": .string(Server.version),
                "uptimeSeconds": .double((Date().timeIntervalSince(startedAt) * 1000).rounded() / 1000),
                "connections": .int(Int64(connectionCount)),
            ])
        }
    }
}
