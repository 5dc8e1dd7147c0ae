import JSON

/// Why a call failed.
public enum XHRPCError: Error, Sendable, CustomStringConvertible {
    /// The server answered with a JSON-RPC error: `code`, `message`, and `data` (whose
    /// `reason` word, for application errors and some -32602 refusals, is `reason`).
    case server(code: Int, message: String, data: JSONValue?)
    /// The connection could not be made, or it ended before the answer came.
    case connection(String)
    /// The server sent something that is not the JSON-RPC answer expected.
    case protocolViolation(String)

    /// The `data.reason` word of a server error (`unknown_handle`, `forbidden_header`, …).
    public var reason: String? {
        if case let .server(_, _, data) = self { return data?["reason"]?.stringValue }
        return nil
    }

    /// The JSON-RPC error code of a server error.
    public var code: Int? {
        if case let .server(code, _, _) = self { return code }
        return nil
    }

    public var description: String {
        switch self {
        case let .server(code, message, data):
            var text = "\(message) (\(code))"
            if let reason { text += " [\(reason)]" }
            if let detail = data?["detail"]?.stringValue { text += ": \(detail)" }
            return text
        case let .connection(why): return "connection: \(why)"
        case let .protocolViolation(why): return "protocol: \(why)"
        }
    }

    /// The error a JSON-RPC error object describes.
    init(errorObject e: JSONValue) {
        self = .server(code: Int(e["code"]?.int64Value ?? 0), message: e["message"]?.stringValue ?? "", data: e["data"])
    }
}
