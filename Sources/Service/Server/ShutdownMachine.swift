/// A graceful stop, as a pure value: it decides, the server acts (`Server+Shutdown.swift`),
/// and the tests drive it with no socket and no timer (`ShutdownMachineTests`).
///
/// serving → draining (listeners closed, clients told, transfers finish, clients read)
/// → closing (what is left aborted, connections closed once their replies are out)
/// → done (objects released, cookies saved, engine stopped).
///
/// The drain ends when nothing is left to wait for, at its deadline, or at a second
/// stop request (an operator's second SIGTERM). The close waits for every connection to
/// go, at most until its own deadline, after which the rest are closed at once.
struct ShutdownMachine: Equatable {
    enum Phase: Equatable {
        case serving, draining, closing, done
    }

    /// What the server is asked to do, in order.
    enum Action: Equatable {
        /// Close the listeners (and remove Unix socket files): nobody new gets in.
        case stopListening
        /// Tell every authenticated client `onShutdown {drainSeconds}`.
        case announceDrain
        /// Arm the drain's deadline (`--drain-seconds`).
        case startDrainDeadline
        case logCutShort
        case logDeadlineReached
        case stopDrainDeadline
        /// Abort every transfer still in flight (subscribers hear DONE, `fetch` callers
        /// get their answer), while the connections are still open.
        case abortTransfers
        /// Close every connection once its replies are written; arm the close deadline
        /// if any is still open afterwards.
        case closeConnections
        /// The close deadline passed: close the connections left, discarding what they
        /// have not read.
        case forceCloseConnections
        /// Release every object, save the cookies, stop the engine, report done.
        case finish
    }

    private(set) var phase = Phase.serving

    /// Whether new transfers may start.
    var acceptsTransfers: Bool { phase == .serving }

    /// A stop was asked for (SIGTERM, SIGINT). `drainIsComplete`: nothing is in flight
    /// and nothing unread, or no client is connected.
    mutating func stop(drainIsComplete: Bool) -> [Action] {
        switch phase {
        case .serving:
            phase = .draining
            // Nothing to wait for (no client, or a start that failed): no drain at all.
            return [.stopListening, .announceDrain] + (drainIsComplete ? endDrain() : [.startDrainDeadline])
        case .draining:
            return [.logCutShort] + endDrain()
        case .closing, .done:
            return []
        }
    }

    /// Something the drain waits for may have ended (checked on the next turn of the loop).
    mutating func drainProgressed(drainIsComplete: Bool) -> [Action] {
        guard phase == .draining, drainIsComplete else { return [] }
        return endDrain()
    }

    mutating func drainDeadlinePassed() -> [Action] {
        guard phase == .draining else { return [] }
        return [.logDeadlineReached] + endDrain()
    }

    /// The drain's deadline could not be armed: rather no drain than one without end.
    mutating func drainDeadlineUnavailable() -> [Action] {
        guard phase == .draining else { return [] }
        return endDrain()
    }

    /// A connection closed (or `closeConnections` was done); `remaining` are still open.
    mutating func connectionClosed(remaining: Int) -> [Action] {
        guard phase == .closing, remaining == 0 else { return [] }
        phase = .done
        return [.finish]
    }

    mutating func closeDeadlinePassed() -> [Action] {
        guard phase == .closing else { return [] }
        return [.forceCloseConnections]
    }

    private mutating func endDrain() -> [Action] {
        phase = .closing
        return [.stopDrainDeadline, .abortTransfers, .closeConnections]
    }
}
