import EventLoop

/// Gathers the messages a connection sends outside of reading its own input (replies
/// to deferred calls, notifications from transfers) and writes each connection's share
/// once per loop turn, just before the loop would block: one `write` for many small
/// messages instead of one each, with no added latency.
public final class WriteCoalescer {
    private let prepare: Prepare
    private var pending: [RPCConnection] = []
    /// The connections' shared allowance of calls per turn (it lives here because the
    /// coalescer is the server's one per-loop helper for its connections).
    let calls: CallAllowance

    public init(loop: Loop) throws {
        prepare = try Prepare(loop: loop)
        do { calls = try CallAllowance(loop: loop) } catch { prepare.close(); throw error }
    }

    /// Asks for `connection`'s queued bytes to be written this turn.
    func schedule(_ connection: RPCConnection) {
        pending.append(connection)
        if !prepare.isActive {
            prepare.start { [unowned self] in flushAll() }
        }
    }

    private func flushAll() {
        let due = pending
        pending = []
        for c in due { c.flushScheduled() }
        if pending.isEmpty { prepare.stop() }
    }

    public func close() {
        let due = pending
        pending = []
        for c in due { c.flushScheduled() }
        prepare.close()
        calls.close()
    }
}
