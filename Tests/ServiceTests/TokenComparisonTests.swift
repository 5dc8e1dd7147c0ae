import Testing
@testable import Service

/// Token digests are compared in time that does not depend on where they differ: a
/// comparison that stops at the first differing byte would tell a guesser, through the
/// time `auth` takes, how much of a digest it has right.
///
/// One 32-byte comparison cannot show the difference (nanoseconds either way), so the
/// same function compares 8 MiB inputs that differ in their first byte or in their last
/// one. A comparison that stops early is then thousands of times faster on the first
/// pair; a constant-time one spends the same time on both. The fastest of several runs
/// of each is compared, the two kinds interleaved, so a busy machine slows both alike.
@Suite struct TokenComparisonTests {
    @Test func timeDoesNotDependOnWhereTheInputsDiffer() {
        let size = 8 << 20
        let a = [UInt8](repeating: 0x5A, count: size)
        var differsFirst = a
        differsFirst[0] ^= 1
        var differsLast = a
        differsLast[size - 1] ^= 1

        let clock = ContinuousClock()
        var early = Duration.seconds(1000)
        var late = Duration.seconds(1000)
        for _ in 0..<7 {
            var equal = true
            early = min(early, clock.measure { equal = TokenDigest.equal(a, differsFirst) })
            #expect(!equal)
            late = min(late, clock.measure { equal = TokenDigest.equal(a, differsLast) })
            #expect(!equal)
        }
        #expect(TokenDigest.equal(a, a))
        // Equal work would give a ratio near 1; an early exit gives one in the thousands.
        #expect(early * 4 > late, "a difference in the first byte took \(early), in the last byte \(late)")
    }
}
