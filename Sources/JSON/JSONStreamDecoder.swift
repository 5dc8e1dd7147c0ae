#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the stream decoder found in the bytes fed to it, in stream order.
public enum JSONStreamEvent: Equatable, Sendable {
    /// One complete top-level value.
    case value(JSONValue)
    /// A top-level object whose members are all a JSON-RPC call's envelope members,
    /// each at most once, picked out without building the object (only with
    /// `pickCallEnvelopes`; every other value stays a `.value`).
    case call(JSONCallEnvelope)
    /// The input is not JSON. The decoder drops the value it was reading and skips the
    /// rest of the line, so the next line is read afresh (see `JSONStreamDecoder`).
    case error(JSONParseError)
    /// A single value (or the garbage skipped after an error) grew beyond
    /// `maxValueBytes`. The stream cannot be trusted to resynchronise, so the decoder is
    /// dead afterwards: it returns no more events and the connection should be closed.
    case tooLarge(limit: Int)
}

/// Reads a stream of JSON values separated by optional whitespace, as a connection's bytes
/// arrive, with yajl's callback parser underneath.
///
/// A value may be split anywhere across feeds and a feed may hold many values; the events
/// are the same however the stream is cut. Newline-delimited clients and hand-typed
/// `socat` sessions both work, because any whitespace (or none, as in `{}{}`) separates
/// values.
///
/// **Errors and resynchronisation.** After invalid input the decoder reports one `.error`,
/// drops the value it was building, discards input up to and including the next `\n`
/// (across feeds if need be) and starts a fresh yajl parser there (a yajl handle cannot
/// continue after an error). A newline-delimited client that sends one bad line therefore
/// gets exactly one error, and its next line parses normally. When the byte that made
/// yajl fail is itself the newline (`{"a": "x⏎` or `tru⏎`), that newline ends the bad line.
///
/// **Size limit.** A value's size runs from its first byte to its last (surrounding
/// whitespace is not counted). A value of more than `maxValueBytes` bytes ends the stream
/// with `.tooLarge` as soon as its first `maxValueBytes + 1` bytes have arrived (one feed
/// later if the feed ends inside a `\u` escape, which is held back), so memory never
/// grows with the message beyond the limit: yajl buffers at most that much of a token cut
/// by a feed, and the half-built value holds no more. The decoder finds where values start
/// and end without scanning every byte itself:
/// - It knows where a value starts because it skips the whitespace between values itself
///   (from the end of the previous value to the first other byte; usually one `\n`).
/// - It learns where a value ends from yajl: the completion callback reads
///   `yajl_get_bytes_consumed`, which yajl 2.1.0 advances token by token as it lexes.
/// - It feeds yajl one slice at a time, and a slice never extends more than
///   `maxValueBytes + 1` bytes past the start of the value open at its beginning. So that
///   value either completes inside the slice, where its exact size is checked, or is
///   still open at the end of the slice having shown `maxValueBytes + 1` bytes: too large.
///   Any later value that starts inside the same slice starts at least one byte later,
///   so at most `maxValueBytes` of its bytes are in the slice and it cannot show itself
///   too large there; if it is still open at the end, the next slice is measured from
///   its start.
///
/// With the default limit and socket-sized reads every feed is a single `yajl_parse` call;
/// only many small values under a tiny limit take many slices, each still one call.
///
/// **Long tokens.** A string or number that runs on over many feeds is not shown to yajl
/// feed by feed: yajl would lex it again from its start every time (quadratic CPU). Once
/// yajl has `holdTokensFrom` bytes of the open token, its new bytes wait in `held` until
/// it ends, or until they are twice as many as yajl has, or the stream ends
/// (`OpenTokenTracker` says why and how). Held bytes count toward the size limit like any
/// other: bytes that would put the value over it are fed at once, so `.tooLarge` comes at
/// the same feed, and yajl's copy and `held` together stay within the limit.
///
/// **Text.** Strings are checked as UTF-8 (ill-formed bytes are a parse error), and so
/// is a `\u` escape of a surrogate that is not part of a pair (`"\ud800"`): it is a
/// parse error at its first hex digit, never text changed to U+FFFD (see
/// `SurrogateEscapeCheck` for why, and how yajl is made to stop there). Nesting deeper
/// than 512 levels is a parse error.
///
/// The decoder belongs to one connection and one thread (the event loop); it is not
/// `Sendable`.
public final class JSONStreamDecoder {
    private var maxValueBytes: Int
    private let parser: YajlValueParser
    /// Absolute stream offset of the next byte not yet handled. Bytes held back by
    /// `SurrogateEscapeCheck` (in `carry`) come after it.
    private var streamOffset = 0
    private var carry: [UInt8] = []
    /// Absolute offsets at which yajl will stop on a marked unpaired surrogate escape
    /// (`SurrogateEscapeCheck.Result.stops`), not yet passed: a failure at one of them
    /// is reported with `SurrogateEscapeCheck.message`.
    private var surrogateStops: [Int] = []
    private var state = State.betweenValues
    /// The bytes of a long open token not shown to yajl yet (see "Long tokens" above);
    /// they come right after `streamOffset`, before `carry`.
    private var held: [UInt8] = []
    /// Where the tokens of a value open at the end of a feed stand.
    private var tokens = OpenTokenTracker()
    /// How many bytes of an open token yajl must have before its next bytes are held.
    private let holdTokensFrom: Int
    /// The bytes yajl has lexed: those handed to it, plus each time the open token it
    /// kept from the call before, which it lexes again. For tests of the holding back.
    private(set) var bytesLexed = 0

