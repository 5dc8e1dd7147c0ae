import Foundation
import JSON

/// A whole response, as `fetch` gives it.
public struct FetchResponse: Sendable {
    public var status: Int
    public var statusText: String
    /// By name as the server sent them (repeated names joined with ", ").
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// The helpers over the request object that every client writes otherwise.
extension XHRPCClient {
    /// The `fetch` method: one exchange, answered when the response is complete (the
    /// body must fit in the server's `--max-buffer-bytes`; use `download` beyond).
    public func fetch(_ url: String, method: String = "GET", headers: [(String, String)] = [], body: [UInt8]? = nil,
                      timeout: Double? = nil) async throws -> FetchResponse {
        var params: JSONObject = ["url": .string(url), "method": .string(method), "responseType": "base64"]
        if !headers.isEmpty { params["headers"] = .object(JSONObject(headers.map { ($0.0, JSONValue.string($0.1)) })) }
        if let body { params["bodyBase64"] = .string(Data(body).base64EncodedString()) }
        if let timeout { params["timeout"] = .double(timeout) }
        let r = try await call("fetch", .object(params))
        let headerPairs = (r["headers"]?.objectValue?.members ?? []).map { (name: $0.key, value: $0.value.stringValue ?? "") }
        return FetchResponse(status: Int(r["status"]?.int64Value ?? 0), statusText: r["statusText"]?.stringValue ?? "",
                             headers: headerPairs, body: try Self.bytes(of: r["body"], encoding: r["encoding"]))
    }

    /// Starts a request on the object API: `create`, then `open`, the headers and `send`
    /// in one batch (the first failure among them is thrown). Returns its handle; the
    /// caller reads it (`readBody`) and releases it.
    public func startRequest(_ url: String, method: String = "GET", headers: [(String, String)] = [],
                             body: [UInt8]? = nil, timeout: Double? = nil) async throws -> String {
        let handle = try await call("create")["request"]?.stringValue ?? ""
        var calls: [(method: String, params: JSONValue?)] = [
            ("open", ["request": .string(handle), "method": .string(method), "url": .string(url), "subscribe": false]),
        ]
        for (name, value) in headers {
            calls.append(("setRequestHeader", ["request": .string(handle), "header": .string(name), "value": .string(value)]))
        }
        var send: JSONObject = ["request": .string(handle)]
        if let body { send["bodyBase64"] = .string(Data(body).base64EncodedString()) }
        if let timeout { send["timeout"] = .double(timeout) }
        calls.append(("send", .object(send)))
        for outcome in try await batch(calls) { _ = try outcome.get() }
        return handle
    }

    /// Reads a request's body to its end: `getReceiveBuffer` until it says `done`, each
    /// piece handed to `sink` as it comes (so a large body needs no memory of its own
    /// here). `head` runs once, before the first piece (or at the end when there is
    /// none): the response head is in by then. Between empty reads it waits a little
    /// (10 ms, then up to 100 ms).
    public func readBody(_ request: String, maxBytesPerCall: Int = 4 << 20,
                         head: (() async throws -> Void)? = nil,
                         _ sink: ([UInt8]) throws -> Void) async throws {
        var idle = 0
        var headSeen = false
        while true {
            let chunk = try await call("getReceiveBuffer", ["request": .string(request), "maxBytes": .int(Int64(maxBytesPerCall))])
            let bytes = try Self.bytes(of: chunk["data"], encoding: chunk["encoding"])
            let done = chunk["done"]?.boolValue == true
            if !headSeen, !bytes.isEmpty || done {
                headSeen = true
                try await head?()
            }
            if !bytes.isEmpty {
                try sink(bytes)
                idle = 0
            }
            if done { return }
            if bytes.isEmpty {
                idle += 1
                try await Task.sleep(nanoseconds: UInt64(min(10 * idle, 100)) * 1_000_000)
            }
        }
    }

    /// Reads a request's whole body into memory.
    public func readBody(_ request: String) async throws -> [UInt8] {
        var out: [UInt8] = []
        try await readBody(request) { out += $0 }
        return out
    }

    /// Downloads `url` into the file at `path`, through `PATH.part` renamed when the
    /// body is complete. `progress(received, total)` is called as bytes arrive; `total`
    /// is -1 while unknown (no Content-Length, or a coded body). Returns the final
    /// status and text; a request that gets no response throws with the status text.
    @discardableResult
    public func download(_ url: String, to path: String, method: String = "GET", headers: [(String, String)] = [],
                         timeout: Double? = nil,
                         progress: ((_ received: Int64, _ total: Int64) -> Void)? = nil) async throws -> (status: Int, statusText: String) {
        let handle = try await startRequest(url, method: method, headers: headers, timeout: timeout)
        defer { notify("release", ["request": .string(handle)]) }
        let partPath = path + ".part"
        guard FileManager.default.createFile(atPath: partPath, contents: nil),
              let file = FileHandle(forWritingAtPath: partPath) else {
            throw XHRPCError.connection("cannot write \(partPath)")
        }
        var received: Int64 = 0
        var total: Int64 = -1
        do {
            try await readBody(handle, head: { total = try await self.expectedLength(handle) ?? -1 }) { bytes in
                try file.write(contentsOf: bytes)
                received += Int64(bytes.count)
                progress?(received, total)
            }
            try file.close()
        } catch {
            try? file.close()
            try? FileManager.default.removeItem(atPath: partPath)
            throw error
        }
        let status = Int(try await call("getStatus", ["request": .string(handle)]).int64Value ?? 0)
        let statusText = try await call("getStatusText", ["request": .string(handle)]).stringValue ?? ""
        guard status != 0 else {
            try? FileManager.default.removeItem(atPath: partPath)
            throw XHRPCError.connection(statusText)
        }
        if received == 0 { progress?(0, max(total, 0)) }
        _ = try? FileManager.default.removeItem(atPath: path)
        try FileManager.default.moveItem(atPath: partPath, toPath: path)
        return (status, statusText)
    }

    /// The body length the response announced, when its bytes arrive as announced
    /// (no Content-Encoding, which the server decodes); nil when unknown.
    public func expectedLength(_ handle: String) async throws -> Int64? {
        let coding = try await call("getResponseHeader", ["request": .string(handle), "header": "Content-Encoding"])
        guard coding.stringValue?.isEmpty ?? true else { return nil }
        return try await call("getResponseHeader", ["request": .string(handle), "header": "Content-Length"])
            .stringValue.flatMap { Int64($0) }
    }

    /// The bytes of a `data`/`body` member in its `encoding` (base64 or utf8).
    static func bytes(of value: JSONValue?, encoding: JSONValue?) throws -> [UInt8] {
        guard let text = value?.stringValue else { return [] }
        if encoding?.stringValue == "utf8" { return Array(text.utf8) }
        guard let data = Data(base64Encoded: text) else { throw XHRPCError.protocolViolation("a body that is not base64") }
        return [UInt8](data)
    }
}
