import CCurl

/// How many started transfers join the multi per loop turn.
///
/// A transfer that joins the multi connects and sends its request on libcurl's next run
/// (a 0 ms timeout, the next turn), all of them in one `curl_multi_socket_action` call.
/// 10,000 fetches written at once were all started within a few turns, and libcurl then
/// opened 10,000 connections in one call while the loop served nothing else for seconds
/// (`Benchmarks/README.md`, `inflight`). So at most `admissionsPerTurn` transfers join per
/// turn; the rest wait in `pendingAdds`, in the order they were started, and the
/// turn handle (a libuv prepare handle: it runs once per turn, before the loop polls)
/// lets the next ones in. Every started transfer still runs, in order, and the
/// loop's other work (other connections' calls, data on running transfers) goes on
/// between the slices. Transfers started while libcurl is on the stack wait in the same
/// queue (see `TransferEngine`).
///
/// Of a turn's admissions, at most `connectsPerTurn` may be transfers that open a new
/// connection (`skipsConnectionSearch`: libcurl holds no idle connection they could reuse).
/// Opening one is most of a transfer's cost in the turn it joins and the next (socket,
/// `connect`, its poll, the request's write): about 90 µs each against 23 µs for the
/// `fetch` call that started it, so 16 joining at once made turns of 1.5-2 ms of CPU and
/// `server.info` probes waited that long (`inflight`, during the ramp). Transfers that may
/// reuse a cached connection, the usual case under steady load, still join 16 a turn.
///
/// A waiting transfer is `waitingToAdd`: `cancel` silences it at once and it is skipped
/// when its turn comes; its timeout clock runs from `start`, as for any other.
extension TransferEngine {
    /// At most this many transfers join the multi per loop turn.
    static let admissionsPerTurn = 16
    /// Of those, at most this many that open a new connection.
    static let connectsPerTurn = 4


    /// Whether `t`, started outside libcurl's callbacks, may join the multi now: nothing
    /// started before it is still waiting and this turn has room. Counts it if so.
    func admitsNow(_ t: Transfer) -> Bool {
        guard waitingToJoin == 0, hasRoom(for: t) else { return false }
        admitted(t)
        return true
    }

    /// Whether this turn has room for `t`: for one more transfer, and for one more new
    /// connection if `t` opens one.
    private func hasRoom(for t: Transfer) -> Bool {
        guard admittedThisTurn < TransferEngine.admissionsPerTurn else { return false }
        return connectsThisTurn < TransferEngine.connectsPerTurn || !skipsConnectionSearch(t)
    }

    /// Queues `t` to join the multi on a later admission.
    func enqueue(_ t: Transfer) {
        t.state = .waitingToAdd
        pendingAdds.append(t)
        watchTurn()
    }

    /// Adds waiting transfers while this turn has room. Called once libcurl returned and
    /// at the end of every turn (with a fresh allowance). A failure to add can only be
    /// reported as the transfer's completion: its `start` returned long ago.
    func admitWaiting() {
        while isOpen, let t = pendingAdds.first {
            if t.state == .waitingToAdd, !hasRoom(for: t) { break }
            _ = pendingAdds.popFirst()
            guard t.state == .waitingToAdd else { continue }
            admitted(t)
            if let failure = add(t) { t.delegate?.transfer(t, completedWith: failure) }
        }
    }

    private func admitted(_ t: Transfer) {
        admittedThisTurn += 1
        if skipsConnectionSearch(t) { connectsThisTurn += 1 }
        watchTurn()
    }

    /// At the end of a turn (`endTurn`): a new turn's allowance, then the next waiting
    /// transfers. Returns whether admission still needs the turn handle: false once a
    /// turn admitted nothing and nothing waits.
    func endAdmissionTurn() -> Bool {
        let admittedBefore = admittedThisTurn
        admittedThisTurn = 0
        connectsThisTurn = 0
        admitWaiting()
        return admittedBefore != 0 || admittedThisTurn != 0 || waitingToJoin != 0
    }
}
