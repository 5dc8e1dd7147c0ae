import ArgumentParser
import CCurl
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The command line of xhrpc-bench: one subcommand per mode, and `all`, which runs the
/// modes alternately and compares them. Benchmarks print figures; they judge nothing,
/// except that a mode that saw errors makes the process exit 1.
struct XHRPCBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xhrpc-bench",
        abstract: "Requests per second through xhrpcd against direct libcurl.",
        discussion: """
            Every mode warms up, then measures for a fixed time, then drains the calls \
            still in flight (at most 2 s). Figures count only what succeeded inside the \
            measured window. Benchmarks/run.py starts the server and an nginx upstream.
            """,
        subcommands: [Direct.self, Fetch.self, Object.self, Info.self, All.self])
}

/// Options of every mode that makes HTTP requests.
struct LoadOptions: ParsableArguments {
    @Option(help: "The URL to GET (a local nginx serving --body-bytes bytes).")
    var url: String

    @Option(help: "Requests in flight at any moment, in total.")
    var inflight = 64

    @Option(help: "Measured seconds.")
    var seconds = 5.0

    @Option(help: "Unmeasured seconds before the measurement.")
    var warmup = 1.0

    @Option(help: "The body size every response must have.")
    var bodyBytes = 1024

    func validate() throws {
        guard inflight > 0 else { throw ValidationError("--inflight must be at least 1") }
        guard seconds > 0, warmup >= 0 else { throw ValidationError("--seconds must be positive and --warmup not negative") }
    }
}

/// Options of every mode that talks to xhrpcd.
struct ServerOptions: ParsableArguments {
    @Option(help: "xhrpcd's Unix socket.")
    var socket: String

    @Option(help: "Client connections to xhrpcd; the calls in flight are spread over them.")
    var connections = 8

    func validate() throws {
        guard connections > 0 else { throw ValidationError("--connections must be at least 1") }
    }
}

/// Pids whose CPU time is reported per request (run.py passes them).
struct CPUOptions: ParsableArguments {
    @Option(help: "xhrpcd's pid, to report its CPU time per request.")
    var serverPid: Int32?

    @Option(help: "The upstream's (nginx worker's) pid, to report its CPU time per request.")
    var upstreamPid: Int32?

    /// The client (this process) and whichever of the others were given. With no pid
    /// given nothing is watched: the client's own figure alone would mislead.
    func watch(server: Bool) -> CPUWatch {
        guard serverPid != nil || upstreamPid != nil else { return CPUWatch([]) }
        var subjects = [CPUWatch.Subject(name: "client", pid: 0)]
        if server, let serverPid { subjects.append(.init(name: "server", pid: serverPid)) }
        if let upstreamPid { subjects.append(.init(name: "upstream", pid: upstreamPid)) }
        return CPUWatch(subjects)
    }
}

/// Process setup every mode needs, once, before anything else runs.
enum BenchProcess {
    nonisolated(unsafe) private static var ready = false

    static func setUp() {
        guard !ready else { return }
        ready = true
        // A server that goes away mid-write must give EPIPE, not kill the benchmark.
        signal(SIGPIPE, SIG_IGN)
        _ = curl_global_init(Int(CURL_GLOBAL_ALL))
    }
}

/// Turns errors into the exit status, after the figures are printed.
private func exitStatus(_ results: [ModeResult]) throws {
    let errors = results.reduce(0) { $0 + $1.errors }
    if errors > 0 || results.contains(where: \.failedToRun) { throw ExitCode(1) }
}

struct Direct: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "libcurl alone: one multi handle, --inflight easy handles re-added as they finish, curl_multi_poll.")

    @OptionGroup var load: LoadOptions
    @OptionGroup var cpu: CPUOptions

    func run() throws {
        BenchProcess.setUp()
        let r = DirectBench(url: load.url, inflight: load.inflight, expectedBodyBytes: load.bodyBytes)
            .run(warmup: load.warmup, seconds: load.seconds, cpu: cpu.watch(server: false))
        r.printReport()
        try exitStatus([r])
    }
}

struct Fetch: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "One `fetch` call per request through xhrpcd.")

    @OptionGroup var server: ServerOptions
    @OptionGroup var load: LoadOptions
    @OptionGroup var cpu: CPUOptions

    func run() throws {
        BenchProcess.setUp()
        let r = RPCLoad.measure(FetchWorkload(url: load.url, expectedBodyBytes: load.bodyBytes),
                                socketPath: server.socket, connections: server.connections,
                                inflight: load.inflight, warmup: load.warmup, seconds: load.seconds,
                                cpu: cpu.watch(server: true))
        r.printReport()
        try exitStatus([r])
    }
}

struct Object: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The object API through xhrpcd: [create, open, send (sync)] then [getReceiveBuffer, release].")

    @OptionGroup var server: ServerOptions
    @OptionGroup var load: LoadOptions
    @OptionGroup var cpu: CPUOptions

    func run() throws {
        BenchProcess.setUp()
        let r = RPCLoad.measure(ObjectWorkload(url: load.url, expectedBodyBytes: load.bodyBytes),
                                socketPath: server.socket, connections: server.connections,
                                inflight: load.inflight, warmup: load.warmup, seconds: load.seconds,
                                cpu: cpu.watch(server: true))
        r.printReport()
        try exitStatus([r])
    }
}

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "`server.info` calls pipelined on one connection: the RPC path with no HTTP behind it.")

    @Option(help: "xhrpcd's Unix socket.")
    var socket: String

    @Option(help: "Calls in flight on the one connection.")
    var depth = 64

    @Option(help: "Measured seconds.")
    var seconds = 5.0

    @Option(help: "Unmeasured seconds before the measurement.")
    var warmup = 1.0

    @OptionGroup var cpu: CPUOptions

    func validate() throws {
        guard depth > 0 else { throw ValidationError("--depth must be at least 1") }
        guard seconds > 0, warmup >= 0 else { throw ValidationError("--seconds must be positive and --warmup not negative") }
    }

    func run() throws {
        BenchProcess.setUp()
        let r = measureInfo(socket: socket, depth: depth, warmup: warmup, seconds: seconds, cpu: cpu.watch(server: true))
        r.printReport(unit: "calls/s", countName: "calls")
        try exitStatus([r])
    }
}

