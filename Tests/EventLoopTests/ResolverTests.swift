import EventLoop
import Testing
import TestSupport

/// Name lookups on the thread pool, answered on the loop as literals.
@Suite struct ResolverTests {
    @Test func localhostResolvesToLoopbackLiterals() throws {
        let harness = try LoopHarness()
        var answer: Result<[String], UVError>?
        Resolver.resolve(loop: harness.loop, host: "localhost") { result in
            answer = result
            harness.finish()
        }
        try harness.run()
        let addresses = try #require(try answer?.get())
        #expect(!addresses.isEmpty)
        #expect(addresses.allSatisfy { $0 == "127.0.0.1" || $0 == "::1" }, "\(addresses)")
        #expect(Set(addresses).count == addresses.count, "each address once")
    }

    @Test func aLiteralIsItsOwnAnswer() throws {
        let harness = try LoopHarness()
        var answer: [String]?
        Resolver.resolve(loop: harness.loop, host: "::1") { result in
            answer = try? result.get()
            harness.finish()
        }
        try harness.run()
        #expect(answer == ["::1"])
    }

    @Test func aNameThatDoesNotExistFails() throws {
        let harness = try LoopHarness()
        var failed = false
        Resolver.resolve(loop: harness.loop, host: "nothing.invalid") { result in
            if case .failure = result { failed = true }
            harness.finish()
        }
        try harness.run()
        #expect(failed)
    }

    @Test func aCancelledLookupNeverAnswers() throws {
        let harness = try LoopHarness()
        var answered = false
        let lookup = Resolver.resolve(loop: harness.loop, host: "localhost") { _ in answered = true }
        lookup.cancel()
        // A second lookup, started after, answers; the loop runs until then and longer.
        Resolver.resolve(loop: harness.loop, host: "localhost") { _ in
            let t = harness.track(try! EventLoop.Timer(loop: harness.loop))
            t.start(timeout: 50) { harness.finish() }
        }
        try harness.run()
        #expect(!answered)
    }
}
