import Foundation

/// How many wrong tokens the server judges, per source and in all, as a pure value: the
/// server asks it before comparing a token (`check`) and tells it of every wrong one
/// (`failed`); the tests drive it with a clock of their own (`AuthThrottleTests`).
///
/// The failure delay (`AuthenticationMachine`) spaces the guesses of one connection
/// only: a client that opens 100 connections guesses 100 times a second. So each
/// source (an IPv4 address, an IPv6 /64, a Unix peer's uid) and the whole server have a
/// budget of wrong tokens per minute, each a leaky bucket: a failure fills it by one,
/// and it drains at the budget per minute, so a burst of a minute's budget is judged
/// and then one a `60 / budget` seconds. A token from a source, or at a time, whose
/// bucket is full is not compared at all: the answer is `limit_exceeded` at once, with
/// the seconds until the bucket has room. The right token is refused then too, or the
/// refusal would tell a guesser nothing; so a source that guesses shuts itself out,
/// and one that floods the server's budget from many addresses shuts out every client
/// that has not authenticated yet, until the budget drains (a denial of service that
/// the operator sees in the log, one warning line per wrong token). Successes cost
/// nothing.
///
/// Sources are remembered while their buckets hold anything, at most `maxSources` of
/// them; past that, new ones share one bucket, so an attacker with many addresses
/// cannot grow the table (and shares the smallest budget).
struct AuthThrottle {
    /// Wrong tokens per minute from one source, and in all.
    struct Budget: Sendable, Equatable {
        var perSource: Int
        var total: Int

        static let `default` = Budget(perSource: 20, total: 200)
    }

    /// Which budget refused an attempt.
    enum Limit: String, Equatable {
        case perSource = "authFailuresPerSource"
        case total = "authFailuresTotal"
    }

    enum Verdict: Equatable {
        /// Compare the token.
        case judge
        /// Do not compare it: `limit` is spent for `retryAfter` seconds more.
        case refuse(Limit, retryAfter: Double)
    }

    static let maxSources = 4096
    /// The bucket of the sources beyond `maxSources`.
    static let overflowSource = ""

    /// A leaky bucket: `level` failures at time `at`, draining at `perMinute / 60` a second.
    private struct Bucket {
        var level: Double = 0
        var at: Double = 0

        mutating func drain(to now: Double, perMinute: Int) {
            if now > at { level = max(0, level - (now - at) * Double(perMinute) / 60) }
            at = max(at, now)
        }

        /// Seconds until one more failure fits, 0 when it does now.
        func wait(perMinute: Int) -> Double {
            let over = level + 1 - Double(perMinute)
            return over <= 0 ? 0 : over * 60 / Double(perMinute)
        }
    }

    let budget: Budget
    private var total = Bucket()
    private var sources: [String: Bucket] = [:]

    init(budget: Budget) { self.budget = budget }

    /// Sources remembered (for tests).
    var sourceCount: Int { sources.count }

    /// Whether a token from `source` may be compared now.
    mutating func check(source: String, now: Double) -> Verdict {
        total.drain(to: now, perMinute: budget.total)
        let key = sources[source] == nil && sources.count >= Self.maxSources ? Self.overflowSource : source
        var bucket = sources[key] ?? Bucket(level: 0, at: now)
        bucket.drain(to: now, perMinute: budget.perSource)
        if bucket.level > 0 { sources[key] = bucket } else { sources[key] = nil }
        let wait = bucket.wait(perMinute: budget.perSource)
        if wait > 0 { return .refuse(.perSource, retryAfter: wait) }
        let waitTotal = total.wait(perMinute: budget.total)
        if waitTotal > 0 { return .refuse(.total, retryAfter: waitTotal) }
        return .judge
    }

    /// A token from `source` matched no principal.
    mutating func failed(source: String, now: Double) {
        total.drain(to: now, perMinute: budget.total)
        total.level += 1
        if sources[source] == nil, sources.count >= Self.maxSources { forgetDrained(now: now) }
        let key = sources[source] == nil && sources.count >= Self.maxSources ? Self.overflowSource : source
        var bucket = sources[key] ?? Bucket(level: 0, at: now)
        bucket.drain(to: now, perMinute: budget.perSource)
        bucket.level += 1
        sources[key] = bucket
    }

    /// The source a client's failures count against, from its peer as
    /// `ByteStream.peerDescription` gives it ("127.0.0.1:5555", "[2001:db8::1]:443"):
    /// the IPv4 address; an IPv6 address's /64, since one host commonly holds a whole
    /// /64 (an IPv4 address mapped into IPv6 stays whole); a Unix peer's uid.
    static func source(peerDescription: String, peerUID: UInt32?) -> String {
        if let peerUID { return "uid \(peerUID)" }
        var host = Substring(peerDescription)
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        guard host.contains(":"), !host.contains(".") else { return String(host) }
        var address = in6_addr()
        guard inet_pton(AF_INET6, String(host), &address) == 1 else { return String(host) }
        let bytes = withUnsafeBytes(of: address) { Array($0.prefix(8)) }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }

    /// Drops the sources whose buckets have drained, to make room.
    private mutating func forgetDrained(now: Double) {
        let perMinute = budget.perSource
        sources = sources.filter { _, bucket in
            var b = bucket
            b.drain(to: now, perMinute: perMinute)
            return b.level > 0
        }
    }
}