    /// Where the decoder is in the stream.
    private enum State {
        /// No value has begun since the last one ended; yajl holds nothing. Next: a
        /// non-whitespace byte moves to `inValue`.
        case betweenValues
        /// A value began at this absolute offset and has not ended. Next: it completes
        /// (`betweenValues`, or `inValue` for one begun right after it), yajl fails
        /// (`discarding`), or it grows too large (`dead`).
        case inValue(start: Int)
        /// After an error: skipping to the next newline, having skipped `skipped` bytes.
        /// Next: the newline (`betweenValues`), or too many bytes (`dead`).
        case discarding(skipped: Int)
        /// `.tooLarge` was reported; nothing more is read.
        case dead
    }

    /// Makes a decoder for one stream. `maxValueBytes` (at least 1) bounds the size of a
    /// single value and of the garbage skipped after an error; the default, 16 MiB, is the
    /// server's default message limit. With `pickCallEnvelopes`, a top-level object of
    /// envelope members only comes as a `.call` (see `JSONCallEnvelope`).
    public convenience init(maxValueBytes: Int = 16 << 20, pickCallEnvelopes: Bool = false) {
        self.init(maxValueBytes: maxValueBytes, pickCallEnvelopes: pickCallEnvelopes, holdTokensFrom: 4096)
    }

    /// Tests hold tokens back from a smaller length, to cut short messages every way.
    init(maxValueBytes: Int, pickCallEnvelopes: Bool, holdTokensFrom: Int) {
        precondition(maxValueBytes > 0, "maxValueBytes must be positive")
        self.holdTokensFrom = holdTokensFrom
        parser = YajlValueParser(allowMultipleValues: true, pickCallEnvelopes: pickCallEnvelopes)
        // One less than Int.max keeps `maxValueBytes + 1` from overflowing.
        self.maxValueBytes = min(maxValueBytes, Int.max - 1)
    }

    /// Lets values grow to `bytes` from the next feed on (a connection that has
    /// authenticated). Never lowers the limit: a value open now has at most the old
    /// limit's bytes, so it stays within the new one, and the slicing above holds.
    public func raiseLimit(to bytes: Int) {
        maxValueBytes = max(maxValueBytes, min(bytes, Int.max - 1))
    }

    /// Reads the next bytes of the stream and returns what they completed, in order.
    /// The bytes are not kept after the call returns, except for at most 11 bytes of a
    /// `\u` escape cut by the end of the chunk and those of a long open token (held back,
    /// fewer than twice as many as yajl has of it). A dead decoder returns nothing.
    public func feed(_ bytes: UnsafeRawBufferPointer) -> [JSONStreamEvent] {
        var events: [JSONStreamEvent] = []
        if case .dead = state { return events }
        if carry.isEmpty {
            feedChecked(bytes, &events)
        } else {
            // Rare: the previous chunk ended inside a `\u` escape.
            var combined = carry
            carry = []
            combined.append(contentsOf: bytes)
            combined.withUnsafeBytes { feedChecked($0, &events) }
        }
        if !surrogateStops.isEmpty { surrogateStops.removeAll { $0 < streamOffset } }
        return events
    }

