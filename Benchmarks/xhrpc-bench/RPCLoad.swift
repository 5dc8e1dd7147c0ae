import EventLoop
import JSON

/// What a workload makes of one message from the server.
enum UnitOutcome {
    /// The unit continues: the workload queued its next step on the connection.
    case inProgress
    /// The unit finished and met every check.
    case succeeded
    /// The unit finished with this error.
    case failed(String)
}

/// One kind of load through xhrpcd. A *unit* is what the figure counts: one `fetch`
/// call, one request made through the object API (two batches), one `server.info` call.
protocol RPCWorkload: AnyObject {
    /// The mode's name as printed.
    var mode: String { get }
    /// Appends the first call (or batch) of a new unit to `connection.output`.
    func startUnit(on connection: BenchConnection)
    /// Judges one message the server wrote on `connection`: decoded (`.value`), or as the
    /// bytes of its line (`.line`, see `BenchConnection.Replies`).
    var replies: BenchConnection.Replies { get }
}

/// Drives a workload over `connections` Unix-socket connections to xhrpcd with
/// `inflight` units in flight in total, each finished unit starting the next one on the
/// same connection, on a libuv loop of its own (single-threaded, non-blocking).
///
/// Phases, each bounded in time: connecting (`connectSeconds`) → warming up (`warmup`)
/// → measuring (`seconds`) → draining (no new units; `drainSeconds`) → finished, when
/// every connection and the timer are closed and the loop has nothing left to run.
/// The figure counts units that succeeded inside the measuring window.
final class RPCLoad {
    private let loop: Loop
    private let workload: RPCWorkload
    private let socketPath: String
    private let connectionCount: Int
    private let inflight: Int
    private let warmup: Double
    private let seconds: Double

    static let connectSeconds = 5.0
    static let drainSeconds = 2.0

    private enum Phase { case connecting, warmingUp, measuring, draining, finished }
    private var phase = Phase.connecting
    private var connections: [BenchConnection] = []
    private var connectsPending = 0
    private var timer: Timer?
    private var inFlight = 0
    private var succeeded = 0
    private var succeededAtWindowStart = 0
    private var windowStart: UInt64 = 0
    private var result: ModeResult
    private var cpu: CPUWatch

    init(loop: Loop, workload: RPCWorkload, socketPath: String, connections: Int, inflight: Int,
         warmup: Double, seconds: Double, cpu: CPUWatch) {
        self.loop = loop
        self.cpu = cpu
        self.workload = workload
        self.socketPath = socketPath
        self.connectionCount = connections
        self.inflight = inflight
        self.warmup = warmup
        self.seconds = seconds
        result = ModeResult(mode: workload.mode)
    }

    /// Runs a workload on a fresh loop and returns its figure once everything is closed.
    static func measure(_ workload: RPCWorkload, socketPath: String, connections: Int, inflight: Int,
                        warmup: Double, seconds: Double, cpu: CPUWatch) -> ModeResult {
        let loop: Loop
        do {
            loop = try Loop()
        } catch {
            var r = ModeResult(mode: workload.mode)
            r.failedToRun = true
            r.recordError("cannot make a loop: \(error)")
            return r
        }
        let load = RPCLoad(loop: loop, workload: workload, socketPath: socketPath, connections: connections,
                           inflight: inflight, warmup: warmup, seconds: seconds, cpu: cpu)
        load.begin()
        loop.run()
        do {
            try loop.close()
        } catch {
            load.result.recordError("loop left handles open: \(error)")
        }
        return load.result
    }

    private func begin() {
        do {
            timer = try Timer(loop: loop)
        } catch {
            result.failedToRun = true
            result.recordError("cannot make a timer: \(error)")
            return
        }
        timer?.start(timeout: milliseconds(RPCLoad.connectSeconds)) { [unowned self] in
            fail("could not connect to \(socketPath) within \(format(RPCLoad.connectSeconds, 0)) s")
        }
        connectsPending = connectionCount
        for i in 0..<connectionCount {
            Stream.connectPipe(loop: loop, path: socketPath) { [unowned self] outcome in
                switch outcome {
                case .success(let stream):
                    guard phase == .connecting else {
                        stream.close()
                        return
                    }
                    connected(BenchConnection(index: i, stream: stream))
                case .failure(let error):
                    if phase == .connecting { fail("connect to \(socketPath): \(error)") }
                }
            }
        }
    }

