import HTTPEngine
import JSON
import JSONRPC

/// What an interceptor may be asked or told (`intercept.register`'s `events`).
enum InterceptEvent: String, CaseIterable {
    case willSendRequest, shouldContinueAfterFailWithError
    case didReceiveResponse, didReceiveData, didFailWithError, didFinishLoading
}

/// A client connection registered as the interceptor of its principal's requests (docs/guide/interception-and-retries.md): asked before each attempt and after a failed
/// one, told about responses and their data. One per principal at a time; it ends with
/// its connection. It sees its own principal's requests only (it hangs off the
/// `Principal`), request objects and `fetch` alike, from every connection.
final class Interceptor {
    /// The longest `timeout` a client may ask for, in seconds.
    static let maxTimeout: Double = 60
    static let defaultTimeout: Double = 5

    let id: String
    weak var session: ClientSession?
    let events: Set<InterceptEvent>
    /// Seconds each answer may take.
    let timeout: Double
    /// The hosts it covers (the `--allow` pattern syntax), as an allow-only policy's host
    /// check; nil covers every request.
    let match: EgressPolicy?

    init(id: String, session: ClientSession, events: Set<InterceptEvent>, timeout: Double, match: EgressPolicy?) {
        self.id = id
        self.session = session
        self.events = events
        self.timeout = timeout
        self.match = match
    }

    /// Whether it wants `event` about a request to `url` (and its connection is open).
    func wants(_ event: InterceptEvent, url: String) -> Bool {
        guard events.contains(event), let session, session.connection.isOpen else { return false }
        guard let match else { return true }
        guard let target = try? URLTarget.parse(url: url) else { return false }
        return match.checkHost(target.host, port: target.port) == .allowed
    }

    /// Reads `intercept.register`'s parameters.
    static func parse(events: JSONValue?, timeout: Double?, match: JSONValue?) throws(RPCError)
        -> (Set<InterceptEvent>, Double, EgressPolicy?) {
        var wanted = Set(InterceptEvent.allCases)
        if let events {
            let names = InterceptEvent.allCases.map(\.rawValue).joined(separator: ", ")
            guard let items = events.arrayValue, !items.isEmpty else {
                throw RPCError.invalidParams("'events' must be a non-empty array of: \(names)")
            }
            wanted = []
            for item in items {
                guard let word = item.stringValue, let e = InterceptEvent(rawValue: word) else {
                    throw RPCError.invalidParams("'events' may hold: \(names)")
                }
                wanted.insert(e)
            }
        }
        let seconds = timeout ?? defaultTimeout
        guard seconds > 0, seconds <= maxTimeout else {
            throw RPCError.invalidParams("'timeout' must be more than 0 and at most \(Int(maxTimeout)) seconds")
        }
        var policy: EgressPolicy?
        if let match {
            guard let items = match.arrayValue, !items.isEmpty else {
                throw RPCError.invalidParams("'match' must be a non-empty array of host patterns")
            }
            var patterns: [EgressPolicy.Pattern] = []
            for item in items {
                guard let text = item.stringValue else { throw RPCError.invalidParams("'match' holds strings only") }
                do { patterns.append(try EgressPolicy.Pattern(parsing: text)) } catch {
                    throw RPCError.invalidParams("'match': \(error)")
                }
            }
            policy = EgressPolicy(allowPatterns: patterns, denyPatterns: [])
        }
        return (wanted, seconds, policy)
    }
}

/// The stable word for why an attempt failed without a response, as interceptors and
/// retry policies speak of it: connect, resolve, timeout, reset, tls, policy_denied, io.
enum FailureReason {
    static func word(_ failure: TransferFailure) -> String {
        if failure.isEgressDenial { return "policy_denied" }
        if failure.text.hasPrefix("SSL") { return "tls" }
        switch failure.code {
        case 6, 5: return "resolve"          // COULDNT_RESOLVE_HOST, _PROXY
        case 7: return "connect"             // COULDNT_CONNECT
        case 28: return "timeout"            // OPERATION_TIMEDOUT
        case 52, 55, 56, 18: return "reset"  // GOT_NOTHING, SEND_ERROR, RECV_ERROR, PARTIAL_FILE
        default: return "io"
        }
    }
}
