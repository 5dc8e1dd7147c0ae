import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// `fetch`: the whole exchange in one call, built on the same request object as the
/// object API (so it has the same semantics and failures), answered at DONE.
extension Server {
    func registerFetch() {
        registry.register("fetch", params: ["method?", "url", "headers?", "body?", "bodyBase64?", "timeout?", "responseType?", "retry?"]) {
            [unowned self] call in
            let s = try session(call)
            try checkAcceptingTransfers()
            let p = call.params
            let method = try HTTPSyntax.method(try p.optionalString("method") ?? "GET")
            let url = try p.string("url")
            try HTTPSyntax.checkURL(url)
            let responseType = try p.optionalWord("responseType", oneOf: ["text", "base64", "json"]) ?? "text"
            let body = try BodyParams.body(p)
            let timeout = try p.optionalSeconds("timeout") ?? 0
            let retry = try p.optionalObject("retry").map { o throws(RPCError) in try RetryPolicy.parse(o) }

            // Its own handle (in no table), so that an interceptor can tell fetches apart.
            let handle = ObjectName.generate(prefix: "fetch_") { _ in false }
            let r = HTTPRequest(handle: handle, principal: s.principal, creator: nil, environment: self)
            r.failsWhenBufferFull = true
            r.retryPolicy = retry
            r.open(method: method, url: url, async: true, user: nil, password: nil,
                   auth: .basic, opener: nil)
            for m in try p.optionalObject("headers")?.members ?? [] {
                guard let value = m.value.stringValue else { throw RPCError.invalidParams("header '\(m.key)' must have a string value") }
                try r.setRequestHeader(m.key, value)
            }
            r.whenDone { [weak r, weak s] in
                guard let r else { return }
                s?.fetches[ObjectIdentifier(r)] = nil
                call.reply(Self.fetchResult(r, responseType: responseType))
                r.release()
            }
            _ = try r.send(body: body, timeout: timeout, call: nil)
            s.fetches[ObjectIdentifier(r)] = r
            return .deferred
        }
    }

    /// `{status, statusText, headers, body, encoding}` from a finished request.
    private static func fetchResult(_ r: HTTPRequest, responseType: String) -> JSONValue {
        let headers = HTTPRequest.headerObject(r.responseHeaders)
        let bytes = r.takeBody()
        var body: JSONValue
        var encoding: String
        let text: String? = responseType == "base64" ? nil
            : (UTF8Cut.validPrefix(bytes[...], allowIncompleteTail: false) == .valid(bytes.count)
                ? String(decoding: bytes, as: UTF8.self) : nil)
        if let text {
            body = .string(text)
            encoding = "utf8"
            if responseType == "json", let value = try? JSON.decode(bytes) {
                body = value
                encoding = "json"
            }
        } else {
            body = .string(Data(bytes).base64EncodedString())
            encoding = "base64"
        }
        return ["status": .int(Int64(r.status)), "statusText": .string(r.statusText), "headers": .object(headers),
                "body": body, "encoding": .string(encoding)]
    }
}
