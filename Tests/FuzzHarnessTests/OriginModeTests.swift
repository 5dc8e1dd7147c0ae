import EventLoop
import HTTPEngine
import Testing
@testable import xhrpc_fuzz

/// The fuzz harness's origin mode (docs/internals/fuzzing.md): how an input's records
/// are read, whom the input's egress policy lets through, and how the harness paces the
/// loop. The harness runs every seed in `make fuzz-replay`; these pin the rules.
@Suite struct OriginModeTests {
    private func parse(_ bytes: [UInt8]) -> TLVInput {
        bytes.withUnsafeBytes { TLVInput(parsing: $0) }
    }

    private func record(_ type: UInt8, _ text: String) -> [UInt8] {
        let value = Array(text.utf8)
        return [type, UInt8(value.count >> 8), UInt8(value.count & 0xFF)] + value
    }

    /// Each kind of record lands where it belongs; unknown types are skipped, and the
    /// last record takes what is left when its length runs past the end.
    @Test func recordsAreSortedByType() {
        let input = parse(record(1, "a") + record(0x7F, "skipped") + record(2, "r1") + record(0x13, "peer3")
                          + record(3, "r2") + record(1, "b") + [2, 0xFF, 0xFF] + Array("cut".utf8))
        #expect(input.rpc == [Array("a".utf8), Array("b".utf8)])
        #expect(input.responses == [.init(bytes: Array("r1".utf8), closes: false),
                                    .init(bytes: Array("r2".utf8), closes: true),
                                    .init(bytes: Array("cut".utf8), closes: false)])
        #expect(input.peers == [3: Array("peer3".utf8)])
        #expect(input.clientBytes.bytes == Array("ab".utf8))
        #expect(input.clientBytes.stepEnds == [1, 2])
    }

    /// Fewer than three bytes cannot hold a record: nothing is read, nothing fails.
    @Test func aShortPayloadHoldsNoRecord() {
        #expect(parse([1, 0]) == TLVInput(rpc: [], responses: [], peers: [:]))
    }

    /// `ORIGIN` and `OPORT` become the origin's address and port in every record.
    @Test func placeholdersNameTheOrigin() {
        let input = parse(record(1, #"{"url":"http://ORIGIN/x","port":OPORT}"#) + record(2, "Location: http://ORIGIN/")
                          + record(0x10, "OPORTORIGIN")).substituting(port: 40123)
        #expect(input.rpc == [Array(#"{"url":"http://127.0.0.1:40123/x","port":40123}"#.utf8)])
        #expect(input.responses.map(\.bytes) == [Array("Location: http://127.0.0.1:40123/".utf8)])
        #expect(input.peers[0] == Array("40123127.0.0.1:40123".utf8))
    }

    /// The policy of an input with an origin admits 127.0.0.1 on the origin's port and
    /// nothing else: no other port, no other IPv4 address (loopback or not), no IPv6
    /// address, no name.
    @Test func thePolicyAdmitsTheOriginOnly() throws {
        let loop = try Loop()
        let origin = Origin(loop: loop)
        let policy = origin.egressPolicy()
        let port = origin.port
        origin.close()
        loop.run()
        #expect(loop.handleNames().isEmpty)
        try loop.close()
        #expect(policy.checkDestination(host: "127.0.0.1", port: port) == .allowed)
        let admitted = try #require(IPAddress.parseLiteral("127.0.0.1"))
        #expect(policy.checkAddress(admitted, port: port) == .allowed)
        for (host, p) in [("127.0.0.1", port == 1 ? 2 : 1), ("127.0.0.2", port), ("126.255.255.255", port),
                          ("128.0.0.0", port), ("0.0.0.0", port), ("255.255.255.255", port), ("93.184.216.34", port),
                          ("::1", port), ("::ffff:127.0.0.1", port), ("localhost", port), ("fuzz.invalid", port)] {
            #expect(policy.checkDestination(host: host, port: p) != .allowed, "\(host):\(p)")
            if let address = IPAddress.parseLiteral(host), host != "127.0.0.1" {
                #expect(policy.checkAddress(address, port: p) != .allowed, "connect to \(host):\(p)")
            }
        }
    }

    /// A request head's body framing, as the origin skips it.
    @Test func requestBodiesAreSkippedByTheirFraming() {
        func framing(_ head: String) -> (Int, Bool) {
            let r = Origin.body(of: ArraySlice(head.utf8))
            return (r.length, r.chunked)
        }
        #expect(framing("POST / HTTP/1.1\r\nContent-Length: 12\r\nHost: h") == (12, false))
        #expect(framing("POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked") == (0, true))
        #expect(framing("GET / HTTP/1.1\r\nContent-Length: -5") == (0, false))
        #expect(framing("GET / HTTP/1.1") == (0, false))
    }

    private let quiet = Pacing.LoopState(ready: false, timeoutMs: -1)

    /// Readiness (or something due) always gets a turn that does not wait; a short
    /// timer a turn that waits for it.
    @Test func readinessNeverMakesTheHarnessWait() {
        var pacing = Pacing()
        #expect(pacing.next(.init(ready: true, timeoutMs: 5000), waitingToSend: true, originHoldsOpen: true) == .runNoWait)
        #expect(pacing.next(.init(ready: false, timeoutMs: 0), waitingToSend: true, originHoldsOpen: true) == .runNoWait)
        #expect(pacing.next(.init(ready: false, timeoutMs: 5), waitingToSend: true, originHoldsOpen: true) == .runOnce)
    }

    /// Three quiet turns in a row: first the client sends on, then the origin lets go,
    /// then the server's own timers are waited for within the budget, then it is stopped.
    @Test func quietTurnsUnblockInOrder() {
        var pacing = Pacing()
        func afterQuiet(_ state: Pacing.LoopState, sending: Bool, holding: Bool) -> Pacing.Action {
            #expect(pacing.next(state, waitingToSend: sending, originHoldsOpen: holding) == .runNoWait)
            #expect(pacing.next(state, waitingToSend: sending, originHoldsOpen: holding) == .runNoWait)
            return pacing.next(state, waitingToSend: sending, originHoldsOpen: holding)
        }
        #expect(afterQuiet(quiet, sending: true, holding: true) == .send)
        #expect(afterQuiet(quiet, sending: false, holding: true) == .breakStall)
        // A ready turn in between starts the count again.
        #expect(pacing.next(quiet, waitingToSend: false, originHoldsOpen: true) == .runNoWait)
        #expect(pacing.next(.init(ready: true, timeoutMs: -1), waitingToSend: false, originHoldsOpen: true) == .runNoWait)
        #expect(afterQuiet(quiet, sending: false, holding: true) == .breakStall)
        let timer = Pacing.LoopState(ready: false, timeoutMs: 60)
        #expect(afterQuiet(timer, sending: false, holding: false) == .runOnce)
        #expect(afterQuiet(timer, sending: false, holding: false) == .stopServer)
        // Stopped once: from then on the harness waits for the stop to take effect.
        #expect(afterQuiet(timer, sending: false, holding: false) == .runOnce)
        // No timer at all: a wait without end, which libFuzzer's timeout reports.
        #expect(afterQuiet(quiet, sending: false, holding: false) == .runOnce)
    }
}
