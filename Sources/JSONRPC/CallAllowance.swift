import EventLoop

/// How many calls the server's connections run per loop turn, together.
///
/// One read can carry hundreds of calls, and many connections can be readable in the
/// same turn: 10,000 `fetch` calls written at once over 16 connections were all
/// dispatched in the first turn, and every other connection (a `server.info` from a
/// monitor) waited for them (`Benchmarks/README.md`, `inflight`). So the calls of all
/// connections share an allowance of `perTurn` per turn, in slices of `perSlice` while
/// several want it. A connection whose next call finds it spent keeps the rest of its read
/// (`RPCConnection.backlog`, and the bytes not parsed yet: `RPCConnection.unparsed`), stops reading,
/// and queues here; at the end of the turn (a prepare handle, just before the loop
/// polls) the allowance is renewed and the queued connections go on, in the order they
/// queued, before the new turn's reads (`turnEnded`). While connections wait, a 0 ms timer keeps the
/// loop's poll from blocking, so they go on at once when nothing else is ready. Each
/// connection's calls still run in the order they arrived.
public final class CallAllowance {
    /// Calls run per loop turn over all connections. A `fetch` call costs about 23 µs
    /// of CPU (the `inflight` ramp, per-turn thread CPU time): 32 made turns of 0.7 ms
    /// before any transfer joined; 16 keep them near 0.4 ms.
    public static let perTurn = 16
    /// Calls one connection runs before it lets waiting ones go first.
    public static let perSlice = 4

    private let prepare: Prepare
    private let wake: Timer
    private var used = 0
    private var waiting: [RPCConnection] = []
    /// Whether `prepare` is started: only this object starts and stops it, and `take`
    /// asks for every call, so it is kept here rather than asked of libuv each time.
    private var watchingTurn = false

    init(loop: Loop) throws {
        prepare = try Prepare(loop: loop)
        do { wake = try Timer(loop: loop) } catch { prepare.close(); throw error }
    }

    /// Counts one call against this turn's allowance: false when it is spent, or when
    /// the caller has run its share (`slice` calls since it last read or resumed) and
    /// other connections wait. The first call of a new read always runs (`fresh`), so a
    /// connection that was not waiting (a monitor's single call) is answered this turn
    /// rather than queued behind those with thousands: a turn runs at most `perTurn`
    /// calls plus one per connection that read.
    func take(slice: Int, fresh: Bool) -> Bool {
        guard fresh || used < CallAllowance.perTurn else { return false }
        if !fresh, slice >= CallAllowance.perSlice, !waiting.isEmpty { return false }
        used += 1
        watchTurn()
        return true
    }

    /// `connection` goes on with its calls once the allowance is renewed.
    func wait(_ connection: RPCConnection) {
        waiting.append(connection)
        watchTurn()
        if !wake.isActive { wake.start(timeout: 0) {} }
    }

    /// Renews the allowance and lets the waiting connections go on, each for a slice, in
    /// the order they queued: one that runs out of its slice queues again behind the
    /// others, and those the allowance does not reach keep their places.
    private func turnEnded() {
        used = 0
        var due = waiting.count
        while due > 0, used < CallAllowance.perTurn, !waiting.isEmpty {
            due -= 1
            waiting.removeFirst().resumeCalls()
        }
        if used == 0, waiting.isEmpty {
            prepare.stop()
            watchingTurn = false
        }
        if !waiting.isEmpty, !wake.isActive { wake.start(timeout: 0) {} }
    }

    /// Has `turnEnded` called at the end of this loop turn.
    private func watchTurn() {
        guard !watchingTurn else { return }
        watchingTurn = true
        prepare.start { [unowned self] in turnEnded() }
    }

    func close() {
        waiting = []
        prepare.close()
        wake.close()
    }
}
