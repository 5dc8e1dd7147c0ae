import Foundation
import JSON
import JSONRPC

/// When a request is sent again on its own, with no interceptor deciding: opt-in
/// (`setRetryPolicy`, `fetch`'s `retry`), for the failures that are worth another try,
/// with exponential backoff and jitter, honouring `Retry-After`. Pure: the request asks
/// it and performs the answer; `RetryPolicyTests` checks it alone.
struct RetryPolicy: Equatable {
    /// The words of `retryOn`.
    enum Condition: String, CaseIterable {
        /// The connection could not be made (refused, unreachable, the name did not resolve).
        case connect
        case timeout
        /// The connection broke before a response (reset, nothing received).
        case reset
        /// A 5xx response, or a 429.
        case serverError = "5xx"
        case tooManyRequests = "429"
        /// Methods that are not idempotent (POST, PATCH…) may be retried too.
        case unsafe
    }

    static let maxAttemptsLimit = 10
    static let defaultConditions: Set<Condition> = [.connect, .timeout, .reset, .serverError, .tooManyRequests]
    /// RFC 9110 §9.2.2: methods whose repetition has the effect of one.
    static let idempotentMethods: Set<String> = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]

    var maxAttempts: Int
    /// Seconds before the first retry; each next one doubles it.
    var initialDelay: Double = 0.5
    var maxDelay: Double = 30
    var retryOn: Set<Condition> = RetryPolicy.defaultConditions

    /// Whether attempt `attempt` (1 for the first), which failed without a response for
    /// `reason` (`FailureReason`), may be followed by another.
    func retries(afterFailure reason: String, attempt: Int, method: String) -> Bool {
        let condition: Condition? = switch reason {
        case "connect", "resolve": .connect
        case "timeout": .timeout
        case "reset": .reset
        default: nil
        }
        guard let condition, retryOn.contains(condition) else { return false }
        return mayRetry(attempt: attempt, method: method)
    }

    /// Whether a response with `status` to attempt `attempt` is discarded and the request
    /// sent again.
    func retries(status: Int, attempt: Int, method: String) -> Bool {
        let wanted = (status == 429 && retryOn.contains(.tooManyRequests))
            || ((500...599).contains(status) && retryOn.contains(.serverError))
        return wanted && mayRetry(attempt: attempt, method: method)
    }

    private func mayRetry(attempt: Int, method: String) -> Bool {
        attempt < maxAttempts && (retryOn.contains(.unsafe) || Self.idempotentMethods.contains(method))
    }

    /// Seconds to wait before attempt `attempt + 1`: `initialDelay · 2^(attempt-1)` times
    /// `jitter` (0.5 to 1), or `retryAfter` when larger, at most `maxDelay`.
    func delay(after attempt: Int, retryAfter: Double?, jitter: Double) -> Double {
        let base = initialDelay * pow(2, Double(max(attempt - 1, 0)))
        return min(maxDelay, max(base * jitter, retryAfter ?? 0))
    }

    /// A `Retry-After` value (RFC 9110 §10.2.3) as seconds from `now`: delay-seconds, or
    /// an HTTP date. nil when it is neither.
    static func retryAfter(_ value: String, now: Date) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int(text), seconds >= 0 { return Double(seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = formatter.date(from: text) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// Reads `setRetryPolicy`'s parameters or `fetch`'s `retry` object.
    static func parse(_ o: JSONObject) throws(RPCError) -> RetryPolicy {
        let known: Set<String> = ["maxAttempts", "initialDelay", "maxDelay", "retryOn"]
        if let unknown = o.keys.first(where: { !known.contains($0) }) {
            throw RPCError.invalidParams("unknown retry setting '\(unknown)'; known: maxAttempts, initialDelay, maxDelay, retryOn")
        }
        guard let n = o["maxAttempts"]?.int64Value, (1...Int64(maxAttemptsLimit)).contains(n) else {
            throw RPCError.invalidParams("'maxAttempts' must be an integer from 1 to \(maxAttemptsLimit)")
        }
        var policy = RetryPolicy(maxAttempts: Int(n))
        if let v = o["initialDelay"] {
            guard let d = v.doubleValue, d >= 0, d <= 3600 else { throw RPCError.invalidParams("'initialDelay' must be 0 to 3600 seconds") }
            policy.initialDelay = d
        }
        if let v = o["maxDelay"] {
            guard let d = v.doubleValue, d >= 0, d <= 3600 else { throw RPCError.invalidParams("'maxDelay' must be 0 to 3600 seconds") }
            policy.maxDelay = d
        }
        if let v = o["retryOn"] {
            let names = Condition.allCases.map(\.rawValue).joined(separator: ", ")
            guard let items = v.arrayValue else { throw RPCError.invalidParams("'retryOn' must be an array of: \(names)") }
            var set = Set<Condition>()
            for item in items {
                guard let word = item.stringValue, let c = Condition(rawValue: word) else {
                    throw RPCError.invalidParams("'retryOn' may hold: \(names)")
                }
                set.insert(c)
            }
            policy.retryOn = set
        }
        return policy
    }
}
