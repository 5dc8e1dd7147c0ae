import JSON
import JSONRPC

/// Every application error the service answers, one constructor per `data.reason` word
/// (`RPCError.Reason` holds the words and their codes; api/openrpc.json documents them
/// under `components.errors`). Call sites say what happened; the wording, the code and
/// the `data` members live here, once. The -32602 refusals with a reason
/// (`forbidden_header`, `forbidden_method`) are made by `HTTPSyntax`; other bad
/// parameters are `RPCError.invalidParams` with a detail.
enum ServiceError {
    // MARK: unknown_handle — no such object for this principal

    /// No object of `kind` named `handle` for the caller's principal (another principal's
    /// objects are never looked at, so the answer tells nothing about them).
    static func unknownObject(kind: String, _ handle: String) -> RPCError {
        .app(.unknownHandle, "No \(kind) '\(handle)'; create it first", [kind: .string(handle)])
    }

    static func unknownSubscription(_ id: String) -> RPCError {
        .app(.unknownHandle, "No subscription '\(id)'", ["subscription": .string(id)])
    }

    /// One answer for a wrong, expired, used or another principal's detach token.
    static var unknownDetachment: RPCError {
        .app(.unknownHandle, "No detachment with this token: it is wrong, expired or already used")
    }

    // MARK: already_exists

    static func alreadyExists(kind: String, _ handle: String) -> RPCError {
        .app(.alreadyExists, "A \(kind) named '\(handle)' exists; release it or choose another name", [kind: .string(handle)])
    }

    // MARK: invalid_state

    /// `method` called in a state that does not allow it; `data` says which state the
    /// object (of `kind`) is in.
    static func misuse(_ method: String, allowed: String, state: some ObjectState) -> RPCError {
        .app(.invalidState, "\(method) is allowed in \(allowed) only; the \(type(of: state).objectKind) is \(state.name)",
             ["state": .int(Int64(state.rawValue)), "stateName": .string(state.name)])
    }

    static func bodyNotUTF8(at offset: Int) -> RPCError {
        .app(.invalidState, "The body is not UTF-8 at byte \(offset) of what is unread; read it as base64",
             ["offset": .int(Int64(offset))])
    }

    static var shuttingDown: RPCError { .app(.invalidState, "the server is shutting down") }

    static func alreadyAuthenticated(as principal: String) -> RPCError {
        .app(.invalidState, "This connection already acts for principal '\(principal)'", ["principal": .string(principal)])
    }

    // MARK: policy_denied

    /// The egress policy refused a destination before anything was sent to it.
    static func policyDenied(_ reason: String) -> RPCError {
        .app(.policyDenied, "Denied by egress policy: \(reason)")
    }

    // MARK: busy

    /// The principal already has an interceptor.
    /// Another download is writing the same file.
    static func downloadInProgress(_ path: String) -> RPCError {
        .app(.busy, "A download into '\(path)' is in progress; wait for it to end or abort it", ["path": .string(path)])
    }

    static var interceptorBusy: RPCError {
        .app(.busy, "This principal already has an interceptor; unregister it or close its connection first")
    }

    static func unknownInterceptor(_ id: String) -> RPCError {
        .app(.unknownHandle, "No interceptor '\(id)'", ["interceptor": .string(id)])
    }

    // MARK: limit_exceeded — data.limit names the limit, data.max gives its value

    static func limitExceeded(_ limit: String, max: Int, _ message: String) -> RPCError {
        .app(.limitExceeded, message, ["limit": .string(limit), "max": .int(Int64(max))])
    }

    /// A single write larger than the buffer it must fit in whole: waiting cannot help,
    /// so unlike the refusal above (which says to wait and write again) this one says
    /// so, with `data.neverFits` true and the write's size in `data.bytes`.
    static func writeNeverFits(_ limit: String, max: Int, _ bytes: Int, _ limitName: String) -> RPCError {
        .app(.limitExceeded,
             "A write of \(bytes) bytes can never fit: at most \(max) bytes can be queued (\(limitName)). Split it into writes of at most \(max) bytes.",
             ["limit": .string(limit), "max": .int(Int64(max)), "bytes": .int(Int64(bytes)), "neverFits": true])
    }

    /// Too many wrong tokens from the caller's source, or in all, this minute: the
    /// token was not compared (`AuthThrottle`); `data.retryAfter` is when it would be.
    static func authThrottled(_ limit: String, max: Int, perSource: Bool, retryAfter seconds: Int) -> RPCError {
        .app(.limitExceeded,
             "Too many wrong tokens \(perSource ? "from this address" : "in all") (\(max) a minute); the token was not tried, try again in \(seconds) s",
             ["limit": .string(limit), "max": .int(Int64(max)), "retryAfter": .int(Int64(seconds))])
    }

    // MARK: unauthenticated

    static var authenticateFirst: RPCError {
        .app(.unauthenticated, "Authenticate first: call auth {\"token\": ...}")
    }

    static func unknownToken(maxFailures: Int) -> RPCError {
        .app(.unauthenticated, "Unknown token; after \(maxFailures) failures the connection is closed")
    }

    static func authTimedOut(after seconds: Double) -> RPCError {
        .app(.unauthenticated, "Not authenticated within \(seconds) seconds; the connection is closed")
    }

    // MARK: forbidden — not for this caller, or not with this server's configuration

    /// A method that needs a flag the server was not started with.
    static func needsConfiguration(_ message: String) -> RPCError { .app(.forbidden, message) }

    static func outsideRoot(_ path: String, rootName: String) -> RPCError {
        .app(.forbidden, "'\(path)' is outside the \(rootName)", ["path": .string(path)])
    }

    /// `upload` and `download`'s answer to a path that leaves its root: -32602 with
    /// `data.reason` `path_not_allowed` (nothing was read or written).
    static func pathNotAllowed(_ path: String, rootName: String, _ why: String) -> RPCError {
        RPCError.invalidParams("'\(path)' is not allowed below the \(rootName): \(why)", reason: .pathNotAllowed,
                               ["path": .string(path)])
    }

    // MARK: request_failed

    /// fetch with `responseType` json got a response whose body is not JSON; `response`
    /// holds what fetch would have answered (status, headers, body as text or base64).
    static func responseNotJSON(status: Int, _ response: JSONObject) -> RPCError {
        .app(.requestFailed, "The response (status \(status)) is not JSON; ask with responseType text or base64 to read it",
             ["status": .int(Int64(status)), "response": .object(response)])
    }

    // MARK: file_error

    static func fileError(_ message: String, path: String? = nil) -> RPCError {
        .app(.fileError, message, path.map { ["path": .string($0)] } ?? [:])
    }
}

/// The states of an object kind, as errors and notifications show them.
protocol ObjectState {
    /// The kind whose states these are ("request", "socket").
    static var objectKind: String { get }
    var rawValue: Int { get }
    var name: String { get }
}

extension RequestState: ObjectState {
    static var objectKind: String { HTTPRequest.kind }
}
