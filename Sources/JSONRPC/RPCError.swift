import JSON

/// A JSON-RPC error as it goes on the wire: the standard codes of the specification and
/// the application codes of xhrpc, each application error carrying a stable `reason`
/// word in `data` so that clients branch on a word, not on a message meant for people.
public struct RPCError: Error, Equatable, Sendable, CustomStringConvertible {
    public var code: Int
    public var message: String
    public var data: JSONValue?

    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public var description: String { "\(code) \(message)" }

    /// The `reason` word of an application error, if any.
    public var reason: String? { data?["reason"]?.stringValue }

    /// What a person reads: `data.detail` when the error has one (the -32602 family),
    /// else the message.
    public var explanation: String { data?["detail"]?.stringValue ?? message }

    /// One word for any error, for statistics: the application's `reason`, or the
    /// specification's error in the same style (`invalid_params`, …).
    public var kind: String {
        if let reason { return reason }
        switch code {
        case -32700: return "parse_error"
        case -32600: return "invalid_request"
        case -32601: return "method_not_found"
        case -32602: return "invalid_params"
        case -32603: return "internal_error"
        default: return "error_\(code)"
        }
    }

    /// The error object of a response.
    public var json: JSONValue {
        var o: JSONObject = ["code": .int(Int64(code)), "message": .string(message)]
        if let data { o["data"] = data }
        return .object(o)
    }

    // MARK: The specification's errors

    public static func parseError(_ detail: String, offset: Int) -> RPCError {
        RPCError(code: -32700, message: "Parse error", data: ["detail": .string(detail), "offset": .int(Int64(offset))])
    }
    public static func invalidRequest(_ detail: String? = nil) -> RPCError {
        RPCError(code: -32600, message: "Invalid Request", data: detail.map { ["detail": .string($0)] })
    }
    public static func methodNotFound(_ method: String) -> RPCError {
        RPCError(code: -32601, message: "Method not found", data: ["method": .string(method)])
    }
    /// Bad parameters: `detail` says which and what was expected.
    public static func invalidParams(_ detail: String) -> RPCError {
        RPCError(code: -32602, message: "Invalid params", data: ["detail": .string(detail)])
    }
    /// The refusals of parameters that clients match on: still -32602, with one of
    /// these in `data.reason` beside `detail`.
    public enum ParamsReason: String, CaseIterable, Sendable {
        /// A header the service sets itself (framing and connection headers).
        case forbiddenHeader = "forbidden_header"
        /// CONNECT, TRACE or TRACK.
        case forbiddenMethod = "forbidden_method"
        /// A file path that leaves its root (`upload`, `download`, a multipart part's
        /// `path`): `..`, an absolute path, or a symbolic link on the way.
        case pathNotAllowed = "path_not_allowed"
    }

    /// Bad parameters refused for a `ParamsReason`: `-32602` with `data.reason` and
    /// `extra` beside `detail`.
    public static func invalidParams(_ detail: String, reason: ParamsReason, _ extra: JSONObject = [:]) -> RPCError {
        var data: JSONObject = ["detail": .string(detail), "reason": .string(reason.rawValue)]
        for m in extra.members { data[m.key] = m.value }
        return RPCError(code: -32602, message: "Invalid params", data: .object(data))
    }
    public static func internalError(_ detail: String) -> RPCError {
        RPCError(code: -32603, message: "Internal error", data: ["detail": .string(detail)])
    }

    // MARK: xhrpc's errors (-32000…-32099)

    /// The application reasons, each with its own code; the table is the one place they
    /// are numbered (api/openrpc.json lists the same).
    public enum Reason: String, CaseIterable, Sendable {
        case unknownHandle = "unknown_handle"
        case invalidState = "invalid_state"
        case policyDenied = "policy_denied"
        case limitExceeded = "limit_exceeded"
        case unauthenticated = "unauthenticated"
        case forbidden = "forbidden"
        case alreadyExists = "already_exists"
        case fileError = "file_error"
        case messageTooLarge = "message_too_large"
        case requestFailed = "request_failed"
        case busy = "busy"

        public var code: Int {
            switch self {
            case .unknownHandle: -32001
            case .invalidState: -32002
            case .policyDenied: -32003
            case .limitExceeded: -32004
            case .unauthenticated: -32005
            case .forbidden: -32006
            case .alreadyExists: -32007
            case .fileError: -32008
            case .messageTooLarge: -32009
            case .requestFailed: -32010
            case .busy: -32011
            }
        }
    }

    /// An application error: `extra` members are added to `data` beside `reason`
    /// (for example the object's state).
    public static func app(_ reason: Reason, _ message: String, _ extra: JSONObject = [:]) -> RPCError {
        var data: JSONObject = ["reason": .string(reason.rawValue)]
        for m in extra.members { data[m.key] = m.value }
        return RPCError(code: reason.code, message: message, data: .object(data))
    }
}
