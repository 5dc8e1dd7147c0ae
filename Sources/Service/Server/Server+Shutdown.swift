import EventLoop
import Foundation
import JSONRPC

/// The graceful stop: the `ShutdownMachine` decides, this performs.
extension Server {
    /// Stops the server gracefully; `done` runs when no handle of the server is left.
    ///
    /// At once: the listeners close (Unix socket files are removed) and every client
    /// hears `onShutdown {drainSeconds}`. Then the drain: connections keep being served
    /// and transfers in flight go on, but no new one starts (sends and `fetch` are
    /// refused). The drain ends when no transfer is in flight and no request holds
    /// unread bytes, when every client has gone, or after `--drain-seconds`, whichever
    /// comes first. Then what is left is aborted (its subscribers hear DONE), queued
    /// replies go out, connections close, the cookies are saved and the engine stops.
    ///
    /// Calling it again during the drain ends the drain at once (an operator's second
    /// SIGTERM); that call's `done` is not used, the first one's still runs.
    public func shutdown(_ done: @escaping () -> Void) {
        if shutdownMachine.phase == .serving { shutdownDone = done }
        perform(shutdownMachine.stop(drainIsComplete: drainIsComplete))
    }

    /// Something that may end the drain happened (a request reached DONE or was read to
    /// the end or released, a connection closed). The check runs on the next turn of
    /// the loop: the event may come from inside a libcurl callback, where the transfers
    /// that are left must not be aborted, and several events in one turn cost one check.
    func drainMayHaveEnded() {
        guard shutdownMachine.phase == .draining, !drainCheckScheduled else { return }
        drainCheckScheduled = true
        soon { [unowned self] in
            drainCheckScheduled = false
            perform(shutdownMachine.drainProgressed(drainIsComplete: drainIsComplete))
        }
    }

    /// Transfers under way (requests in SENT, HEADERS_RECEIVED or LOADING, and `fetch`
    /// calls not yet answered), from the principals' counts.
    private var transfersInFlight: Int { principals.values.reduce(0) { $0 + $1.transfersInFlight } }

    /// Nothing is left for the drain to wait for: every client has gone, or no transfer
    /// is in flight and every request's body has been read (the principals' counts of
    /// transfers and unread bytes cover `fetch` calls too). What calls stored (headers,
    /// credentials, cookies) is no reason to wait.
    private var drainIsComplete: Bool {
        connections.isEmpty || principals.values.allSatisfy { $0.transfersInFlight == 0 && $0.bytesOnTheirWay == 0 }
    }

    func perform(_ actions: [ShutdownMachine.Action]) {
        for action in actions {
            switch action {
            case .stopListening:
                for (address, listener) in listeners {
                    listener.close()
                    if case .unix(let path) = address { unlink(path) }
                }
                listeners = []
            case .announceDrain:
                for c in connections.values where c.context is ClientSession {
                    c.notify("onShutdown", ["drainSeconds": config.drainSeconds.secondsJSON])
                }
            case .startDrainDeadline:
                startDrainDeadline()
            case .logCutShort:
                logger.info("stopping now: the drain is cut short")
            case .logDeadlineReached:
                logger.info("the drain reached its \(config.drainSeconds) s limit")
            case .stopDrainDeadline:
                drainDeadline?.close()
                drainDeadline = nil
            case .abortTransfers:
                abortTransfers()
            case .closeConnections:
                closeConnections()
            case .forceCloseConnections:
                closeDeadline?.close()
                closeDeadline = nil
                for c in connections.values { c.close(reason: "shutting down") }
            case .finish:
                finishShutdown()
            }
        }
    }

    private func startDrainDeadline() {
        let drain = config.drainSeconds
        guard let timer = try? EventLoop.Timer(loop: loop) else {
            logger.error("no timer for the drain's deadline: stopping without a drain")
            perform(shutdownMachine.drainDeadlineUnavailable())
            return
        }
        timer.start(timeout: UInt64(drain * 1000)) { [unowned self] in
            perform(shutdownMachine.drainDeadlinePassed())
        }
        drainDeadline = timer
        logger.info("draining: \(connections.count) connections, \(transfersInFlight) transfers in flight, up to \(drain) s")
    }

    /// Aborts what the drain left, while the connections are still open, so that the
    /// subscribers hear DONE and `fetch` callers get their answer.
    private func abortTransfers() {
        var aborted = 0
        for p in principals.values {
            for r in p.requests where r.abort() { aborted += 1 }
        }
        for c in connections.values {
            guard let s = c.context as? ClientSession else { continue }
            for r in s.fetches.values where r.abort() { aborted += 1 }
        }
        if aborted > 0 || !connections.isEmpty {
            logger.info("drain over: \(aborted) transfers aborted, closing \(connections.count) connections")
        }
    }

    /// Closes every connection once its replies are out. Those with nothing queued close
    /// at once (and the last close finishes the stop); a client that never reads would
    /// hold its flush forever, so the rest get a second.
    private func closeConnections() {
        if connections.isEmpty {
            perform(shutdownMachine.connectionClosed(remaining: 0))
            return
        }
        for c in connections.values { c.closeAfterFlush() }
        guard !connections.isEmpty, shutdownMachine.phase == .closing else { return }
        let deadline = try? EventLoop.Timer(loop: loop)
        deadline?.start(timeout: 1000) { [unowned self] in
            perform(shutdownMachine.closeDeadlinePassed())
        }
        closeDeadline = deadline
    }

    private func finishShutdown() {
        closeDeadline?.close()
        closeDeadline = nil
        for c in refused.values { c.close(reason: "shutting down") }
        lifetime.close()
        releaseAllGoneFetches()
        for p in principals.values {
            for o in p.objects.values { release(o) }
        }
        // After the releases: their transfers have ended, so the jars hold all there is.
        cookies.close()
        hub.close()
        questions.close()
        coalescer.close()
        stopOperationsListener()
        engine.shutdown { [self] in
            let done = shutdownDone
            shutdownDone = nil
            done?()
        }
    }
}
