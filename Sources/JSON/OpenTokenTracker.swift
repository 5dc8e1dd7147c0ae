/// Follows the JSON tokens of the bytes a `JSONStreamDecoder` has shown yajl, so that it
/// knows whether they end inside a string or number, and where that token began.
///
/// Why: yajl keeps a token cut by the end of a `yajl_parse` input in its lexer buffer and,
/// at every later call, lexes that buffer again from the token's first byte (`yajl_lex.c`
/// rewinds `bufOff` to 0 each time). One long string arriving in many socket reads was
/// therefore lexed once per read: a 15 MB string in 64 KiB reads cost a second of CPU,
/// and each read's re-lex ran inside one event-loop turn. With the tracker the decoder
/// holds a long open token's new bytes back (`JSONStreamDecoder.held`) and feeds them
/// when the token ends, or when they are twice as many as yajl already has of it. yajl's
/// copy then at least triples with each feed, so the copies it lexes again add up to at
/// most 1.5 times the token, and it lexes every byte of it at most 2.5 times in all
/// (linear), whatever the reads. (Doubling would allow 3 times; holding more would keep
/// more of the message outside yajl, which is bounded by the size limit either way.)
///
/// Only a value still open at the end of a feed is scanned (a message that arrives in
/// one read never is), from its first byte, and then every byte of it once. The scan is
/// exact for input yajl accepts, and a token is held back only after yajl has taken
/// `JSONStreamDecoder.holdTokensFrom` bytes of it without an error; should the two ever
/// disagree, held bytes are only delayed (until the token has tripled), never lost.
struct OpenTokenTracker {
    private enum Position {
        /// Between tokens: whitespace, punctuation, or a literal (at most 5 bytes).
        case between
        case string
        /// Just after a backslash in a string.
        case escape
        case number
    }

    private var position = Position.between
    /// The absolute stream offset of the open token's first byte (inside a token only).
    private(set) var tokenStart = 0

    /// Whether the bytes scanned so far end inside a string or number.
    var inToken: Bool { position != .between }

    /// Forgets the position: the next scan starts at a value's first byte.
    mutating func restart() {
        position = .between
    }

    /// Follows `bytes[from...]`, whose byte 0 is at absolute offset `origin`.
    mutating func scan(_ bytes: UnsafeRawBufferPointer, from: Int, origin: Int) {
        var i = from
        while i < bytes.count {
            if position != .between {
                guard let end = tokenEnd(in: bytes, from: i) else { return }
                i = end
                continue
            }
            let c = bytes[i]
            if c == UInt8(ascii: "\"") {
                position = .string
                tokenStart = origin + i
            } else if c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) {
                position = .number
                tokenStart = origin + i
            }
            i += 1
        }
    }

    /// Follows the open token through `bytes[from...]`: the index just after its last
    /// byte when it ends there, else nil. A control byte ends a string too (yajl rejects
    /// it, and the decoder should show it to yajl at once).
    mutating func tokenEnd(in bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        var i = from
        let n = bytes.count
        while i < n {
            let c = bytes[i]
            switch position {
            case .string:
                // The common run: plain string bytes.
                if c == UInt8(ascii: "\"") {
                    position = .between
                    return i + 1
                }
                if c == UInt8(ascii: "\\") {
                    position = .escape
                } else if c < 0x20 {
                    position = .between
                    return i
                }
            case .escape:
                if c < 0x20 {
                    position = .between
                    return i
                }
                position = .string
            case .number:
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                     UInt8(ascii: "e"), UInt8(ascii: "E"):
                    break
                default:
                    position = .between
                    return i
                }
            case .between:
                return i
            }
            i += 1
        }
        return nil
    }
}
