import Foundation

/// The fixture's deterministic body: a 65521-byte block, repeated.
enum Pattern {
    static func block(seed: Int = 0) -> [UInt8] {
        (0..<65521).map { j in UInt8(truncatingIfNeeded: j * 131 + (j >> 8) * 7 + seed * 17) }
    }

    static func bytes(_ n: Int, seed: Int = 0) -> [UInt8] {
        let b = block(seed: seed)
        return (0..<n).map { b[$0 % b.count] }
    }

    /// Checks a received run against the pattern from `offset`, without building it:
    /// memcmp against the block, a segment at a time (fast even in debug builds).
    static func matches(_ received: ArraySlice<UInt8>, at offset: Int, block b: [UInt8]) -> Bool {
        received.withUnsafeBytes { r in
            b.withUnsafeBytes { blk in
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
