import Foundation
import JSON
import JSONRPC
import Testing
@testable import Service

/// `RetryPolicy` alone: which failures and statuses are retried, for which methods, how
/// long each wait is, and how `Retry-After` and the settings are read.
@Suite struct RetryPolicyTests {
    @Test func failuresAreRetriedByTheirWordForIdempotentMethodsUpToMaxAttempts() {
        let p = RetryPolicy(maxAttempts: 3)
        #expect(p.retries(afterFailure: "connect", attempt: 1, method: "GET"))
        #expect(p.retries(afterFailure: "resolve", attempt: 1, method: "GET"), "a name that did not resolve counts as connect")
        #expect(p.retries(afterFailure: "timeout", attempt: 2, method: "PUT"))
        #expect(p.retries(afterFailure: "reset", attempt: 2, method: "DELETE"))
        #expect(!p.retries(afterFailure: "reset", attempt: 3, method: "GET"), "the third attempt was the last")
        #expect(!p.retries(afterFailure: "tls", attempt: 1, method: "GET"), "a TLS failure is not worth another try")
        #expect(!p.retries(afterFailure: "policy_denied", attempt: 1, method: "GET"))
        #expect(!p.retries(afterFailure: "connect", attempt: 1, method: "POST"), "POST is not idempotent")
        #expect(!p.retries(afterFailure: "connect", attempt: 1, method: "PATCH"))
    }

    @Test func statusesAreRetriedOnlyWhenAskedFor() throws {
        let p = RetryPolicy(maxAttempts: 2)
        #expect(p.retries(status: 503, attempt: 1, method: "GET"))
        #expect(p.retries(status: 429, attempt: 1, method: "HEAD"))
        #expect(!p.retries(status: 404, attempt: 1, method: "GET"))
        #expect(!p.retries(status: 200, attempt: 1, method: "GET"))
        let only429 = try RetryPolicy.parse(["maxAttempts": 4, "retryOn": ["429"]])
        #expect(!only429.retries(status: 500, attempt: 1, method: "GET"))
        #expect(!only429.retries(afterFailure: "connect", attempt: 1, method: "GET"))
        #expect(only429.retries(status: 429, attempt: 3, method: "GET"))
        let unsafe = try RetryPolicy.parse(["maxAttempts": 2, "retryOn": ["5xx", "unsafe"]])
        #expect(unsafe.retries(status: 502, attempt: 1, method: "POST"))
    }

    @Test func backoffDoublesWithJitterHonoursRetryAfterAndIsCapped() {
        let p = RetryPolicy(maxAttempts: 10, initialDelay: 0.5, maxDelay: 5)
        #expect(p.delay(after: 1, retryAfter: nil, jitter: 1) == 0.5)
        #expect(p.delay(after: 2, retryAfter: nil, jitter: 1) == 1)
        #expect(p.delay(after: 3, retryAfter: nil, jitter: 0.5) == 1)
        #expect(p.delay(after: 8, retryAfter: nil, jitter: 1) == 5, "capped at maxDelay")
        #expect(p.delay(after: 1, retryAfter: 3, jitter: 1) == 3, "Retry-After wins when larger")
        #expect(p.delay(after: 3, retryAfter: 0.1, jitter: 1) == 2, "and not when smaller")
        #expect(p.delay(after: 1, retryAfter: 60, jitter: 1) == 5, "capped too")
    }

    @Test func retryAfterIsSecondsOrAnHTTPDate() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryPolicy.retryAfter("7", now: now) == 7)
        #expect(RetryPolicy.retryAfter(" 0 ", now: now) == 0)
        let later = now.addingTimeInterval(120)
        let f = DateFormatter()
        f.locale = Locale(identifier: "en_US_POSIX")
        f.timeZone = TimeZone(identifier: "GMT")
        f.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(RetryPolicy.retryAfter(f.string(from: later), now: now) == 120)
        #expect(RetryPolicy.retryAfter(f.string(from: now.addingTimeInterval(-60)), now: now) == 0, "a date past is now")
        #expect(RetryPolicy.retryAfter("-3", now: now) == nil)
        #expect(RetryPolicy.retryAfter("soon", now: now) == nil)
    }

    @Test func settingsAreCheckedWithTheirNames() {
        let cases: [(JSONObject, String)] = [
            (["maxAttempts": 0], "maxAttempts"), (["maxAttempts": 11], "maxAttempts"), ([:], "maxAttempts"),
            (["maxAttempts": 2, "initialDelay": -1], "initialDelay"), (["maxAttempts": 2, "retryOn": ["sometimes"]], "retryOn"),
            (["maxAttempts": 2, "retries": 3], "retries"),
        ]
        for (bad, word) in cases {
            do throws(RPCError) {
                _ = try RetryPolicy.parse(bad)
                Issue.record("\(bad) was accepted")
            } catch {
                #expect(error.explanation.contains(word), "\(error.explanation)")
            }
        }
    }
}
