import Testing
@testable import EventLoop
import TestSupport

/// Connecting to a port nobody listens on reports ECONNREFUSED through the callback,
/// and leaves no handle behind.
@Test func connectRefused() throws {
    let harness = try LoopHarness()
    // Borrow an ephemeral port, then free it so nothing listens there.
    let probe = try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0)
    let port = try #require(probe.boundPort)
    probe.close()

    var outcome: Result<Stream, UVError>?
    Stream.connectTCP(loop: harness.loop, host: "127.0.0.1", port: port) { result in
        outcome = result
        if case .success(let stream) = result { stream.close() }
        harness.finish()
    }
    try harness.run()
    guard case .failure(let error) = outcome else {
        Issue.record("expected a failure, got \(String(describing: outcome))")
        return
    }
    #expect(error.name == "ECONNREFUSED")
}

/// Invalid arguments fail through the callback too — from the loop, never before
/// `connectTCP` returns — so callers have a single error path.
@Test func connectWithInvalidHostFailsFromTheLoop() throws {
    let harness = try LoopHarness()
    var outcome: Result<Stream, UVError>?
    Stream.connectTCP(loop: harness.loop, host: "not-an-address", port: 80) { result in
        outcome = result
        harness.finish()
    }
    #expect(outcome == nil)
    var pipeOutcome: Result<Stream, UVError>?
    Stream.connectPipe(loop: harness.loop, path: "/nonexistent/xhrpc.sock") { result in
        pipeOutcome = result
    }
    #expect(pipeOutcome == nil)
    try harness.run()
    guard case .failure(let error) = outcome, case .failure(let pipeError) = pipeOutcome else {
        Issue.record("expected failures, got \(String(describing: outcome)), \(String(describing: pipeOutcome))")
        return
    }
    #expect(error.name == "EINVAL")
    #expect(pipeError.name == "ENOENT")
}

/// Closing a stream whose connect is under way gives the connect up: its callback never
/// runs (libuv answers the request with ECANCELED during the close), so an owner that
/// went away with it is not called. A raw socket whose connect was cancelled or timed
/// out crashed the server on that call.
@Test func closingAConnectingStreamCallsNothing() throws {
    let harness = try LoopHarness()
    let listener = harness.track(try Listener.tcp(loop: harness.loop, host: "127.0.0.1", port: 0))
    let port = try #require(listener.boundPort)
    try listener.listen { result in
        if case .success(let accepted) = result { accepted.close() }
    }
    var called = 0
    let stream = try #require(Stream.connectTCP(loop: harness.loop, host: "127.0.0.1", port: port) { result in
        called += 1
        if case .success(let s) = result { s.close() }
    })
    stream.close { harness.finish() }
    try harness.run()
    #expect(called == 0)
}