    private func connected(_ c: BenchConnection) {
        connections.append(c)
        do {
            try c.start(
                replies: workload.replies, onOutcome: { [unowned self, unowned c] outcome in received(outcome, on: c) },
                onProblem: { [unowned self, unowned c] problem, fatal in trouble(problem, fatal: fatal, on: c) },
                afterRead: { [unowned c] in c.flush() })
        } catch {
            fail("start reading: \(error)")
            return
        }
        connectsPending -= 1
        if connectsPending == 0 { startLoad() }
    }

    /// Every connection is up: start `inflight` units spread over them, pipelined.
    private func startLoad() {
        phase = .warmingUp
        for (i, c) in connections.enumerated() {
            let share = inflight / connectionCount + (i < inflight % connectionCount ? 1 : 0)
            for _ in 0..<share { startUnit(on: c) }
            c.flush()
        }
        timer?.start(timeout: milliseconds(warmup)) { [unowned self] in openWindow() }
    }

    private func openWindow() {
        phase = .measuring
        windowStart = Monotonic.now()
        succeededAtWindowStart = succeeded
        cpu.start()
        timer?.start(timeout: milliseconds(seconds)) { [unowned self] in closeWindow() }
    }

    private func closeWindow() {
        result.seconds = Monotonic.seconds(from: windowStart, to: Monotonic.now())
        result.completed = succeeded - succeededAtWindowStart
        result.cpu = cpu.perUnit(units: result.completed)
        phase = .draining
        if inFlight == 0 {
            finish()
        } else {
            timer?.start(timeout: milliseconds(RPCLoad.drainSeconds)) { [unowned self] in
                result.recordAbandoned(inFlight, after: RPCLoad.drainSeconds)
                finish()
            }
        }
    }

    private func startUnit(on c: BenchConnection) {
        workload.startUnit(on: c)
        c.inFlight += 1
        inFlight += 1
    }

    private func received(_ outcome: UnitOutcome, on c: BenchConnection) {
        guard phase != .finished else { return }
        switch outcome {
        case .inProgress:
            return
        case .succeeded:
            succeeded += 1
        case .failed(let error):
            result.recordError(error)
        }
        unitFinished(on: c)
    }

    private func unitFinished(on c: BenchConnection) {
        c.inFlight -= 1
        inFlight -= 1
        switch phase {
        case .warmingUp, .measuring:
            startUnit(on: c)  // flushed by the read's `afterRead`
        case .draining:
            if inFlight == 0 { finish() }
        case .connecting, .finished:
            break
        }
    }

    /// Invalid JSON from the server costs nothing but an error; a connection that ends
    /// loses its units, which count as errors, and the run goes on with the others.
    private func trouble(_ problem: String, fatal: Bool, on c: BenchConnection) {
        guard phase != .finished else { return }
        guard fatal else {
            result.recordError("connection \(c.index): \(problem)")
            return
        }
        let lost = c.inFlight
        result.recordErrors(max(lost, 1), "connection \(c.index): \(problem) with \(lost) units in flight")
        inFlight -= lost
        c.inFlight = 0
        c.close()
        if connections.allSatisfy(\.isClosed) {
            if phase == .warmingUp || phase == .measuring { closeWindowEarly() }
            finish()
        } else if phase == .draining, inFlight == 0 {
            finish()
        }
    }

    private func closeWindowEarly() {
        if phase == .measuring {
            result.seconds = Monotonic.seconds(from: windowStart, to: Monotonic.now())
            result.completed = succeeded - succeededAtWindowStart
        }
    }

    private func fail(_ message: String) {
        result.failedToRun = true
        result.recordError(message)
        finish()
    }

    /// Closes everything; the loop then runs out of handles and `run()` returns.
    private func finish() {
        guard phase != .finished else { return }
        phase = .finished
        timer?.close()
        for c in connections { c.close() }
    }
}
