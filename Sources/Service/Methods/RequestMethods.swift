import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// The request object's methods (api/openrpc.json). Each is declared with its parameters;
/// the dispatcher has checked names and presence before a handler runs.
extension Server {
    func session(_ call: RPCCall) throws(RPCError) -> ClientSession {
        guard let s = call.peer.context as? ClientSession else {
            throw .internalError("the connection has no session")
        }
        return s
    }

    /// The request a call names; naming it counts as using it (`--request-ttl`).
    func request(_ call: RPCCall) throws(RPCError) -> HTTPRequest {
        let r = try session(call).principal.request(try call.params.string("request"))
        r.touch()
        return r
    }

    /// The transfer `pause` and `resume` name: a request object of the principal's, or
    /// a `fetch` in flight on the calling connection (its handle is in no table).
    func transfer(_ call: RPCCall) throws(RPCError) -> HTTPRequest {
        let s = try session(call)
        let name = try call.params.string("request")
        if let f = s.fetches[name] { return f }
        return try request(call)
    }

    /// The handle of a new object of `kind`: the client's `name`, checked and free among
    /// the principal's objects of every kind, or a generated one.
    func newHandle(for s: ClientSession, named name: String?, kind: String) throws(RPCError) -> String {
        guard let name else { return ObjectName.generate { s.principal.objects[$0] != nil } }
        guard ObjectName.isValid(name) else {
            throw RPCError.invalidParams("'\(kind)' must be 1 to 128 of A-Z a-z 0-9 . _ : - and not start with \(ObjectName.generatedPrefix)")
        }
        guard s.principal.objects[name] == nil else { throw ServiceError.alreadyExists(kind: kind, name) }
        return name
    }

    /// Puts a new object in its principal's table, as one the session created.
    func adopt(_ o: any SessionObject, by s: ClientSession) {
        s.principal.add(o)
        s.createdObjects.insert(o.handle)
    }

    /// Declares a method whose one job is to act on an existing request.
    func onRequest(_ name: String, params: [String] = [],
                           _ body: @escaping (HTTPRequest, RPCCall) throws -> JSONValue) {
        registry.register(name, params: ["request"] + params) { [unowned self] call in
            .result(try body(try request(call), call))
        }
    }

