import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// `fetch`: the whole exchange in one call, built on the same request object as the
/// object API (so it has the same semantics and failures), answered at DONE.
extension Server {
    /// fetch's parameters. The per-request options share their parsing with the object's
    /// pre-send methods (`proxySettings`, `clientCertificate`, `PublicKeyPins`,
    /// `credential`) and its body with theirs (`RequestBody`).
    static let fetchParams = [
        "request?", "method?", "url", "baseURL?", "query?", "headers?",
        "body?", "bodyBase64?", "json?", "form?", "multipart?",
        "credential?", "followRedirects?", "maxRedirects?", "cookies?", "proxy?",
        "disableHostVerification?", "disablePeerVerification?", "clientCertificate?", "pinnedPublicKey?",
        "timeout?", "responseType?", "retry?", "subscribe?",
    ]

    func registerFetch() {
        registry.register("fetch", params: Self.fetchParams) { [unowned self] call in
            let s = try session(call)
            try checkAcceptingTransfers()
            let p = call.params
            let method = try HTTPSyntax.method(try p.optionalString("method") ?? "GET")
            let url = try fetchURL(p)
            let responseType = try p.optionalWord("responseType", oneOf: ["text", "base64", "json"]) ?? "text"
            let timeout = try p.optionalSeconds("timeout") ?? 0
            let retry = try p.optionalObject("retry").map { o throws(RPCError) in try RetryPolicy.parse(o) }
            // `json` may be null, a JSON value like any other.
            let serializers = ["json", "form", "multipart", "body", "bodyBase64"].filter { $0 == "json" ? p.object[$0] != nil : p.has($0) }
            guard serializers.count <= 1 else {
                throw RPCError.invalidParams("give at most one body: \(serializers.map { "'\($0)'" }.joined(separator: " and ")) were given")
            }
            let body = try BodyParams.body(p)
            var (user, password, auth): (String?, String?, AuthScheme) = (nil, nil, .basic)
            if let c = try p.optionalObject("credential") {
                guard c["user"]?.stringValue != nil, c["password"]?.stringValue != nil else {
                    throw RPCError.invalidParams("'credential' must be {user, password, auth?}")
                }
                (user, password, auth) = try Self.credential(Params(c))
                try s.principal.checkMayUse(auth)
            }

            // Its own handle (in no table), so that an interceptor and subscribers can
            // tell fetches apart: the client's name (free among the principal's objects
            // and this connection's fetches) or a generated one.
            let handle: String
            if let name = try p.optionalString("request") {
                handle = try newHandle(for: s, named: name, kind: HTTPRequest.kind)
                guard s.fetches[name] == nil else {
                    throw ServiceError.alreadyExists(kind: HTTPRequest.kind, name)
                }
            } else {
                handle = ObjectName.generate(prefix: "fetch_") { s.fetches[$0] != nil }
            }
            let r = HTTPRequest(handle: handle, principal: s.principal, creator: nil, environment: self)
            r.failsWhenBufferFull = true
            r.retryPolicy = retry
            try r.open(method: method, url: url, async: true, user: user, password: password,
                   auth: auth, opener: nil)
            for m in try p.optionalObject("headers")?.members ?? [] {
                guard let value = m.value.stringValue else { throw RPCError.invalidParams("header '\(m.key)' must have a string value") }
                try r.setRequestHeader(m.key, value)
            }
            try applyFetchBody(p, to: r)
            try applyFetchOptions(p, to: r)

            // subscribe: true — state changes and progress on this connection, through a
            // subscription of its own (counted as `subscribe`'s are) that ends with the fetch.
            let subscription = try p.bool("subscribe", default: false)
                ? try s.subscribe(to: handle, events: [.stateChange, .progress]) : nil
            // One closure (one object per fetch), holding the session weakly.
            r.whenDone { [weak r, weak s] in
                guard let r else { return }
                s?.fetches[r.handle] = nil
                if let id = subscription { s?.unsubscribe(id) }
                Self.answer(call, r, responseType: responseType)
                r.release()
            }
            do {
                _ = try r.send(body: body, timeout: timeout, call: nil)
            } catch {
                if let id = subscription { s.unsubscribe(id) }
                throw error
            }
            s.fetches[handle] = r
            return .deferred
        }
    }

    /// `url`, resolved against `baseURL` when one is given (RFC 3986 §5.2), with
    /// `query` appended; checked as `open` checks its URL.
    private func fetchURL(_ p: Params) throws(RPCError) -> String {
        var url = try p.string("url")
        if let base = try p.optionalString("baseURL") {
            do {
                try HTTPSyntax.checkURL(base)
            } catch {
                throw RPCError.invalidParams("'baseURL' must be an absolute http or https URL: \(error.explanation)")
            }
            url = URLReference.resolve(url, against: base)
        }
        if let query = try p.optionalObject("query") {
            url = try URLReference.appendingQuery(query, to: url)
        }
        try HTTPSyntax.checkURL(url)
        return url
    }

    /// `json`, `form` or `multipart` into the request's serializer, as `setJSONBody`,
    /// `setPostValue` and `addMultipartPart` put them there.
    private func applyFetchBody(_ p: Params, to r: HTTPRequest) throws(RPCError) {
        if let value = p.object["json"] {
            try r.setJSONBody(value)
        }
        if let form = try p.optionalObject("form") {
            for m in form.members {
                guard let value = m.value.stringValue else { throw RPCError.invalidParams("'form' values must be strings ('\(m.key)')") }
                try r.setPostValue(m.key, value)
            }
        }
        if let parts = p["multipart"] { try addMultipartParts(parts, to: r) }
    }

