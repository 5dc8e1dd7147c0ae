#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Pushes printed lines out now: stdout is a pipe under run.py, which streams them, and
/// a pipe is block-buffered. (`fflush(NULL)` flushes every stream without naming C's
/// `stdout` global, which Swift 6 treats as unsafe shared state.)
func flushOutput() { fflush(nil) }

/// What one measured run of one mode produced: the figure, and the errors seen in it.
struct ModeResult {
    /// The mode's name as printed: `direct`, `fetch`, `object`, `info-pipelined`.
    var mode: String
    /// Units of work (requests or calls) completed successfully inside the measured
    /// window; warm-up and drain are not counted.
    var completed = 0
    /// Length of the measured window, from the clock at its two edges.
    var seconds = 0.0
    /// Failed units over the whole run, warm-up and drain included: an error is an error.
    var errors = 0
    /// The first few error messages, to print.
    var errorSamples: [String] = []
    /// How many errors those messages describe (one message may stand for many).
    private var errorsDescribed = 0
    /// Units still unanswered when the drain deadline passed. Each is also counted as
    /// an error: a call that gets no answer seconds after its peers did is a hang.
    private(set) var abandoned = 0
    /// CPU microseconds per successful unit in the window, by process (empty when no
    /// pids were given).
    var cpu: [(name: String, microseconds: Double)] = []
    /// Whether the run could not take place at all (connect failure and the like).
    var failedToRun = false

    /// How many error messages are kept for printing.
    static let sampleLimit = 5

    init(mode: String) { self.mode = mode }

    /// Records the units that were still in flight at the drain deadline.
    mutating func recordAbandoned(_ count: Int, after seconds: Double) {
        guard count > 0 else { return }
        abandoned = count
        recordErrors(count, "\(count) still unanswered \(format(seconds, 0)) s after the measured window closed")
    }

    var perSecond: Double { seconds > 0 ? Double(completed) / seconds : 0 }

    /// Records one failed unit, keeping its message if there is room.
    mutating func recordError(_ message: String) {
        recordErrors(1, message)
    }

    /// Records `count` failed units described by one message.
    mutating func recordErrors(_ count: Int, _ message: String) {
        errors += count
        if errorSamples.count < ModeResult.sampleLimit {
            errorSamples.append(message)
            errorsDescribed += count
        }
    }

    /// The mode's one-line figure followed by its error lines, all greppable:
    /// `fetch 21000 req/s requests 105000 seconds 5.00 errors 0`.
    func printReport(prefix: String = "", unit: String = "req/s", countName: String = "requests") {
        print("\(prefix)\(mode) \(Int(perSecond.rounded())) \(unit) \(countName) \(completed) seconds \(format(seconds, 2)) errors \(errors)"
              + (abandoned > 0 ? " abandoned \(abandoned)" : ""))
        if !cpu.isEmpty {
            print("\(prefix)cpu \(mode) " + cpu.map { "\($0.name) \(Int($0.microseconds.rounded()))" }.joined(separator: " ")
                  + " us/\(countName == "calls" ? "call" : "req")")
        }
        for message in errorSamples { print("\(prefix)\(mode) error: \(message)") }
        if errors > errorsDescribed { print("\(prefix)\(mode) error: … and \(errors - errorsDescribed) more") }
        flushOutput()
    }
}

/// Fixed-point text of a double, without Foundation's `String(format:)`.
func format(_ value: Double, _ decimals: Int) -> String {
    guard value.isFinite else { return "\(value)" }
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (abs(value) * scale).rounded()
    let whole = Int(scaled / scale)
    var text = (value < 0 && scaled > 0 ? "-" : "") + String(whole)
    if decimals > 0 {
        let fraction = String(Int(scaled - Double(whole) * scale))
        text += "." + String(repeating: "0", count: decimals - fraction.count) + fraction
    }
    return text
}

/// The median of some figures (the mean of the middle two for an even count).
func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
