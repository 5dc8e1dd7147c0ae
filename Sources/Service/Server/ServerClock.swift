import Foundation
import JSON

/// Monotonic time in seconds, as the server's lifetimes (request TTL, detach TTL) read
/// it. It comes in through the configuration so that a test can replace it with a
/// clock it advances by hand: then whether a request has expired is decided by the
/// test, not by how fast a shared machine happens to run.
public struct ServerClock: Sendable {
    /// The current time, in seconds from an arbitrary origin; never goes back.
    public let now: @Sendable () -> Double

    public init(now: @escaping @Sendable () -> Double) {
        self.now = now
    }

    /// CLOCK_MONOTONIC: unaffected by changes of the wall clock.
    public static let monotonic = ServerClock {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

extension Double {
    /// A duration in seconds as the wire gives it: a whole number as an integer (60,
    /// not 60.0), a fraction as it is.
    var secondsJSON: JSONValue { rounded() == self ? .int(Int64(self)) : .double(self) }
}
