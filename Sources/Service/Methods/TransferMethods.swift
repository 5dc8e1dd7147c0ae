import Foundation
import HTTPEngine
import JSON
import JSONRPC

/// `upload` and `download` (docs/guide/fetch-and-transfers.md): conveniences, each an ordinary request object
/// (its handle answered at once, then `getState`, `list`, `abort`, `release` and the
/// notifications as for any request) made, opened and sent in one call. The caller's
/// connection is its opener (told its state changes); progress goes to subscribers
/// (`subscribe {request}`, which a client can send in the same batch).
extension Server {
    func registerTransferMethods() {
        registry.register("upload", params: ["url", "method?", "path?", "dataBase64?", "multipart?", "headers?", "request?",
                                             "timeout?"]) {
            [unowned self] call in
            let s = try session(call)
            try checkAcceptingTransfers()
            let p = call.params
            let url = try p.string("url")
            try HTTPSyntax.checkURL(url)
            let method = try HTTPSyntax.method(try p.optionalString("method") ?? "POST")
            guard method != "GET", method != "HEAD" else { throw RPCError.invalidParams("an upload's method cannot be \(method)") }
            let given = ["path", "dataBase64", "multipart"].filter { p.has($0) }
            guard given.count == 1 else {
                throw RPCError.invalidParams("give exactly one of 'path', 'dataBase64' or 'multipart'"
                                             + (given.isEmpty ? "" : " (got \(given.joined(separator: ", ")))"))
            }
            var body = TransferBody.none
            if let path = try p.optionalString("path") {
                let root = try requireFileRoot(.upload, for: s.principal, "upload of a path")
                body = .file(try ConfinedPath.openForReading(path, in: root))
            } else if let data = try p.optionalString("dataBase64") {
                body = .bytes(try Base64Param.decode(data, name: "dataBase64"))
            }
            let r = try startTransferObject(s, call, method: method, url: url)
            do {
                // A multipart body is the object's serializer, as addMultipartPart fills it.
                if let parts = p["multipart"] { try addMultipartParts(parts, to: r) }
                // Unlike sendWithFile (whose file makes a POST a PUT), an upload keeps its method.
                r.keepsMethodWithFile = true
                _ = try r.send(body: body, timeout: try p.optionalSeconds("timeout") ?? 0, call: nil)
            } catch {
                release(r)
                throw error
            }
            return .result(["request": .string(r.handle)])
        }

        registry.register("download", params: ["url", "path", "headers?", "resume?", "request?", "timeout?"]) {
            [unowned self] call in
            let s = try session(call)
            try checkAcceptingTransfers()
            let p = call.params
            let url = try p.string("url")
            try HTTPSyntax.checkURL(url)
            let root = try requireFileRoot(.download, for: s.principal, "download")
            for m in try p.optionalObject("headers")?.members ?? [] where ["range", "if-range"].contains(m.key.lowercased()) {
                throw RPCError.invalidParams("download sets '\(m.key)' itself (resume: true)")
            }
            // The handle is checked before the file is touched; startTransferObject takes it.
            _ = try newHandle(for: s, named: try p.optionalString("request"), kind: HTTPRequest.kind)
            let file = try DownloadFile.open(try p.string("path"), root: root, resume: try p.bool("resume", default: false))
            let r: HTTPRequest
            do {
                r = try startTransferObject(s, call, method: "GET", url: url)
            } catch {
                file.close()
                throw error
            }
            do {
                try r.sendsIntoFile(file)
                _ = try r.send(body: .none, timeout: try p.optionalSeconds("timeout") ?? 0, call: nil)
            } catch {
                release(r)
                throw error
            }
            return .result(["request": .string(r.handle), "path": .string(file.path)])
        }
    }

    /// A new request object of the caller's, opened with `method` and `url` and the
    /// call's `headers`, ready to send; released again if a header is refused.
    private func startTransferObject(_ s: ClientSession, _ call: RPCCall, method: String, url: String) throws(RPCError) -> HTTPRequest {
        let p = call.params
        try s.principal.check("requests", current: s.principal.count(of: HTTPRequest.self), max: s.principal.limits.requests,
                              "Too many requests held; release some first")
        let handle = try newHandle(for: s, named: try p.optionalString("request"), kind: HTTPRequest.kind)
        let r = HTTPRequest(handle: handle, principal: s.principal, creator: s, environment: self)
        adopt(r, by: s)
        try r.open(method: method, url: url, async: true, user: nil, password: nil, auth: .basic, opener: s)
        // The caller hears the transfer's progress, as it hears its state changes.
        r.openerGetsProgress = true
        do throws(RPCError) {
            for m in try p.optionalObject("headers")?.members ?? [] {
                guard let value = m.value.stringValue else { throw RPCError.invalidParams("header '\(m.key)' must have a string value") }
                try r.setRequestHeader(m.key, value)
            }
        } catch {
            release(r)
            throw error
        }
        return r
    }
}
