import Testing
@testable import HTTPEngine

/// Response headers arrive in order, names spelled as sent, repeats kept; large heads
/// survive whole.
@Suite struct ResponseHeadersTests {
    @Test func orderCaseAndRepeatsPreserved() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/many-headers")))
        let ours = (r.head?.headers ?? []).filter { $0.name.lowercased().hasPrefix("x-") }
        #expect(ours.map { "\($0.name): \($0.value)" } == [
            "X-Dup: 1", "X-Mixed-Case: Mixed", "X-Dup: 2", "x-lower-case: lower", "X-UPPER-CASE: UPPER", "x-MiXeD-sTyLe: odd",
        ])
        #expect(r.head?.value(of: "x-dup") == "1, 2")
        #expect(try h.finish() == [])
    }

    @Test func largeHeadersArriveWhole() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/large-headers?count=50&size=4000")))
        #expect(r.succeeded, "\(String(describing: r.failure))")
        let large = (r.head?.headers ?? []).filter { $0.name.hasPrefix("X-Large-") }
        #expect(large.count == 50)
        #expect(large.allSatisfy { $0.value == String(repeating: "a", count: 4000) })
        #expect(large.first?.name == "X-Large-0" && large.last?.name == "X-Large-49")
        #expect(try h.finish() == [])
    }

    /// A header line over libcurl's limit ends the transfer with a text that says so,
    /// not libcurl's "Out of memory".
    @Test func aHeaderLineOverTheLimitSaysSo() throws {
        let h = try Harness()
        let r = try h.fetch(TransferRequest(url: h.url("/large-headers?count=1&size=150000")))
        #expect(!r.succeeded)
        #expect(r.failure?.text.hasPrefix("Response header too large") == true, "\(String(describing: r.failure))")
        #expect(try h.finish() == [])
    }
}
