import Foundation
import JSON

/// A notification from the server (`onStateChange`, `onProgress`, `onShutdown`, …).
public struct ServerNotification: Sendable {
    public var method: String
    public var params: JSONValue
}

/// A client of xhrpcd: one connection, any number of calls in flight on it.
///
/// ```swift
/// let client = try await XHRPCClient.connect(.unix(path: nil))
/// let info = try await client.call("server.info")
/// let response = try await client.fetch("http://127.0.0.1:8080/hello.txt")
/// ```
///
/// Calls may be made from any task, concurrently; answers are matched by id.
/// Notifications arrive in order on `notifications`, an `AsyncStream` that ends when
/// the connection does. The connection runs on a thread of its own (`ClientLoop`).
public final class XHRPCClient: Sendable {
    private let io: ClientLoop
    private let ids: IDCounter
    /// Every notification the server sends to this connection, in order; it finishes
    /// when the connection ends. Iterate it from one task.
    public let notifications: AsyncStream<ServerNotification>
    /// The principal and admin flag the server gave for `auth`, when a token was used.
    public let authResult: JSONValue?

    private init(io: ClientLoop, ids: IDCounter, notifications: AsyncStream<ServerNotification>, authResult: JSONValue?) {
        self.io = io
        self.ids = ids
        self.notifications = notifications
        self.authResult = authResult
    }

    /// A client nobody holds any more closes its connection (and its loop thread ends).
    deinit { io.shutdown() }

    /// Connects, and calls `auth` first when the endpoint carries a token (a refused
    /// token closes the connection and throws).
    public static func connect(_ endpoint: Endpoint) async throws -> XHRPCClient {
        let (stream, sink) = AsyncStream<ServerNotification>.makeStream(bufferingPolicy: .unbounded)
        let io = try ClientLoop(notifications: sink)
        let failure: XHRPCError? = await withCheckedContinuation { c in
            io.post { io.connect(endpoint) { c.resume(returning: $0) } }
        }
        if let failure { throw failure }
        let ids = IDCounter()
        var authResult: JSONValue?
        if let token = endpoint.token {
            do {
                authResult = try await call(io, ids, "auth", ["token": .string(token)])
            } catch {
                io.shutdown()
                throw error
            }
        }
        return XHRPCClient(io: io, ids: ids, notifications: stream, authResult: authResult)
    }

    /// Calls `method` and returns its result, or throws the server's error
    /// (`XHRPCError.server`) or the connection's end.
    @discardableResult
    public func call(_ method: String, _ params: JSONValue? = nil) async throws -> JSONValue {
        try await Self.call(io, ids, method, params)
    }

    private static func call(_ io: ClientLoop, _ ids: IDCounter, _ method: String, _ params: JSONValue?) async throws -> JSONValue {
        let id = ids.next()
        let answer = try await io.send(message(method, params, id: id), awaiting: [id])
        return try result(of: answer)
    }

    /// Sends a notification: a call without an id, which the server does not answer.
    public func notify(_ method: String, _ params: JSONValue? = nil) {
        io.sendWithoutAnswer(Self.message(method, params, id: nil))
    }

    /// Sends `calls` as one batch (run by the server in order) and returns each one's
    /// outcome, in the order given.
    public func batch(_ calls: [(method: String, params: JSONValue?)]) async throws -> [Result<JSONValue, XHRPCError>] {
        guard !calls.isEmpty else { return [] }
        var bytes: [UInt8] = [UInt8(ascii: "[")]
        var order: [Int64] = []
        for (i, c) in calls.enumerated() {
            let id = ids.next()
            order.append(id)
            if i > 0 { bytes.append(UInt8(ascii: ",")) }
            var one = Self.message(c.method, c.params, id: id)
            one.removeLast()  // the newline
            bytes += one
        }
        bytes += Array("]\n".utf8)
        let answer = try await io.send(bytes, awaiting: order)
        guard case .array(let items) = answer else {
            // A batch the server refused as a whole is answered with one error.
            let e = answer["error"].map(XHRPCError.init(errorObject:)) ?? .protocolViolation("a batch answered with \(answer)")
            return order.map { _ in .failure(e) }
        }
        var byID: [Int64: JSONValue] = [:]
        for item in items { if let id = item["id"]?.int64Value { byID[id] = item } }
        return order.map { id in
            guard let item = byID[id] else { return .failure(.protocolViolation("no answer for call \(id) of the batch")) }
            return Result { try Self.result(of: item) }.mapError { $0 as? XHRPCError ?? .protocolViolation("\($0)") }
        }
    }

    /// Closes the connection; calls still waiting fail with a connection error.
    public func close() { io.shutdown() }

    // MARK: Framing

    static func message(_ method: String, _ params: JSONValue?, id: Int64?) -> [UInt8] {
        var o: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { o["params"] = params }
        if let id { o["id"] = .int(id) }
        var bytes = JSON.encode(.object(o))
        bytes.append(UInt8(ascii: "\n"))
        return bytes
    }

    static func result(of answer: JSONValue) throws -> JSONValue {
        if let e = answer["error"] { throw XHRPCError(errorObject: e) }
        guard let result = answer["result"] else { throw XHRPCError.protocolViolation("an answer without result: \(answer)") }
        return result
    }
}

/// Request ids, unique on the connection.
final class IDCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var last: Int64 = 0
    func next() -> Int64 {
        lock.lock()
        defer { lock.unlock() }
        last += 1
        return last
    }
}
