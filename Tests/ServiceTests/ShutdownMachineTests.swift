import Testing
@testable import Service

/// `ShutdownMachine` on its own: every path of a graceful stop, as actions. `DrainTests`
/// and the Python `test_lifetime.py` check the same stops against a real server.
@Suite struct ShutdownMachineTests {
    @Test func aStopWithSomethingInFlightDrainsThenCloses() {
        var m = ShutdownMachine()
        #expect(m.acceptsTransfers)
        #expect(m.stop(drainIsComplete: false) == [.stopListening, .announceDrain, .startDrainDeadline])
        #expect(m.phase == .draining)
        #expect(!m.acceptsTransfers)
        #expect(m.drainProgressed(drainIsComplete: false) == [])
        #expect(m.drainProgressed(drainIsComplete: true) == [.stopDrainDeadline, .abortTransfers, .closeConnections])
        #expect(m.phase == .closing)
        #expect(m.connectionClosed(remaining: 2) == [])
        #expect(m.connectionClosed(remaining: 0) == [.finish])
        #expect(m.phase == .done)
        #expect(m.stop(drainIsComplete: true) == [], "a stop after the end does nothing")
    }

    @Test func nothingToWaitForMeansNoDrain() {
        var m = ShutdownMachine()
        #expect(m.stop(drainIsComplete: true)
            == [.stopListening, .announceDrain, .stopDrainDeadline, .abortTransfers, .closeConnections])
        #expect(m.connectionClosed(remaining: 0) == [.finish])
    }

    @Test func aSecondStopCutsTheDrainShort() {
        var m = ShutdownMachine()
        _ = m.stop(drainIsComplete: false)
        #expect(m.stop(drainIsComplete: false) == [.logCutShort, .stopDrainDeadline, .abortTransfers, .closeConnections])
        #expect(m.stop(drainIsComplete: false) == [], "a third one while closing does nothing")
    }

    @Test func theDeadlineEndsTheDrainOnce() {
        var m = ShutdownMachine()
        _ = m.stop(drainIsComplete: false)
        #expect(m.drainDeadlinePassed() == [.logDeadlineReached, .stopDrainDeadline, .abortTransfers, .closeConnections])
        #expect(m.drainDeadlinePassed() == [])
        #expect(m.drainProgressed(drainIsComplete: true) == [])
        #expect(m.closeDeadlinePassed() == [.forceCloseConnections])
        #expect(m.connectionClosed(remaining: 0) == [.finish])
        #expect(m.closeDeadlinePassed() == [])
    }

    @Test func withoutADeadlineTimerThereIsNoDrain() {
        var m = ShutdownMachine()
        _ = m.stop(drainIsComplete: false)
        #expect(m.drainDeadlineUnavailable() == [.stopDrainDeadline, .abortTransfers, .closeConnections])
    }

    @Test func connectionsClosingWhileServingOrDrainingFinishNothing() {
        var m = ShutdownMachine()
        #expect(m.connectionClosed(remaining: 0) == [])
        _ = m.stop(drainIsComplete: false)
        #expect(m.connectionClosed(remaining: 0) == [])
        #expect(m.phase == .draining)
    }
}
