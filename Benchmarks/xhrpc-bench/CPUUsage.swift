#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// CPU time used by the processes of a run, read from `/proc/PID/stat` at the edges of
/// the measured window. On this shared 2-core machine requests per second move with
/// whatever else runs; CPU time per request does much less, and it says which process
/// the time goes to: the client, xhrpcd, or nginx.
struct CPUWatch {
    /// Who is watched: a name for the report and a pid (0 for this process).
    struct Subject {
        var name: String
        var pid: Int32
    }

    private let subjects: [Subject]
    private var startTicks: [Int?] = []

    init(_ subjects: [Subject]) {
        self.subjects = subjects
    }

    /// Reads the clocks at the start of the window.
    mutating func start() {
        startTicks = subjects.map { CPUWatch.ticks($0.pid) }
    }

    /// Microseconds of CPU per unit for each subject since `start()`, for `units` units.
    /// A subject whose clock could not be read (it exited) is left out.
    func perUnit(units: Int) -> [(name: String, microseconds: Double)] {
        guard units > 0, startTicks.count == subjects.count else { return [] }
        let hz = Double(sysconf(Int32(_SC_CLK_TCK)))
        var out: [(name: String, microseconds: Double)] = []
        for (i, s) in subjects.enumerated() {
            guard let before = startTicks[i], let after = CPUWatch.ticks(s.pid) else { continue }
            out.append((s.name, Double(after - before) / hz * 1e6 / Double(units)))
        }
        return out
    }

    /// User plus system time of a process, in clock ticks: fields 14 and 15 of
    /// `/proc/PID/stat`, counted after the parenthesised command name (which may itself
    /// hold spaces and parentheses).
    static func ticks(_ pid: Int32) -> Int? {
        let path = pid == 0 ? "/proc/self/stat" : "/proc/\(pid)/stat"
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let n = fread(&buffer, 1, buffer.count - 1, file)
        guard n > 0, let close = buffer[..<n].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<n].split(separator: UInt8(ascii: " "))
        // fields[0] is field 3 (state); utime is field 14, stime field 15.
        guard fields.count > 12,
              let utime = Int(String(decoding: fields[11], as: UTF8.self)),
              let stime = Int(String(decoding: fields[12], as: UTF8.self))
        else { return nil }
        return utime + stime
    }
}
