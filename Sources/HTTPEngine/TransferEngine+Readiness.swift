/// How many ready sockets reach libcurl per loop turn.
///
/// libuv hands over every descriptor that one poll found ready, thousands at once if
/// need be, and each one passed to libcurl may finish a transfer: the transfer's
/// completion, its delegate and the answer to its client all run right there. When the
/// `inflight` benchmark's upstream answered 10,000 held requests together, they all
/// completed in one turn, and for 1-2 s no other connection was served: a
/// `server.info` probe waited 1.7 s (`docs/internals/benchmark-history.md`, "The release turn").
///
/// So at most `readyPerTurn` readiness events are passed to libcurl per turn. The rest
/// wait in `readyQueue`, in the order they came, each socket once with the flags it
/// gathered (`SocketWatch.queuedFlags`), and its poll stopped meanwhile: epoll is
/// level-triggered, and an armed poll would report the same socket on every turn. At
/// the end of the turn (`endTurn`, the prepare handle, just before the loop polls) the
/// allowance is renewed and the waiting sockets go first, before anything the next poll
/// finds; each gets its poll back once libcurl has acted on it (`rearm`), unless
/// libcurl no longer wants it. The deferred timer keeps the next poll from blocking
/// while sockets wait, and after any were passed here: work they started may need a
/// later phase of the loop (another prepare handle started meanwhile). Under ordinary load a turn sees fewer ready sockets than the
/// allowance and nothing waits.
///
/// Readiness that waits a turn is still true: the socket was not read meanwhile except
/// by libcurl itself, which reads until `EAGAIN` and takes a spurious flag in its stride.
/// Errors (`status < 0` in `socketReady`) are passed on at once; they are rare and end
/// the connection.
extension TransferEngine {
    /// Readiness events passed to libcurl per loop turn. A completing `fetch` costs
    /// about 25 µs here (libcurl's read, the completion and the answer's write), so 32
    /// keep a turn near 1 ms.
    static let readyPerTurn = 32

    /// Passes `flags` for `w` to libcurl now, or holds them for a later turn when this
    /// turn's allowance is spent or the socket already waits.
    func passReadiness(_ w: SocketWatch, _ flags: Int32) {
        if w.queuedFlags == 0, readyThisTurn < TransferEngine.readyPerTurn {
            readyThisTurn += 1
            watchTurn()
            socketAction(w.fd, flags)
            return
        }
        if w.queuedFlags == 0 { readyQueue.append(w) }
        w.queuedFlags |= flags
        if w.armed {
            w.armed = false
            w.poll?.stop()
        }
        watchTurn()
        armDeferred()
    }

    /// At the end of a turn (`endTurn`): a new allowance, then the waiting sockets
    /// within it, in order. Returns whether readiness still needs the turn handle.
    func endReadyTurn() -> Bool {
        let passedBefore = readyThisTurn
        readyThisTurn = 0
        while isOpen, readyThisTurn < TransferEngine.readyPerTurn, let w = readyQueue.popFirst() {
            let flags = w.queuedFlags
            w.queuedFlags = 0
            // Closed, replaced by a new socket on the same number, or no longer wanted
            // by libcurl (`CURL_POLL_REMOVE`) since it was held: nothing to pass.
            guard watch(w.fd) === w, w.watching else { continue }
            readyThisTurn += 1
            socketAction(w.fd, flags)
            rearm(w)
        }
        // What libcurl's work here started (a handle another prepare handle now watches,
        // a transfer queued to join) runs on the next turn: the poll must not block first.
        if readyThisTurn != 0 || !readyQueue.isEmpty { armDeferred() }
        return passedBefore != 0 || readyThisTurn != 0 || !readyQueue.isEmpty
    }
}
