import JSON
import JSONRPC

/// `intercept.register` and `intercept.unregister` (api/openrpc.json;
/// docs/guide/interception-and-retries.md). The questions and notices themselves are the request's
/// (`HTTPRequest+Attempts.swift`).
extension Server {
    func registerInterceptMethods() {
        registry.register("intercept.register", params: ["events?", "timeout?", "match?"]) { [unowned self] call in
            let s = try session(call)
            let p = call.params
            let (events, timeout, match) = try Interceptor.parse(events: p["events"], timeout: try p.optionalSeconds("timeout"),
                                                                 match: p["match"])
            if let current = s.principal.interceptor, let owner = current.session, owner.connection.isOpen {
                throw ServiceError.interceptorBusy
            }
            let id = ObjectName.generate(prefix: "icp_") { _ in false }
            s.principal.interceptor = Interceptor(id: id, session: s, events: events, timeout: timeout, match: match)
            logger.info("principal \(s.principal.name) has an interceptor on connection \(s.connection.id)")
            return .result(["interceptor": .string(id)])
        }

        registry.register("intercept.unregister", params: ["interceptor"]) { [unowned self] call in
            let s = try session(call)
            let id = try call.params.string("interceptor")
            guard let current = s.principal.interceptor, current.id == id else { throw ServiceError.unknownInterceptor(id) }
            s.principal.interceptor = nil
            return .result(true)
        }
    }
}
