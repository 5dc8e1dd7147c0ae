/// Finds how much of a byte run can be handed out as UTF-8 text without splitting a
/// character or losing a byte.
enum UTF8Cut {
    enum Outcome: Equatable {
        /// The first `length` bytes are valid UTF-8 (the rest is an incomplete character
        /// that more bytes may complete).
        case valid(Int)
        /// Not UTF-8 at this offset.
        case invalid(Int)
    }

    static func validPrefix(_ bytes: ArraySlice<UInt8>, allowIncompleteTail: Bool) -> Outcome {
        var i = bytes.startIndex + asciiPrefixLength(bytes)
        let end = bytes.endIndex
        while i < end {
            let b = bytes[i]
            let need: Int
            switch b {
            case 0x00...0x7F: i += 1; continue
            case 0xC2...0xDF: need = 1
            case 0xE0...0xEF: need = 2
            case 0xF0...0xF4: need = 3
            default: return .invalid(i - bytes.startIndex)
            }
            let available = end - i - 1
            if available < need {
                // A character cut by the end of what has arrived: fine if what is there
                // can still become one and more bytes may come.
                for k in stride(from: 1, through: available, by: 1) where !continuation(bytes, at: i + k, lead: b, index: k) {
                    return .invalid(i - bytes.startIndex)
                }
                return allowIncompleteTail ? .valid(i - bytes.startIndex) : .invalid(i - bytes.startIndex)
            }
            for k in 1...need where !continuation(bytes, at: i + k, lead: b, index: k) {
                return .invalid(i - bytes.startIndex)
            }
            i += need + 1
        }
        return .valid(bytes.count)
    }

    /// How many of the first bytes are ASCII, counted 32 and then eight at a time: a text
    /// body is mostly ASCII, and this is the whole check for one that is (every text
    /// body `fetch` returns).
    private static func asciiPrefixLength(_ bytes: ArraySlice<UInt8>) -> Int {
        bytes.withUnsafeBytes { raw in
            var n = 0
            while n + 32 <= raw.count {
                let words = raw.loadUnaligned(fromByteOffset: n, as: UInt64.self) | raw.loadUnaligned(fromByteOffset: n + 8, as: UInt64.self)
                    | raw.loadUnaligned(fromByteOffset: n + 16, as: UInt64.self) | raw.loadUnaligned(fromByteOffset: n + 24, as: UInt64.self)
                if words & 0x8080_8080_8080_8080 != 0 { break }
                n += 32
            }
            while n + 8 <= raw.count, raw.loadUnaligned(fromByteOffset: n, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 { n += 8 }
            return n
        }
    }

    /// Whether the byte at `at` is a valid continuation byte in position `index` after
    /// `lead` (the second byte has tighter ranges for E0, ED, F0 and F4).
    private static func continuation(_ bytes: ArraySlice<UInt8>, at: Int, lead: UInt8, index: Int) -> Bool {
        let c = bytes[at]
        if index == 1 {
            switch lead {
            case 0xE0: return (0xA0...0xBF).contains(c)
            case 0xED: return (0x80...0x9F).contains(c)
            case 0xF0: return (0x90...0xBF).contains(c)
            case 0xF4: return (0x80...0x8F).contains(c)
            default: break
            }
        }
        return (0x80...0xBF).contains(c)
    }
}
