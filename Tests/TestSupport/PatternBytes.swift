/// Bytes `0, 1, …, 250, 0, 1, …` — a pattern whose period (a prime) does not line up
/// with any buffer size, so a dropped, repeated or reordered chunk shows.
public func patternBytes(_ count: Int) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { out in
        for i in 0..<min(251, count) { out[i] = UInt8(i) }
        var filled = min(251, count)
        while filled < count {
            let chunk = min(filled, count - filled) / 251 * 251
            let take = chunk > 0 ? chunk : count - filled
            (out.baseAddress! + filled).copyMemory(from: out.baseAddress!, byteCount: take)
            filled += take
        }
    }
    return bytes
}
