/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// 2014): a small generator that gives the same sequence for a seed on every platform,
/// so that a randomised test, or the fuzz harness's cutting of an input into chunks,
/// repeats exactly. Not for anything that must be unpredictable.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// The next value modulo `n` (which must be above 0): slightly biased towards small
    /// numbers, which does not matter here, and, unlike `Int.random(in:using:)`, one draw
    /// of a fixed mapping, so that the sequences that saved seeds and corpus inputs
    /// stand for never change.
    public mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
}
