import Testing
@testable import Service

/// `AuthThrottle` with a clock of the test's own: a source's budget, the server's, how
/// they drain, the retry time it gives, and the bound on the sources it remembers. The
/// Python `test_unauthenticated.py` `Throttle` checks the same with real connections.
@Suite struct AuthThrottleTests {
    func throttle(perSource: Int = 3, total: Int = 5) -> AuthThrottle {
        AuthThrottle(budget: .init(perSource: perSource, total: total))
    }

    @Test func aSourcesBudgetIsAMinutesWorthThenOneAsItDrains() {
        var t = throttle()
        for _ in 0..<3 {
            #expect(t.check(source: "a", now: 100) == .judge)
            t.failed(source: "a", now: 100)
        }
        #expect(t.check(source: "a", now: 100) == .refuse(.perSource, retryAfter: 20))
        #expect(t.check(source: "a", now: 110) == .refuse(.perSource, retryAfter: 10))
        #expect(t.check(source: "b", now: 110) == .judge, "another source has its own budget")
        #expect(t.check(source: "a", now: 120) == .judge, "one failure drained in 60 s / 3")
    }

    @Test func theServersBudgetBindsEverySource() {
        var t = throttle()
        for source in ["a", "b", "c", "d", "e"] {
            #expect(t.check(source: source, now: 0) == .judge)
            t.failed(source: source, now: 0)
        }
        #expect(t.check(source: "f", now: 0) == .refuse(.total, retryAfter: 12))
        #expect(t.check(source: "f", now: 12) == .judge)
    }

    @Test func successesCostNothingAndDrainedSourcesAreForgotten() {
        var t = throttle()
        for _ in 0..<100 { #expect(t.check(source: "a", now: 0) == .judge) }
        #expect(t.sourceCount == 0)
        t.failed(source: "a", now: 0)
        #expect(t.sourceCount == 1)
        _ = t.check(source: "a", now: 20)
        #expect(t.sourceCount == 0, "drained, so forgotten")
    }

    @Test func sourcesBeyondTheBoundShareOneBucket() {
        var t = throttle(perSource: 1, total: 1_000_000)
        for n in 0..<AuthThrottle.maxSources { t.failed(source: "s\(n)", now: 0) }
        #expect(t.sourceCount == AuthThrottle.maxSources)
        #expect(t.check(source: "new-1", now: 0) == .judge)
        t.failed(source: "new-1", now: 0)
        #expect(t.sourceCount == AuthThrottle.maxSources + 1, "the shared bucket joins")
        #expect(t.check(source: "new-2", now: 0) == .refuse(.perSource, retryAfter: 60), "it shares new-1's failure")
    }

    @Test func sourcesAreAddressesSlash64sAndUids() {
        #expect(AuthThrottle.source(peerDescription: "127.0.0.2:5555", peerUID: nil) == "127.0.0.2")
        #expect(AuthThrottle.source(peerDescription: "[2001:db8:1:2:3:4:5:6]:443", peerUID: nil) == "2001:db8:1:2::/64")
        #expect(AuthThrottle.source(peerDescription: "[2001:db8:1:2::9]:443", peerUID: nil) == "2001:db8:1:2::/64")
        #expect(AuthThrottle.source(peerDescription: "[::ffff:10.0.0.1]:80", peerUID: nil) == "::ffff:10.0.0.1")
        #expect(AuthThrottle.source(peerDescription: "unix", peerUID: 1001) == "uid 1001")
    }
}
