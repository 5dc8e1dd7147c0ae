#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Monotonic time for measurements. The benchmarks read the clock at the edges of the
/// measured window only (never per request), so a system call per reading is fine;
/// libuv's cached loop time is not used because it only advances once a turn.
enum Monotonic {
    /// Nanoseconds since an arbitrary fixed point.
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Seconds between two readings of `now()`.
    static func seconds(from start: UInt64, to end: UInt64) -> Double {
        Double(end &- start) / 1e9
    }
}

/// Milliseconds for a libuv timer from seconds given on the command line, at least 1.
func milliseconds(_ seconds: Double) -> UInt64 {
    UInt64(max(1, (seconds * 1000).rounded()))
}
