import CUV
import EventLoop
import Glibc

/// How the harness paces an input with an origin, as a value: each turn it is told what
/// the loop looks like and returns what to do. Deterministic in what it decides: it
/// goes by what is ready and what the loop's timers say, never by a clock.
///
/// - Something ready or due now: a turn that does not wait (`runNoWait`). Never a
///   waiting turn then: libuv drops a descriptor it no longer watches from the kernel's
///   set only when the kernel reports it once more, and a waiting turn that sees only
///   such a report goes on waiting, for the next timer.
/// - A timer due within `shortTimerMs`: wait for it (`runOnce`).
/// - Otherwise the loop is quiet. Quiet for `quietTurnsNeeded` turns in a row (each one
///   that does not wait, so a descriptor watched since the last one is in the kernel's
///   set by the next), nothing more can happen without the harness:
///   1. the client sends its next chunk, or its EOF (`send`);
///   2. else, if the origin still holds a connection open for writing, the server is
///      waiting for the origin, which half-closes them (`breakStall`);
///   3. else the server waits for one of its own timers (a retry's back-off, a
///      `Retry-After`): the input may wait `timerBudgetMs` in all, summed from what
///      the loop says each wait will last; past it the harness stops the server
///      (`stopServer`), which ends the input in bounded time whatever delay it asks
///      for. With no timer at all, the wait has no end: the server hangs on the input,
///      and libFuzzer's timeout reports it.
struct Pacing {
    /// What a turn of the loop would find now.
    struct LoopState: Equatable {
        /// A descriptor is ready (or was, for a descriptor libuv no longer watches).
        var ready: Bool
        /// `uv_backend_timeout`: milliseconds to the next timer, 0 when something is due
        /// now, -1 when there is no timer.
        var timeoutMs: Int

        /// The state of `loop` now.
        init(_ loop: Loop) {
            timeoutMs = Int(uv_backend_timeout(loop.raw))
            var fd = pollfd(fd: uv_backend_fd(loop.raw), events: Int16(POLLIN), revents: 0)
            ready = Glibc.poll(&fd, 1, 0) != 0
        }

        init(ready: Bool, timeoutMs: Int) {
            self.ready = ready
            self.timeoutMs = timeoutMs
        }
    }

    enum Action: Equatable {
        case runNoWait, runOnce, send, breakStall, stopServer
    }

    static let shortTimerMs = 20
    static let quietTurnsNeeded = 3
    static let timerBudgetMs = 100

    private var quietTurns = 0
    private var timerBudget = Pacing.timerBudgetMs
    private var stopping = false

    /// The next thing to do. `waitingToSend`: the client has a chunk or its EOF held
    /// back for the quiet; `originHoldsOpen`: `Origin.holdsConnectionOpen`.
    mutating func next(_ loop: LoopState, waitingToSend: Bool, originHoldsOpen: Bool) -> Action {
        if loop.ready || loop.timeoutMs == 0 {
            quietTurns = 0
            return .runNoWait
        }
        if loop.timeoutMs > 0, loop.timeoutMs < Pacing.shortTimerMs {
            quietTurns = 0
            return .runOnce
        }
        quietTurns += 1
        guard quietTurns >= Pacing.quietTurnsNeeded else { return .runNoWait }
        quietTurns = 0
        if waitingToSend { return .send }
        if originHoldsOpen { return .breakStall }
        if !stopping, loop.timeoutMs > timerBudget {
            stopping = true
            return .stopServer
        }
        if loop.timeoutMs > 0 { timerBudget -= loop.timeoutMs }
        return .runOnce
    }
}