    /// Reads the next bytes of the stream; a convenience for tests and small callers.
    public func feed(_ bytes: [UInt8]) -> [JSONStreamEvent] {
        bytes.withUnsafeBytes { feed($0) }
    }

    /// Ends the stream. yajl cannot tell that a bare number such as `42` is complete
    /// until it sees the byte after it, so a pending number is emitted here; a value left
    /// open (`{"a":1`) is an `.error` at the stream's last offset. Afterwards the decoder
    /// starts a new stream, with offsets counted from 0 again.
    public func finish() -> [JSONStreamEvent] {
        var events: [JSONStreamEvent] = []
        if case .dead = state { return events }
        if !held.isEmpty {
            let rest = held
            held = []
            rest.withUnsafeBytes { process($0, &events) }
        }
        if !carry.isEmpty {
            let tail = carry
            carry = []
            tail.withUnsafeBytes { raw in
                let check = SurrogateEscapeCheck.check(raw, final: true)
                if let marked = check.marked {
                    surrogateStops += check.stops.map { streamOffset + $0 }
                    marked.withUnsafeBytes { process($0, &events) }
                } else {
                    process(raw, &events)
                }
            }
        }
        if case .inValue = state {
            let outcome = parser.complete()
            let completedAny = !parser.completed.isEmpty
            for done in parser.completed { events.append(done.event) }
            parser.completed.removeAll(keepingCapacity: true)
            if case .failed(_, let message) = outcome {
                events.append(.error(JSONParseError(offset: streamOffset, message: message)))
            } else if !completedAny {
                // yajl with multiple values forgets a top-level token left open after an
                // earlier value (`1 "abc`): it is back in its "got a value" state and calls
                // the stream complete. A value had begun here, so the stream ended early.
                events.append(.error(JSONParseError(offset: streamOffset, message: "parse error: premature EOF")))
            }
        }
        if case .dead = state { return events }
        parser.reset()
        streamOffset = 0
        surrogateStops = []
        state = .betweenValues
        tokens.restart()
        return events
    }

    /// Marks unpaired surrogate escapes, processes what is settled and keeps the rest in
    /// `carry`. `bytes` start after the held bytes of a long token (`held`).
    private func feedChecked(_ bytes: UnsafeRawBufferPointer, _ events: inout [JSONStreamEvent]) {
        let check = SurrogateEscapeCheck.check(bytes, final: false)
        let usable = bytes.count - check.heldBack
        if let marked = check.marked {
            let origin = streamOffset + held.count
            surrogateStops += check.stops.map { origin + $0 }
            marked.withUnsafeBytes { feedTokens(UnsafeRawBufferPointer(rebasing: $0[..<usable]), &events) }
        } else {
            feedTokens(UnsafeRawBufferPointer(rebasing: bytes[..<usable]), &events)
        }
        if check.heldBack > 0, !isDead { carry = Array(bytes[usable...]) }
    }

    /// Shows yajl `bytes` (which come right after `held`), unless they continue a long open
    /// token: then they are held back until that token ends or has tripled. Afterwards
    /// the tracker stands at the end of what yajl has, when a value is open there.
    private func feedTokens(_ bytes: UnsafeRawBufferPointer, _ events: inout [JSONStreamEvent]) {
        // How much of the token open at the end of the last feed yajl keeps (and will lex
        // again); the tracker stands there whenever a value was open.
        var kept = 0
        if case .inValue = state, tokens.inToken { kept = streamOffset - tokens.tokenStart }
        var resume = 0  // where the tracker goes on after yajl has had the bytes
        if kept >= holdTokensFrom, case .inValue(let start) = state {
            if let end = tokens.tokenEnd(in: bytes, from: 0) {
                resume = end
            } else {
                resume = bytes.count
                let pending = held.count + bytes.count
                // yajl's copy at least triples with each feed (`OpenTokenTracker`).
                if pending < 2 * kept && streamOffset + pending - start <= maxValueBytes {
                    held.append(contentsOf: bytes)
                    return
                }
            }
        }
        if held.isEmpty {
            processTracking(bytes, kept: kept, resume: resume, &events)
        } else {
            held.append(contentsOf: bytes)
            let all = held
            held = []
            all.withUnsafeBytes { processTracking($0, kept: kept, resume: all.count - bytes.count + resume, &events) }
        }
    }

