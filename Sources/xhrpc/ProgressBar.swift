import Foundation

/// A one-line progress report on stderr, redrawn in place (carriage return), at most
/// ten times a second: bytes so far, the total when known, the rate and what is left.
/// Only drawn when stderr is a terminal; `finish` ends the line.
struct ProgressBar {
    private let enabled: Bool
    private let started = Date()
    private var lastDraw = Date.distantPast
    private var drawn = false
    private let width = 24

    init(enabled: Bool) { self.enabled = enabled && isatty(STDERR_FILENO) == 1 }

    mutating func update(received: Int64, total: Int64, force: Bool = false) {
        guard enabled else { return }
        let now = Date()
        guard force || now.timeIntervalSince(lastDraw) >= 0.1 else { return }
        lastDraw = now
        drawn = true
        let elapsed = max(now.timeIntervalSince(started), 0.001)
        let rate = Double(received) / elapsed
        var line: String
        if total > 0 {
            let fraction = min(1, Double(received) / Double(total))
            let filled = Int(fraction * Double(width))
            let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
            let left = rate > 0 ? Double(total - received) / rate : 0
            line = String(format: "%3d%% [%@] %@ / %@  %@/s  ETA %@", Int(fraction * 100), bar,
                          Self.size(received), Self.size(total), Self.size(Int64(rate)), Self.duration(left))
        } else {
            line = "\(Self.size(received))  \(Self.size(Int64(rate)))/s  \(Self.duration(elapsed))"
        }
        FileHandle.standardError.write(Data(("\r" + line + "\u{1B}[K").utf8))
    }

    mutating func finish(received: Int64, total: Int64) {
        guard enabled else { return }
        update(received: received, total: total, force: true)
        if drawn { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    static func size(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var v = Double(n)
        var i = 0
        while v >= 1024, i < units.count - 1 {
            v /= 1024
            i += 1
        }
        return i == 0 ? "\(n) B" : String(format: "%.1f %@", v, units[i])
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return String(format: "%d:%02d", s / 60, s % 60)
    }
}
