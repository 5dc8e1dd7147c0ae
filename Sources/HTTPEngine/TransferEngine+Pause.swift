import CCurl
import CShims

/// Pausing and the whole-transfer timeout, in one place.
///
/// A transfer is paused for a set of reasons (`PauseReasons`), each lifted only by its
/// owner: `.noRoom` by the delegate's `resume()`, `.requested` by the caller's
/// `unpause()`. libcurl's own pause follows the set: both directions while the caller
/// holds it (`CURLPAUSE_ALL`), receiving only while the reader has no room
/// (`CURL_WRITEFUNC_PAUSE`, then `CURLPAUSE_RECV` after an `unpause`), nothing once the
/// set is empty (`CURLPAUSE_CONT`). Pausing happens at once; unpausing waits for the
/// next turn (`applyPause`), because `CURLPAUSE_CONT` hands the held bytes to the
/// delegate from inside `curl_easy_pause`. The write and read callbacks also answer
/// with libcurl's pause codes while the caller holds the transfer, so a pause asked for
/// before libcurl reached the body (connecting, a redirect's next hop) holds there.
///
/// The timeout (`TransferRequest.timeout`) is the engine's, not `CURLOPT_TIMEOUT_MS`:
/// libcurl's keeps running while a transfer is paused (its deadline is fixed when the
/// transfer starts), so a caller's pause longer than the timeout would fail the
/// transfer. Each transfer's `ActiveClock` stops while the caller holds it paused; one
/// timer fires at the earliest deadline in `timed` (`TransferDeadlines`) and ends
/// the transfers whose run time is used up, as libcurl would, with
/// `CURLE_OPERATION_TIMEDOUT` and libcurl's wording. A pause for lack of room does not
/// stop the clock: a reader too slow for the timeout it asked for still times out.
/// No low-speed limit (`CURLOPT_LOW_SPEED_*`) is set on any transfer, so none can fire
/// while one is paused.
extension TransferEngine {
    /// The caller's pause (`Transfer.pause`). Its deadline goes to the back of `timed`
    /// (a stopped clock has none); the timer is left as it is, and if it was armed for
    /// this transfer it fires for nothing and arms itself for the next deadline.
    func pause(_ t: Transfer) {
        guard isOpen, t.state == .running || t.state == .waitingToAdd, !t.pauseReasons.contains(.requested) else { return }
        t.pauseReasons.insert(.requested)
        t.activeClock.stop(at: TransferEngine.monotonicSeconds())
        timed.move(t, to: .infinity)
        holdIfRequested(t)
    }

    /// Lifts the caller's pause (`Transfer.unpause`); libcurl follows on the next turn.
    /// The transfer's clock runs again, so it has a deadline again.
    func unpause(_ t: Transfer) {
        guard isOpen, t.state == .running || t.state == .waitingToAdd, t.pauseReasons.contains(.requested) else { return }
        t.pauseReasons.remove(.requested)
        t.activeClock.start(at: TransferEngine.monotonicSeconds())
        schedulePauseUpdate(t)
        if let deadline = t.activeClock.deadline(for: t.request.timeout), timed.contains(t) {
            timed.move(t, to: deadline)
            armTimeouts()
        }
    }

    /// Pauses libcurl in both directions if the caller holds `t` and its handle is in
    /// the multi (at `pause`, and whenever the handle joins the multi: `add`, the next
    /// hop of a redirect). Pausing delivers nothing, so it is safe at any point.
    func holdIfRequested(_ t: Transfer) {
        guard t.pauseReasons.contains(.requested), t.inMulti, let slot = t.slot else { return }
        t.pausedInCurl = true
        let rc = curl_easy_pause(slot.easy.raw, Curl.pauseAll)
        if rc != CURLE_OK { log.warning("curl_easy_pause: \(String(cString: curl_easy_strerror(rc)))") }
    }

