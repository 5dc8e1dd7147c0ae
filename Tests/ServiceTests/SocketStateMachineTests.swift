import Testing
@testable import Service

/// The raw socket's state table (`SocketStateMachine`; docs/internals/SOCKETS.md, "States"),
/// call by call and event by event.
@Suite struct SocketStateMachineTests {
    @Test func theStatesAreNumberedAndNamedAsTheDocumentedTable() {
        #expect(SocketState.allCases.map(\.rawValue) == [0, 1, 2, 3, 4])
        #expect(SocketState.allCases.map(\.name) == ["Prepared", "Connecting", "Open", "Disconnecting", "Disconnected"])
    }

    @Test func aConnectionOpensWritesAndDisconnects() throws {
        var m = SocketStateMachine()
        #expect(m.acceptsOptions)
        try m.connect()
        #expect(m.state == .connecting && !m.acceptsOptions)
        #expect(throws: SocketStateMachine.Misuse.self) { try m.checkWrite() }
        let opened = m.opened()
        #expect(opened && m.state == .open)
        try m.checkWrite()
        let action = try m.disconnect()
        #expect(action == .flushThenClose && m.state == .disconnecting)
        #expect(throws: SocketStateMachine.Misuse.self) { try m.checkWrite() }
        let first = m.closed()
        #expect(first && m.state == .disconnected, "onClose is owed once")
        let second = m.closed()
        #expect(!second, "and only once")
    }

    @Test func aFailedConnectEndsDisconnectedAndMayBeRetried() throws {
        var m = SocketStateMachine()
        try m.connect()
        let closed = m.closed()
        #expect(closed && m.state == .disconnected && m.acceptsOptions)
        try m.connect()
        #expect(m.state == .connecting)
    }

    @Test func disconnectWhileConnectingCancels() throws {
        var m = SocketStateMachine()
        try m.connect()
        let action = try m.disconnect()
        #expect(action == .cancelConnect)
        let closed = m.closed()
        let opened = m.opened()
        #expect(closed && !opened, "a stream made after the cancel is not wanted")
    }

    @Test func callsOutsideTheirStatesAreRefused() throws {
        var m = SocketStateMachine()
        var copy = m
        #expect(throws: SocketStateMachine.Misuse(allowed: "Connecting or Open")) { _ = try copy.disconnect() }
        let closed = m.closed()
        #expect(!closed, "nothing to close before a connect")
        try m.connect()
        copy = m
        #expect(throws: SocketStateMachine.Misuse(allowed: "Prepared or Disconnected")) { try copy.connect() }
        _ = m.opened()
        copy = m
        #expect(throws: SocketStateMachine.Misuse.self) { try copy.connect() }
        let again = m.opened()
        #expect(!again, "opened only from Connecting")
    }
}