func measureInfo(socket: String, depth: Int, warmup: Double, seconds: Double, cpu: CPUWatch) -> ModeResult {
    RPCLoad.measure(InfoWorkload(), socketPath: socket, connections: 1, inflight: depth,
                    warmup: warmup, seconds: seconds, cpu: cpu)
}

struct All: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "direct, fetch and object in alternating rounds, then info; prints medians and ratios.",
        discussion: """
            The machine's speed drifts between runs, so the modes are measured in turn, \
            round after round, and compared by their medians. Summary lines: \
            `direct N req/s`, `fetch N req/s ratio R`, `object N req/s ratio R`, \
            `info-pipelined N calls/s`, `errors N`.
            """)

    @OptionGroup var server: ServerOptions
    @OptionGroup var load: LoadOptions

    @OptionGroup var cpu: CPUOptions

    @Option(help: "Rounds of direct, fetch and object.")
    var rounds = 3

    @Option(help: "Calls in flight for the info mode.")
    var depth = 64

    func validate() throws {
        guard rounds > 0 else { throw ValidationError("--rounds must be at least 1") }
        guard depth > 0 else { throw ValidationError("--depth must be at least 1") }
    }

    func run() throws {
        BenchProcess.setUp()
        print("xhrpc-bench all: url \(load.url) inflight \(load.inflight) connections \(server.connections) "
              + "rounds \(rounds) seconds \(format(load.seconds, 1)) warmup \(format(load.warmup, 1)) depth \(depth)")
        flushOutput()
        var figures: [String: [Double]] = ["direct": [], "fetch": [], "object": []]
        var results: [ModeResult] = []
        /// CPU µs per request by mode, then by process, one figure per round.
        var cpuFigures: [String: [(name: String, values: [Double])]] = [:]
        for round in 1...rounds {
            let prefix = "round \(round)/\(rounds) "
            let direct = DirectBench(url: load.url, inflight: load.inflight, expectedBodyBytes: load.bodyBytes)
                .run(warmup: load.warmup, seconds: load.seconds, cpu: cpu.watch(server: false))
            direct.printReport(prefix: prefix)
            let fetch = RPCLoad.measure(FetchWorkload(url: load.url, expectedBodyBytes: load.bodyBytes),
                                        socketPath: server.socket, connections: server.connections,
                                        inflight: load.inflight, warmup: load.warmup, seconds: load.seconds,
                                        cpu: cpu.watch(server: true))
            fetch.printReport(prefix: prefix)
            let object = RPCLoad.measure(ObjectWorkload(url: load.url, expectedBodyBytes: load.bodyBytes),
                                         socketPath: server.socket, connections: server.connections,
                                         inflight: load.inflight, warmup: load.warmup, seconds: load.seconds,
                                         cpu: cpu.watch(server: true))
            object.printReport(prefix: prefix)
            for r in [direct, fetch, object] {
                figures[r.mode]?.append(r.perSecond)
                results.append(r)
                for (name, us) in r.cpu {
                    var list = cpuFigures[r.mode] ?? []
                    if let i = list.firstIndex(where: { $0.name == name }) {
                        list[i].values.append(us)
                    } else {
                        list.append((name, [us]))
                    }
                    cpuFigures[r.mode] = list
                }
            }
            if results.contains(where: \.failedToRun) { break }
        }
        let info = measureInfo(socket: server.socket, depth: depth, warmup: load.warmup, seconds: load.seconds,
                               cpu: cpu.watch(server: true))
        info.printReport(prefix: "run ", unit: "calls/s", countName: "calls")
        results.append(info)

        let direct = median(figures["direct"] ?? [])
        let fetch = median(figures["fetch"] ?? [])
        let object = median(figures["object"] ?? [])
        func ratio(_ x: Double) -> String { direct > 0 ? format(x / direct, 2) : "n/a" }
        let measured = figures["direct"]?.count ?? 0
        print("summary: median of \(measured) round\(measured == 1 ? "" : "s")")
        print("direct \(Int(direct.rounded())) req/s")
        print("fetch \(Int(fetch.rounded())) req/s ratio \(ratio(fetch))")
        print("object \(Int(object.rounded())) req/s ratio \(ratio(object))")
        print("info-pipelined \(Int(info.perSecond.rounded())) calls/s depth \(depth)")
        for mode in ["direct", "fetch", "object"] {
            guard let list = cpuFigures[mode], !list.isEmpty else { continue }
            print("cpu \(mode) " + list.map { "\($0.name) \(Int(median($0.values).rounded()))" }.joined(separator: " ") + " us/req")
        }
        if !info.cpu.isEmpty {
            print("cpu info-pipelined " + info.cpu.map { "\($0.name) \(Int($0.microseconds.rounded()))" }.joined(separator: " ") + " us/call")
        }
        print("errors \(results.reduce(0) { $0 + $1.errors })")
        try exitStatus(results)
    }
}