    func registerRequestMethods() {
        registry.register("create", params: ["request?"]) { [unowned self] call in
            let s = try session(call)
            try s.principal.check("requests", current: s.principal.count(of: HTTPRequest.self), max: s.principal.limits.requests,
                                  "Too many requests held; release some first")
            let handle = try newHandle(for: s, named: try call.params.optionalString("request"), kind: HTTPRequest.kind)
            adopt(HTTPRequest(handle: handle, principal: s.principal, creator: s, environment: self), by: s)
            call.reply { $0.add(Self.requestKey, string: handle) }  // {"request": handle}, with no tree
            return .answered
        }

        onRequest("open", params: ["method", "url", "async?", "user?", "password?", "auth?", "subscribe?"]) { [unowned self] r, call in
            let p = call.params
            let method = try HTTPSyntax.method(try p.string("method"))
            let url = try p.string("url")
            try HTTPSyntax.checkURL(url)
            let (user, password, auth) = try Self.credential(p)
            let s = try session(call)
            try s.principal.checkMayUse(auth)
            try r.open(method: method, url: url,
                   async: try p.bool("async", default: true), user: user, password: password, auth: auth,
                   opener: try p.bool("subscribe", default: true) ? s : nil)
            return true
        }

        onRequest("setRequestHeader", params: ["header", "value"]) { r, call in
            try r.setRequestHeader(try call.params.string("header"), try call.params.string("value"))
            return true
        }

        onRequest("setPostValue", params: ["key", "value"]) { r, call in
            try r.setPostValue(try call.params.string("key"), try call.params.string("value"))
            return true
        }

        // `value` is required (api/openrpc.json), and may be null: declared optional so
        // that the dispatcher, which takes a null for a missing value, lets null through.
        onRequest("setJSONBody", params: ["value?"]) { r, call in
            guard let value = call.params.object["value"] else { throw RPCError.invalidParams("'value' is required") }
            try r.setJSONBody(value)
            return true
        }

        onRequest("addMultipartPart", params: ["name", "value?", "filename?", "contentType?", "dataBase64?", "path?"]) { [unowned self] r, call in
            try r.addMultipartPart(try MultipartPart.parse(.object(call.params.object), uploadRoot: fileRoot(.upload, for: r.principal)))
            return true
        }

        onRequest("clearPostValues") { r, _ in
            try r.clearPostValues()
            return true
        }

        onRequest("disableFollowLocation") { r, _ in
            try r.checkOptionsAllowed("disableFollowLocation")
            r.followRedirects = false
            return true
        }

        onRequest("disableCookieHandling") { r, _ in
            try r.checkOptionsAllowed("disableCookieHandling")
            r.handlesCookies = false
            return true
        }

        // Takes effect at once, unlike the other pre-send calls: it acts on the
        // principal's jar, not on this request, and a clear that waited for a send that
        // may never come would surprise. The request only says who is asking.
        onRequest("clearCookies", params: ["includePersistentStore?"]) { [unowned self] r, call in
            let includeStore = try call.params.bool("includePersistentStore", default: false)
            try r.checkOptionsAllowed("clearCookies")
            try cookies.clear(r.principal, includingStore: includeStore)
            return true
        }

        onRequest("setPipelining", params: ["enabled"]) { r, call in
            let on = try call.params.bool("enabled", default: true)
            try r.checkOptionsAllowed("setPipelining")
            r.multiplexing = on
            return true
        }

        registerSend("send", params: ["body?", "bodyBase64?", "timeout?"]) { _, p in try BodyParams.body(p) }
        registerSend("sendData", params: ["data", "timeout?"]) { _, p in
            .bytes(try Base64Param.decode(try p.string("data"), name: "data"))
        }
        // The rule of `upload {path}` and multipart file parts (`ConfinedPath`).
        registerSend("sendWithFile", params: ["path", "timeout?"]) { [unowned self] r, p in
            let root = try requireFileRoot(.upload, for: r.principal, "sendWithFile")
            return .file(try ConfinedPath.openForReading(try p.string("path"), in: root))
        }

        onRequest("getState") { r, _ in
            var o: JSONObject = ["state": .int(Int64(r.state.rawValue)), "stateName": .string(r.state.name),
                                 "attempt": .int(Int64(r.attempt))]
            r.markPaused(&o)
            return .object(o)
        }

        registry.register("pause", params: ["request"]) { [unowned self] call in
            try transfer(call).pause()
            return .result(true)
        }
        registry.register("resume", params: ["request"]) { [unowned self] call in
            try transfer(call).resume()
            return .result(true)
        }

        onRequest("setRetryPolicy", params: ["maxAttempts", "initialDelay?", "maxDelay?", "retryOn?"]) { r, call in
            try r.checkOptionsAllowed("setRetryPolicy")
            var settings = call.params.object
            settings["request"] = nil
            r.retryPolicy = try RetryPolicy.parse(settings)
            return true
        }
        onRequest("getStatus") { r, _ in .int(Int64(r.status)) }
        onRequest("getStatusText") { r, _ in .string(r.statusText) }
        onRequest("getResponseHeader", params: ["header"]) { r, call in
            .string(r.responseHeader(try call.params.string("header")))
        }
        onRequest("getAllResponseHeaders") { r, _ in .string(r.allResponseHeaders) }

        registry.register("getReceiveBuffer", params: ["request", "encoding?", "maxBytes?"]) { [unowned self] call in
            let r = try request(call)
            let (max, encoding) = try ReadParams.parse(call.params)
            try call.reply { o in
                try r.readBody(maxBytes: max, encoding: encoding, into: &o)
            }
            return .answered
        }

        onRequest("abort") { r, _ in .bool(r.abort()) }
        onRequest("close") { r, _ in .bool(r.close()) }
        onRequest("release") { [unowned self] r, _ in
            release(r)
            return true
        }

        registry.register("list", params: []) { [unowned self] call in
            let s = try session(call)
            let items = s.principal.objects.values.sorted { $0.handle < $1.handle }.map(\.listEntry)
            return .result(.array(items))
        }
    }

    /// `create`'s one result key, written once.
    private static let requestKey = JSONKey("request")

    /// `user`, `password` and `auth` of `open`, and of `fetch`'s `credential`.
    static func credential(_ p: Params) throws(RPCError) -> (user: String?, password: String?, auth: AuthScheme) {
        let auth = try p.optionalWord("auth", oneOf: AuthScheme.allNames).flatMap(AuthScheme.init(rawValue:)) ?? .basic
        let user = try p.optionalString("user")
        let password = try p.optionalString("password")
        try HTTPSyntax.checkCredential(user, name: "user")
        try HTTPSyntax.checkCredential(password, name: "password")
        return (user, password, auth)
    }

    /// The three sends differ only in where the body comes from.
    private func registerSend(_ name: String, params: [String], body: @escaping (HTTPRequest, Params) throws -> TransferBody) {
        registry.register(name, params: ["request"] + params) { [unowned self] call in
            let r = try request(call)
            try checkAcceptingTransfers()
            try r.checkCanSend(name)
            let transferBody = try body(r, call.params)
            let timeout = try call.params.optionalSeconds("timeout") ?? 0
            let isAsync = try r.send(body: transferBody, timeout: timeout, call: call)
            return isAsync ? .result(true) : .deferred
        }
    }
}

extension AuthScheme {
    static var allNames: [String] { ["BASIC", "DIGEST", "NEGOTIATE", "NTLM"] }
}