    /// `process`, then the tracker follows a value left open from `resume` (it stands
    /// there already) or from the value's first byte, when that is in `buffer`.
    private func processTracking(_ buffer: UnsafeRawBufferPointer, kept: Int, resume: Int,
                                 _ events: inout [JSONStreamEvent]) {
        let origin = streamOffset
        bytesLexed += kept + buffer.count
        process(buffer, &events)
        guard case .inValue(let start) = state else { return }
        if start >= origin {
            tokens.restart()
            tokens.scan(buffer, from: start - origin, origin: origin)
        } else {
            tokens.scan(buffer, from: resume, origin: origin)
        }
    }

    private var isDead: Bool {
        if case .dead = state { return true } else { return false }
    }

    /// Runs the state machine over one buffer whose first byte is at `streamOffset`.
    private func process(_ buffer: UnsafeRawBufferPointer, _ events: inout [JSONStreamEvent]) {
        guard let base = buffer.baseAddress else { return }
        let n = buffer.count
        let origin = streamOffset  // absolute offset of buffer[0]
        defer { if !isDead { streamOffset = origin + n } }
        var p = 0
        while p < n {
            switch state {
            case .dead:
                return

            case .discarding(let skipped):
                if let hit = memchr(base + p, 0x0A, n - p) {
                    let newline = base.distance(to: UnsafeRawPointer(hit))
                    if skipped + (newline - p) > maxValueBytes { return die(&events) }
                    state = .betweenValues
                    p = newline + 1
                } else {
                    if skipped + (n - p) > maxValueBytes { return die(&events) }
                    state = .discarding(skipped: skipped + (n - p))
                    p = n
                }

            case .betweenValues:
                guard let first = Self.firstNonWhitespace(buffer, from: p) else { return }
                state = .inValue(start: origin + first)
                p = first

            case .inValue(let start):
                // Bytes of this value fed so far: at most maxValueBytes, or it would
                // already have been reported. The slice shows yajl one byte more at most.
                let fed = origin + p - start
                let end = p + min(n - p, maxValueBytes + 1 - fed)
                let outcome = parser.parse(base + p, count: end - p)
                var lastEnd: Int?
                for (index, done) in parser.completed.enumerated() {
                    let valueEnd = p + done.end
                    if index == 0 && origin + valueEnd - start > maxValueBytes { return die(&events) }
                    events.append(done.event)
                    lastEnd = valueEnd
                }
                parser.completed.removeAll(keepingCapacity: true)
                switch outcome {
                case .ok:
                    if let lastEnd {
                        // Only whitespace separates the last value from the next one.
                        if let first = Self.firstNonWhitespace(buffer, from: lastEnd, to: end) {
                            state = .inValue(start: origin + first)
                        } else {
                            state = .betweenValues
                        }
                    }
                    if case .inValue(let open) = state, origin + end - open > maxValueBytes {
                        return die(&events)
                    }
                    p = end
                case .failed(let consumed, let message):
                    let at = p + consumed
                    let why = surrogateStops.contains(origin + at) ? SurrogateEscapeCheck.message : message
                    events.append(.error(JSONParseError(offset: origin + at, message: why)))
                    parser.reset()
                    if consumed > 0 && buffer[at - 1] == 0x0A {
                        state = .betweenValues  // the byte yajl failed on was the newline
                    } else {
                        state = .discarding(skipped: 0)
                    }
                    p = at
                }
            }
        }
    }

    private func die(_ events: inout [JSONStreamEvent]) {
        events.append(.tooLarge(limit: maxValueBytes))
        state = .dead
        parser.reset()
        carry = []
        held = []
        surrogateStops = []
    }

    /// The first byte at or after `from` (before `to`) that yajl does not treat as
    /// whitespace. yajl's set is wider than RFC 8259's: it also skips `\v` and `\f`, and
    /// this must agree with it to find where values start.
    private static func firstNonWhitespace(_ b: UnsafeRawBufferPointer, from: Int, to: Int? = nil) -> Int? {
        let limit = to ?? b.count
        var i = from
        while i < limit {
            switch b[i] {
            case 0x20, 0x0A, 0x0D, 0x09, 0x0B, 0x0C: i += 1
            default: return i
            }
        }
        return nil
    }
}