    /// Next-turn work for one transfer: lifts `.noRoom` if the delegate made room, then
    /// unpauses libcurl as far as the remaining reasons allow. Runs with `inCurl` set:
    /// `CURLPAUSE_CONT` delivers the held bytes to the delegate from inside the call,
    /// and it may refuse them again, which pauses again.
    func applyPause(_ t: Transfer) {
        t.pauseUpdateScheduled = false
        guard t.state == .running, let slot = t.slot else { return }
        if t.roomMade {
            t.roomMade = false
            t.pauseReasons.remove(.noRoom)
        }
        guard t.pausedInCurl, !t.pauseReasons.contains(.requested) else { return }
        let rc: CURLcode
        if t.pauseReasons.contains(.noRoom) {
            // Sending may go on; receiving waits for the reader.
            rc = curl_easy_pause(slot.easy.raw, Curl.pauseRecv)
        } else {
            t.pausedInCurl = false
            rc = curl_easy_pause(slot.easy.raw, Curl.pauseCont)
        }
        if rc != CURLE_OK { log.warning("curl_easy_pause: \(String(cString: curl_easy_strerror(rc)))") }
    }

    // MARK: - Timeouts

    /// Makes the timer fire by the earliest deadline in `timed` at the latest. A timer
    /// armed for an earlier one is left alone: when it fires it finds nothing due (the
    /// transfer ended or was paused) and arms itself for what is earliest then.
    func armTimeouts() {
        guard isOpen, let deadline = timed.earliest?.deadline, deadline.isFinite else { return }
        if timeoutTimer.isActive, let armed = timeoutArmedFor, armed <= deadline { return }
        armTimeout(at: deadline)
    }

    /// Arms the timer for `deadline`, and for 1 ms from now when it has passed: libuv
    /// 1.44 runs a timer that a timer callback starts with no delay in the same pass, so
    /// the transfers left over by `timeoutsDue` would all end in one turn after all.
    private func armTimeout(at deadline: Double) {
        timeoutArmedFor = deadline
        let ms = max(1, (deadline - TransferEngine.monotonicSeconds()) * 1000).rounded(.up)
        timeoutTimer.start(timeout: UInt64(min(ms, 1e12)), timeoutTimerFired)
    }

    /// Transfers that the timeout ends per loop turn, as many as ready sockets are
    /// passed to libcurl (`readyPerTurn`): ending one costs about as much as completing
    /// it. 10,000 transfers whose time ran out together all ended in one turn, and a
    /// `server.info` call on another connection waited 360 ms.
    static let timeoutsPerTurn = 32

    /// The timeout timer fired: ends the transfers whose time is used up, earliest
    /// first, at most `timeoutsPerTurn` of them (the others on the next turns), then arms
    /// the timer for the next deadline. A transfer still waiting to join the multi ends
    /// too, since its time ran while it waited (a cancelled one has left `timed`). Not
    /// inside libcurl, so transfers leave the multi at once, and each delegate hears its
    /// completion last, as from `complete`; what a delegate starts or cancels meanwhile
    /// is in `timed` when the next is read.
    func timeoutsDue() {
        guard isOpen else { return }
        let now = TransferEngine.monotonicSeconds()
        var ended = 0
        while ended < TransferEngine.timeoutsPerTurn, let (t, deadline) = timed.earliest, deadline <= now {
            ended += 1
            let failure = timedOut(t, now: now)
            t.metrics = TransferMetrics(
                effectiveURL: t.slot?.easy.info(string: CURLINFO_EFFECTIVE_URL) ?? t.hop.url,
                redirectCount: t.redirectsFollowed,
                connectionsOpened: t.earlierConnections + (t.slot?.easy.info(long: CURLINFO_NUM_CONNECTS) ?? 0),
                totalTime: now - t.startedAt)
            t.state = .finished
            detach(t)
            t.delegate?.transfer(t, completedWith: failure)
        }
        armTimeouts()
    }

    /// libcurl's failure for a timeout, in its words ("Operation timed out after 501
    /// milliseconds with 0 bytes received"), counting only the time the transfer ran.
    private func timedOut(_ t: Transfer, now: Double) -> TransferFailure {
        let ran = max(t.activeClock.seconds(at: now), t.request.timeout)
        let ms = Int((ran * 1000).rounded(.up))
        let p = t.lastProgress
        let bytes = p.downloadTotal > 0 ? "\(p.downloaded) out of \(p.downloadTotal)" : "\(p.downloaded)"
        return TransferFailure(CURLE_OPERATION_TIMEDOUT, "Operation timed out after \(ms) milliseconds with \(bytes) bytes received")
    }
}
