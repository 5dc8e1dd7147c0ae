import Testing
@testable import Service

typealias Action = RequestStateMachine.Action

private func opened() -> RequestStateMachine {
    var m = RequestStateMachine()
    _ = m.open()
    return m
}

private func sent() throws -> RequestStateMachine {
    var m = opened()
    _ = try m.send()
    return m
}

@Test func openFromUnsentNotifiesOpened() {
    var m = RequestStateMachine()
    #expect(m.open() == [.clearRequest, .clearResponse, .notify(.opened)])
    #expect(m.state == .opened)
}

@Test func sendOnlyInOpened() throws {
    var m = RequestStateMachine()
    #expect(throws: RequestStateMachine.Misuse(state: .unsent)) { try m.send() }
    m = opened()
    #expect(try m.send() == [.clearResponse, .notify(.sent), .startTransfer])
    #expect(throws: RequestStateMachine.Misuse(state: .sent)) { try m.send() }
}

@Test func normalResponseGoesThroughEveryState() throws {
    var m = try sent()
    #expect(m.headReceived() == [.recordHead, .notify(.headersReceived)])
    #expect(m.bodyReceived() == [.notify(.loading)])
    #expect(m.bodyReceived() == [])
    #expect(m.completed() == [.notify(.done), .answerSyncSend])
    #expect(m.state == .done)
}

@Test func responseCompletingAtOnceStillReportsEachState() throws {
    var m = try sent()
    #expect(m.completed() == [.recordHead, .notify(.headersReceived), .notify(.loading), .notify(.done), .answerSyncSend])
}

@Test func emptyBodyAfterHeadReportsLoading() throws {
    var m = try sent()
    _ = m.headReceived()
    #expect(m.completed() == [.notify(.loading), .notify(.done), .answerSyncSend])
}

@Test func failureBeforeHeadGoesStraightToDone() throws {
    var m = try sent()
    #expect(m.failed("refused") == [.clearResponse, .recordFailure("refused"), .notify(.done), .answerSyncSend])
}

@Test func failureMidBodyClearsTheResponse() throws {
    var m = try sent()
    _ = m.headReceived()
    _ = m.bodyReceived()
    #expect(m.failed("reset") == [.clearResponse, .recordFailure("reset"), .notify(.done), .answerSyncSend])
}

@Test(arguments: [RequestState.sent, .headersReceived, .loading])
func abortInFlightEndsInDone(at state: RequestState) throws {
    var m = try sent()
    if state.rawValue >= RequestState.headersReceived.rawValue { _ = m.headReceived() }
    if state == .loading { _ = m.bodyReceived() }
    #expect(m.state == state)
    let (aborted, actions) = m.abort()
    #expect(aborted)
    #expect(actions == [.cancelTransfer, .clearResponse, .clearRequest, .recordFailure("Aborted"), .notify(.done), .answerSyncSend])
}

@Test func abortOutsideATransferDoesNothing() throws {
    var m = RequestStateMachine()
    #expect(m.abort().aborted == false)
    m = opened()
    #expect(m.abort().aborted == false)
    m = try sent()
    _ = m.completed()
    let (aborted, actions) = m.abort()
    #expect(!aborted && actions.isEmpty)
    #expect(m.state == .done)
}

@Test func reopenMidFlightAbortsFirst() throws {
    var m = try sent()
    _ = m.headReceived()
    #expect(m.open() == [.cancelTransfer, .clearResponse, .clearRequest, .recordFailure("Aborted"), .notify(.done),
                         .answerSyncSend, .clearRequest, .clearResponse, .notify(.opened)])
    #expect(m.state == .opened)
}

@Test func lateEventsOfAnEndedTransferAreIgnored() throws {
    var m = try sent()
    _ = m.abort()
    #expect(m.headReceived() == [])
    #expect(m.bodyReceived() == [])
    #expect(m.completed() == [])
    #expect(m.failed("late") == [])
}

@Test func optionsOnlyBeforeSend() throws {
    #expect(RequestStateMachine().acceptsOptions)
    #expect(opened().acceptsOptions)
    #expect(try !sent().acceptsOptions)
}