    /// The parts of a `multipart` parameter (`fetch`, `upload`), each added as
    /// `addMultipartPart` adds one.
    func addMultipartParts(_ parts: JSONValue, to r: HTTPRequest) throws(RPCError) {
        guard let items = parts.arrayValue, !items.isEmpty else {
            throw RPCError.invalidParams("'multipart' must be a non-empty array of parts")
        }
        for item in items {
            try r.addMultipartPart(try MultipartPart.parse(item, uploadRoot: fileRoot(.upload, for: r.principal)))
        }
    }

    /// The per-request options, each set as its pre-send method sets it.
    private func applyFetchOptions(_ p: Params, to r: HTTPRequest) throws(RPCError) {
        r.followRedirects = try p.bool("followRedirects", default: true)
        if let max = try p.optionalInt("maxRedirects", in: 0...Int64(requestSettings.maxRedirects)) {
            r.maxRedirects = Int(max)
        }
        r.handlesCookies = try p.bool("cookies", default: true)
        if let proxy = try p.optionalObject("proxy") { r.proxy = try Self.proxySettings(Params(proxy)) }
        if try p.bool("disableHostVerification", default: false) { r.verifyHost = false }
        if try p.bool("disablePeerVerification", default: false) {
            r.verifyPeer = false
            r.verifyHost = false
        }
        if let cert = try p.optionalObject("clientCertificate") { r.clientCertificate = try clientCertificate(Params(cert)) }
        if let pins = try p.optionalString("pinnedPublicKey") {
            try PublicKeyPins.check(pins)
            r.pinnedPublicKey = pins
        }
    }

    /// Answers a finished fetch: `{request, status, statusText, headers, body,
    /// encoding}`. With `responseType` json a response whose body is not JSON is an
    /// error (`request_failed`) that says so and carries the same members, the body as
    /// text or base64; an empty body is `null`, and no response at all (status 0) is
    /// answered as usual.
    ///
    /// Every fetch ends here, so the result is written straight as bytes into the
    /// response (`RPCCall.reply(object:)`, keys written once: `ResultKeys`), the same
    /// bytes as the `JSONObject` of these members would give.
    private static func answer(_ call: RPCCall, _ r: HTTPRequest, responseType: String) {
        let bytes = r.takeBody()
        let isText = responseType != "base64"
            && UTF8Cut.validPrefix(bytes[...], allowIncompleteTail: false) == .valid(bytes.count)
        var body: ResultBody
        var encoding: JSONConstantMembers
        if isText {
            body = .text(bytes)  // valid UTF-8: written as the string's text, no string made
            encoding = ResultKeys.utf8
        } else {
            body = .base64(bytes)
            encoding = ResultKeys.base64
        }
        if responseType == "json" && r.status != 0 {
            if bytes.isEmpty {
                (body, encoding) = (.value(.null), ResultKeys.json)
            } else if let value = try? JSON.decode(bytes) {
                (body, encoding) = (.value(value), ResultKeys.json)
            } else {
                // The error carries the result as it would have been (rare: decoded again).
                var result = JSONObjectWriter()
                writeResult(r, body: body, encoding: encoding, into: &result)
                call.fail(ServiceError.responseNotJSON(status: r.status, result.finish().decoded().objectValue ?? [:]))
                return
            }
        }
        call.reply { writeResult(r, body: body, encoding: encoding, into: &$0) }
    }

    /// The body member of fetch's result: UTF-8 text as its bytes, bytes written as
    /// base64, or a value. Neither bytes case makes a `String` first.
    private enum ResultBody {
        case text([UInt8])
        case base64([UInt8])
        case value(JSONValue)
    }

    /// fetch's result's keys, and its last member in each of its three forms, written once.
    private enum ResultKeys {
        static let request = JSONKey("request")
        static let status = JSONKey("status")
        static let statusText = JSONKey("statusText")
        static let headers = JSONKey("headers")
        static let body = JSONKey("body")
        static let utf8 = JSONConstantMembers(["encoding": "utf8"])
        static let base64 = JSONConstantMembers(["encoding": "base64"])
        static let json = JSONConstantMembers(["encoding": "json"])
    }

    /// fetch's result's members, `encoding` being one of `ResultKeys`' three.
    private static func writeResult(_ r: HTTPRequest, body: ResultBody, encoding: JSONConstantMembers,
                                    into result: inout JSONObjectWriter) {
        let bodySize = switch body {
        case .text(let bytes): bytes.count
        case .base64(let bytes): Base64Text.encodedCount(bytes.count)
        case .value(let value): value.stringValue?.utf8.count ?? 0
        }
        result.reserveCapacity(forMore: 1024 + bodySize)  // the body, and room for the rest
        result.add(ResultKeys.request, string: r.handle)
        result.add(ResultKeys.status, int: Int64(r.status))
        result.add(ResultKeys.statusText, string: r.statusText)
        result.addObject(ResultKeys.headers) { HTTPRequest.writeHeaderObject(r.responseHeaders, into: &$0) }
        switch body {
        case .text(let bytes): bytes.withUnsafeBufferPointer { result.add(ResultKeys.body, utf8String: $0) }
        case .base64(let bytes):
            bytes.withUnsafeBufferPointer { bytes in
                result.add(ResultKeys.body, unescapedStringOfCount: Base64Text.encodedCount(bytes.count)) {
                    Base64Text.encode(bytes, inPieces: $0)
                }
            }
        case .value(let value): result.add(ResultKeys.body, value)
        }
        result.add(encoding)
    }
}
