#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
/// Only a value still open at the end of a feed is followed (a message that arrives in
/// one read never is), from its first byte, and then every byte of it once. Following
/// costs little: strings are found with `memchr` for their quotes (a quote ends a string
/// unless an odd run of backslashes comes right before it; no run is cut between feeds,
/// since `SurrogateEscapeCheck` holds a trailing odd run back), and a number can only
/// be open at the very end, so the run of number bytes there is looked at backwards.
/// This is exact for input yajl accepts (outside strings yajl accepts no backslash), and
/// a token is held back only after yajl has taken `JSONStreamDecoder.holdTokensFrom`
/// bytes of it without an error; should the two ever disagree, held bytes are only
/// delayed (until the token has tripled), never lost.
struct OpenTokenTracker {
    /// Whether the bytes followed so far end inside a string.
    private var inString = false
    /// Whether they end inside a number.
    private var inNumber = false
    /// The absolute stream offset of the open token's first byte (inside a token only).
    private(set) var tokenStart = 0

    /// Whether the bytes followed so far end inside a string or number.
    var inToken: Bool { inString || inNumber }

    /// Forgets the position: the next scan starts at a value's first byte.
    mutating func restart() {
        inString = false
        inNumber = false
    }

    /// Follows `bytes[from...]`, whose byte 0 is at absolute offset `origin`.
    mutating func scan(_ bytes: UnsafeRawBufferPointer, from: Int, origin: Int) {
        guard let base = bytes.baseAddress else { return }
        var i = from
        if inNumber {
            guard let end = numberEnd(bytes, from: i) else { return }
            i = end
        }
        while true {
            if inString {
                guard let close = closingQuote(bytes, from: i) else { return }
                inString = false
                i = close + 1
            } else if i < bytes.count, let hit = memchr(base + i, 0x22, bytes.count - i) {
                let open = base.distance(to: UnsafeRawPointer(hit))
                inString = true
                tokenStart = origin + open
                i = open + 1
            } else {
                // Outside strings to the end: only a number at the very end is open.
                var start = bytes.count
                while start > i && Self.isNumberByte(bytes[start - 1]) { start -= 1 }
                // `true` ends in `e`: a number begins with `-` or a digit.
                while start < bytes.count && !Self.beginsNumber(bytes[start]) { start += 1 }
                if start < bytes.count {
                    inNumber = true
                    tokenStart = origin + start
                }
                return
            }
        }
    }

    /// Follows the open token through `bytes[from...]`: the index just after its last
    /// byte when it ends there, else nil. A raw newline ends a string too: yajl rejects
    /// it, and a client that sent the line waits for the error. (Another control byte in
    /// a held string is reported when the string ends, triples, or the stream ends.)
    mutating func tokenEnd(in bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard let base = bytes.baseAddress, from < bytes.count else { return nil }
        if inNumber { return numberEnd(bytes, from: from) }
        guard inString else { return from }
        let newline = memchr(base + from, 0x0A, bytes.count - from).map { base.distance(to: UnsafeRawPointer($0)) }
        let scanTo = newline ?? bytes.count
        if let close = closingQuote(UnsafeRawBufferPointer(rebasing: bytes[..<scanTo]), from: from) {
            inString = false
            return close + 1
        }
        if let newline {
            inString = false
            return newline
        }
        return nil
    }

    /// The index of the quote that closes the open string, at or after `from`; nil when
    /// the string goes on to the end of `bytes`.
    private func closingQuote(_ bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        let n = bytes.count
        var i = from
        while i < n, let hit = memchr(base + i, 0x22, n - i) {
            let quote = base.distance(to: UnsafeRawPointer(hit))
            // The run of backslashes before it stops at the string's opening quote at the
            // latest, or at the start of the feed (which no escape straddles).
            var r = quote
            while r > 0 && bytes[r - 1] == UInt8(ascii: "\\") { r -= 1 }
            if (quote - r) % 2 == 0 { return quote }
            i = quote + 1
        }
        return nil
    }

    /// The index of the first byte at or after `from` that is not part of the open
    /// number, or nil when the number goes on to the end.
    private mutating func numberEnd(_ bytes: UnsafeRawBufferPointer, from: Int) -> Int? {
        var i = from
        while i < bytes.count && Self.isNumberByte(bytes[i]) { i += 1 }
        if i == bytes.count { return nil }
        inNumber = false
        return i
    }

    private static func isNumberByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
             UInt8(ascii: "e"), UInt8(ascii: "E"):
            return true
        default:
            return false
        }
    }

    private static func beginsNumber(_ c: UInt8) -> Bool {
        c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
    }
}
