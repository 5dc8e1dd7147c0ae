#if canImport(Glibc)
import Glibc
#endif

/// The fixture upstream's body pattern (`Tests/Fixtures/pattern.py`): for a seed, one
/// block of 65521 bytes (a prime, so that no buffer size lines up with it and a
/// misplaced buffer shows as a wrong byte), repeated; byte `i` of a body is
/// `block[i % 65521]`.
public enum FixturePattern {
    public static let blockSize = 65521

    /// The block for `seed`.
    public static func block(seed: Int = 0) -> [UInt8] {
        (0..<blockSize).map { j in UInt8(truncatingIfNeeded: j &* 131 &+ (j >> 8) &* 7 &+ seed &* 17) }
    }

    /// The first `count` bytes of the body for `seed`.
    public static func bytes(count: Int, seed: Int = 0) -> [UInt8] {
        let b = block(seed: seed)
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count { out += b[..<min(blockSize, count - out.count)] }
        return out
    }

    /// Whether `received` is the body from `offset` on, without building the body:
    /// memcmp against `block` (the caller's `block(seed:)`, made once), a segment at a
    /// time, which is fast even in debug builds.
    public static func matches(_ received: ArraySlice<UInt8>, at offset: Int, block: [UInt8]) -> Bool {
        received.withUnsafeBytes { r in
            block.withUnsafeBytes { blk in
                var done = 0
                var i = offset % blk.count
                while done < r.count {
                    let n = min(r.count - done, blk.count - i)
                    if memcmp(r.baseAddress! + done, blk.baseAddress! + i, n) != 0 { return false }
                    done += n
                    i = 0
                }
                return true
            }
        }
    }
}
