import CShims
import CYajl

/// One yajl parser handle and the `JSONValue`s its callbacks build.
///
/// yajl reports tokens through C callbacks; this object is their context. It keeps a
/// stack of the containers being filled (the depth is the stack's height), and every time
/// a value completes at depth 0 it records the value together with how far into the
/// current `parse` call's input yajl had read at that moment. `JSONStreamDecoder` uses
/// those end offsets for its size limit; `JSON.decode` just takes the one value.
///
/// yajl cannot continue after an error, so `reset()` frees the handle and the next
/// `parse` makes a new one. The partly built value is dropped with it.
final class YajlValueParser {
    /// How deeply arrays and objects may nest. yajl's own parser has no limit, but a
    /// value nested a million deep would overflow the Swift stack when it is compared,
    /// encoded or even destroyed, so this layer refuses it as a parse error. 512 is far
    /// beyond any protocol message and what swift-foundation's JSONDecoder allows too.
    static let maxDepth = 512

    /// The outcome of one `parse` or `complete` call.
    enum Outcome {
        case ok
        /// yajl or a callback rejected the input; `consumed` counts bytes of the input
        /// handed to this call (0 for `complete`).
        case failed(consumed: Int, message: String)
    }

    /// Values finished at depth 0 during the current call, each with the number of bytes
    /// of that call's input yajl had consumed when the value ended (for a number, yajl
    /// has read the delimiter after it and put it back, so the end excludes it). The
    /// caller takes them out after every call.
    var completed: [(event: JSONStreamEvent, end: Int)] = []

    private let allowMultipleValues: Bool
    /// Whether a top-level object of call envelope members only completes as a `.call`.
    private let pickCallEnvelopes: Bool
    /// While the top-level object's members have all been envelope members, each named
    /// once, they go into `picked` instead of its frame. At the first other member (or a
    /// second of the same name) they are moved into the frame in the order they came
    /// (`unpick`), and the object is built as any other.
    private var picking = false
    private var picked = Picked()
    /// The order `picked`'s slots were filled in (2 bits each, the first lowest) and how
    /// many; the slot the next member's value goes to.
    private var pickedOrder: UInt8 = 0
    private var pickedCount = 0
    private var pickSlot = 0
    private var handle: yajl_handle?
    private var stack: [Frame] = []
    /// Set by a callback that cancels the parse, with the consumed count at that point.
    private var cancellation: (consumed: Int, message: String)?

    /// Makes a parser. With `allowMultipleValues` yajl reads whitespace-separated values
    /// one after another (the stream decoder); without it a second value is yajl's
    /// "trailing garbage" error (`JSON.decode`).
    init(allowMultipleValues: Bool, pickCallEnvelopes: Bool = false) {
        self.allowMultipleValues = allowMultipleValues
        self.pickCallEnvelopes = pickCallEnvelopes
    }

    deinit {
        if let handle { yajl_free(handle) }
    }

    /// Hands `count` bytes at `bytes` to yajl, which calls back into this object for
    /// every token, and reports whether the input is still valid JSON.
    func parse(_ bytes: UnsafeRawPointer, count: Int) -> Outcome {
        let h = liveHandle()
        let status = yajl_parse(h, bytes.assumingMemoryBound(to: UInt8.self), count)
        return outcome(of: status, handle: h, consumed: Int(yajl_get_bytes_consumed(h)))
    }

    /// Tells yajl that the input has ended: it emits a pending bare number (it waits for a
    /// delimiter otherwise) or reports the value that was left open ("premature EOF").
    func complete() -> Outcome {
        let h = liveHandle()
        return outcome(of: yajl_complete_parse(h), handle: h, consumed: 0)
    }

    /// Drops the handle and any half-built value, so the next `parse` starts on fresh
    /// input. Needed after every failure, because a yajl handle stays in its error state.
    func reset() {
        if let handle { yajl_free(handle) }
        handle = nil
        stack.removeAll()
        cancellation = nil
        picking = false
        picked = Picked()
    }

    private func outcome(of status: yajl_status, handle h: yajl_handle, consumed: Int) -> Outcome {
        switch status {
        case yajl_status_ok:
            return .ok
        case yajl_status_client_canceled:
            // Only our own callbacks cancel, and each records why before it does.
            let why = cancellation ?? (consumed, "parse error: cancelled")
            return .failed(consumed: why.consumed, message: why.message)
        default:
            return .failed(consumed: consumed, message: Self.errorMessage(h))
        }
    }

    /// yajl's non-verbose message without its trailing newline. yajl allocates it; a
    /// failed allocation leaves a generic message rather than a crash.
    private static func errorMessage(_ h: yajl_handle) -> String {
        guard let text = yajl_get_error(h, 0, nil, 0) else { return "parse error" }
        defer { yajl_free_error(h, text) }
        var message = String(cString: text)
        while message.last == "\n" { message.removeLast() }
        return message
    }

    private func liveHandle() -> yajl_handle {
        if let handle { return handle }
        // Unretained on purpose: this object owns the handle and frees it in `deinit` or
        // `reset`, so the handle (and with it every callback) never outlives the context.
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let h = yajl_alloc(yajlValueCallbacks, nil, context) else {
            preconditionFailure("yajl_alloc returned NULL: out of memory")
        }
        // Comments stay off (yajl's default) and UTF-8 validation stays on (it is on
        // unless `yajl_dont_validate_strings` is set).
        if allowMultipleValues { _ = xh_yajl_config(h, yajl_allow_multiple_values, 1) }
        handle = h
        return h
    }

    // MARK: Callbacks (called by yajl through `yajlValueCallbacks`)

    /// Runs a callback's work on the parser its context points at. The parser is used as
    /// a guaranteed reference: it is alive for the whole `yajl_parse` that calls back (its
    /// method is the caller), so each token skips a retain and a release of it (some 450
    /// instructions of a JSON-RPC call's decoding).
    fileprivate static func with(_ context: UnsafeMutableRawPointer?, _ body: (YajlValueParser) -> Int32) -> Int32 {
        // The context is always the pointer given to `yajl_alloc` above, never NULL.
        Unmanaged<YajlValueParser>.fromOpaque(context.unsafelyUnwrapped)._withUnsafeGuaranteedRef(body)
    }

    /// Adds a finished value to the open container, or records it as complete when no
    /// container is open. Always continues the parse.
    fileprivate func add(_ value: JSONValue) -> Int32 {
        if stack.isEmpty {
            return complete(.value(value))
        } else if picking && stack.count == 1 {
            picked[slot: pickSlot] = value
            pickedOrder |= UInt8(pickSlot) << (2 * pickedCount)
            pickedCount += 1
        } else {
            stack[stack.count - 1].add(value)
        }
        return 1
    }

    /// Records a top-level value as complete. Always continues the parse.
    private func complete(_ event: JSONStreamEvent) -> Int32 {
        // `bytesConsumed` is the lexer's position, which yajl 2.1.0 advances token by
        // token during the parse; read here it is the end of the value just finished.
        // The split-at-every-byte and size-limit tests pin this behaviour.
        completed.append((event, handle.map { Int(yajl_get_bytes_consumed($0)) } ?? 0))
        return 1
    }

    /// Moves the members picked so far into the top-level object's frame, in the order
    /// they came, and builds that object as any other from here on.
    private func unpick() {
        picking = false
        for i in 0..<pickedCount {
            let slot = Int(pickedOrder >> (2 * i) & 3)
            stack[0].key = JSONCallEnvelope.keys[slot]
            stack[0].add(picked[slot: slot].unsafelyUnwrapped)
        }
        picked = Picked()
    }

    fileprivate func open(object: Bool) -> Int32 {
        guard stack.count < Self.maxDepth else {
            return cancel("parse error: nesting deeper than \(Self.maxDepth) levels")
        }
        if stack.isEmpty {
            picking = object && pickCallEnvelopes
            pickedOrder = 0
            pickedCount = 0
        }
        stack.append(Frame(isObject: object))
        return 1
    }

    fileprivate func closeArray() -> Int32 {
        // yajl only reports a close that matches an open, so the stack is not empty.
        let frame = stack.removeLast()
        return add(.array(frame.elements))
    }

    fileprivate func closeObject() -> Int32 {
        let frame = stack.removeLast()
        if picking && stack.isEmpty {
            picking = false
            var members = Picked()
            swap(&members, &picked)
            return complete(.call(JSONCallEnvelope(jsonrpc: members.jsonrpc, id: members.id, method: members.method,
                                                   params: members.params)))
        }
        return add(.object(Self.object(from: frame.members)))
    }

    fileprivate func key(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
        if picking && stack.count == 1 {
            if let slot = Self.envelopeSlot(bytes, count), picked[slot: slot] == nil {
                pickSlot = slot
                return 1
            }
            unpick()
        }
        guard let key = Self.string(bytes, count) else { return cancelInvalidUTF8() }
        stack[stack.count - 1].key = key
        return 1
    }

    fileprivate func string(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
        guard let s = Self.string(bytes, count) else { return cancelInvalidUTF8() }
        return add(.string(s))
    }

    /// yajl hands numbers over as raw text (the `yajl_number` callback); an integer
    /// literal stays exact (in 64 bits, or as its digits when it does not fit), anything
    /// else becomes a double the way `strtod` would read it (so `1e999` is infinity, as
    /// `strtod` gives `HUGE_VAL`).
    fileprivate func number(_ bytes: UnsafePointer<CChar>?, _ count: Int) -> Int32 {
        let raw = UnsafeRawBufferPointer(start: bytes, count: count)
        switch Self.int64(raw) {
        case .fits(let i): return add(.int(i))
        case .tooLarge: return add(.bigInteger(String(decoding: raw, as: UTF8.self)))
        case .notInteger: break
        }
        guard let d = Double(String(decoding: raw, as: UTF8.self)) else {
            // yajl has checked the grammar already, so this is not expected.
            return cancel("lexical error: malformed number.")
        }
        return add(.double(d))
    }

    private func cancelInvalidUTF8() -> Int32 {
        cancel("lexical error: invalid bytes in UTF8 string.")
    }

    private func cancel(_ message: String) -> Int32 {
        cancellation = (handle.map { Int(yajl_get_bytes_consumed($0)) } ?? 0, message)
        return 0
    }

    // MARK: Value helpers

    /// A container being filled. One struct for both kinds keeps the stack a plain array
    /// of one type; an unused empty array costs nothing.
    private struct Frame {
        let isObject: Bool
        var elements: [JSONValue] = []
        var members: [(key: String, value: JSONValue)] = []
        var key = ""

        init(isObject: Bool) { self.isObject = isObject }

        mutating func add(_ value: JSONValue) {
            if isObject {
                if members.isEmpty { members.reserveCapacity(Self.typicalCount) }
                members.append((key, value))
            } else {
                if elements.isEmpty { elements.reserveCapacity(Self.typicalCount) }
                elements.append(value)
            }
        }

        /// Room made at a container's first member: a JSON-RPC call and its parameters
        /// have a handful, which then cost one allocation instead of a regrowth at the
        /// 1st, 2nd, 3rd and 5th (a larger container grows from here as usual).
        static let typicalCount = 8
    }

    /// The words every JSON-RPC message is made of, and the parameter every object call
    /// names. A key or string among them (most of a call's envelope) is the ready
    /// `String`, found by comparing one integer, instead of a new one made and checked.
    private static let commonWords = ["jsonrpc", "2.0", "method", "params", "id", "result", "error", "request"]
    private static let commonPacked: [UInt64] = commonWords.map { word in
        // Each fits: none is longer than 7 bytes.
        Array(word.utf8).withUnsafeBufferPointer { packed($0.baseAddress.unsafelyUnwrapped, $0.count)! }
    }

    /// Up to 7 bytes and their count in one integer (the count in the top byte, so that
    /// `id` and `id\u0000` differ); nil for longer text.
    private static func packed(_ bytes: UnsafePointer<UInt8>, _ count: Int) -> UInt64? {
        guard count <= 7 else { return nil }
        // One copy of the bytes into the integer's memory (byte i lands at bits 8i
        // once read as little-endian) instead of a shift per byte.
        var packed: UInt64 = 0
        withUnsafeMutableBytes(of: &packed) { $0.baseAddress.unsafelyUnwrapped.copyMemory(from: bytes, byteCount: count) }
        return UInt64(littleEndian: packed) | UInt64(count) << 56
    }

    /// The slot of the envelope member these bytes name (`JSONCallEnvelope.keys`), if
    /// they name one: told by length and first byte, then compared, all with constants.
    private static func envelopeSlot(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int? {
        guard let bytes, count >= 2 else { return nil }
        let (slot, name): (Int, StaticString)
        switch (count, bytes[0]) {
        case (7, UInt8(ascii: "j")): (slot, name) = (0, "jsonrpc")
        case (2, UInt8(ascii: "i")): (slot, name) = (1, "id")
        case (6, UInt8(ascii: "m")): (slot, name) = (2, "method")
        case (6, UInt8(ascii: "p")): (slot, name) = (3, "params")
        default: return nil
        }
        for i in 1..<count where bytes[i] != name.utf8Start[i] { return nil }
        return slot
    }

    /// The envelope members picked so far (`JSONCallEnvelope`'s, by slot).
    private struct Picked {
        var jsonrpc: JSONValue?
        var id: JSONValue?
        var method: JSONValue?
        var params: JSONValue?

        subscript(slot slot: Int) -> JSONValue? {
            get {
                switch slot {
                case 0: return jsonrpc
                case 1: return id
                case 2: return method
                default: return params
                }
            }
            set {
                switch slot {
                case 0: jsonrpc = newValue
                case 1: id = newValue
                case 2: method = newValue
                default: params = newValue
                }
            }
        }
    }

    /// The common word these bytes spell, if they spell one (see `commonWords`).
    private static func commonWord(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> String? {
        guard let bytes, let packed = packed(bytes, count), let i = commonPacked.firstIndex(of: packed) else { return nil }
        return commonWords[i]
    }

    /// Text from yajl as a Swift string, or nil when the bytes are not well-formed UTF-8.
    ///
    /// yajl's own UTF-8 check only looks at the shape of each sequence (a lead byte and
    /// the right number of continuation bytes), so overlong forms (`C0 80`), encoded
    /// surrogates (`ED A0 80`) and code points above U+10FFFF pass it. Rather than let
    /// them become U+FFFD silently, this makes them a parse error like any other invalid
    /// UTF-8. `String(decoding:)` validates anyway (its fast path), and for the sequences
    /// that can get past yajl its repair always makes the text longer: each of their 2 to
    /// 4 bytes becomes a 3-byte U+FFFD. So an unchanged length means nothing was
    /// repaired, and the check costs nothing beyond the decoding. (`String(validating:)`
    /// would say so directly, but it runs unspecialised generic code here: with it,
    /// decoding a 1 MB document took twice as long.) Escaped lone surrogates never arrive as ill-formed bytes:
    /// yajl stops at them (`SurrogateEscapeCheck` has marked them) before it makes a string.
    private static func string(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> String? {
        guard count > 0 else { return "" }
        if let word = commonWord(bytes, count) { return word }
        let s = String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        return s.utf8.count == count ? s : nil
    }

    /// What a number's raw text is as an integer.
    private enum IntegerLiteral {
        case fits(Int64)
        /// An integer literal (no `.`, `e` or `E`) outside Int64's range.
        case tooLarge
        case notInteger
    }

    /// The raw text as an Int64 when it is an integer literal that fits. Digits
    /// accumulate negatively so that Int64.min fits too; past an overflow the rest is
    /// only checked to be digits.
    private static func int64(_ raw: UnsafeRawBufferPointer) -> IntegerLiteral {
        var i = 0
        let negative = raw.first == UInt8(ascii: "-")
        if negative { i = 1 }
        guard i < raw.count else { return .notInteger }
        var acc: Int64 = 0
        var overflowed = false
        while i < raw.count {
            let digit = Int64(raw[i]) - 48
            guard digit >= 0 && digit <= 9 else { return .notInteger }
            if !overflowed {
                let (times10, o1) = acc.multipliedReportingOverflow(by: 10)
                let (next, o2) = times10.subtractingReportingOverflow(digit)
                overflowed = o1 || o2
                acc = next
            }
            i += 1
        }
        if overflowed { return .tooLarge }
        if negative { return .fits(acc) }
        let (positive, overflow) = Int64(0).subtractingReportingOverflow(acc)
        return overflow ? .tooLarge : .fits(positive)
    }

    /// Duplicate keys: the last value wins, at the first one's place, as `JSONObject`'s
    /// subscript does. Small objects (all of JSON-RPC's) are checked pairwise; large ones
    /// through a dictionary, so a hostile object with a million keys costs linear time.
    private static func object(from members: [(key: String, value: JSONValue)]) -> JSONObject {
        if members.count <= 12 {
            var hasDuplicate = false
            outer: for i in members.indices {
                // Keys of different lengths differ: most pairs are told apart by that.
                for j in members.indices[(i + 1)...]
                where members[i].key.utf8.count == members[j].key.utf8.count && members[i].key == members[j].key {
                    hasDuplicate = true
                    break outer
                }
            }
            if !hasDuplicate { return JSONObject(distinctMembers: members) }
        }
        var position: [String: Int] = [:]
        position.reserveCapacity(members.count)
        var distinct: [(key: String, value: JSONValue)] = []
        distinct.reserveCapacity(members.count)
        for member in members {
            if let at = position[member.key] {
                distinct[at].value = member.value
            } else {
                position[member.key] = distinct.count
                distinct.append(member)
            }
        }
        return JSONObject(distinctMembers: distinct)
    }
}

/// The callback table every parser handle points at. yajl keeps the pointer for the
/// handle's whole life, so it must not be a local's address; one table allocated once and
/// never freed outlives every handle. It is never written after initialisation, so
/// sharing it across threads is safe, which is what `nonisolated(unsafe)` asserts.
nonisolated(unsafe) private let yajlValueCallbacks: UnsafeMutablePointer<yajl_callbacks> = {
    let table = UnsafeMutablePointer<yajl_callbacks>.allocate(capacity: 1)
    table.initialize(to: yajl_callbacks(
        yajl_null: { ctx in YajlValueParser.with(ctx) { $0.add(.null) } },
        yajl_boolean: { ctx, b in YajlValueParser.with(ctx) { $0.add(.bool(b != 0)) } },
        // With `yajl_number` set, yajl never calls the integer and double callbacks.
        yajl_integer: nil,
        yajl_double: nil,
        yajl_number: { ctx, s, n in YajlValueParser.with(ctx) { $0.number(s, n) } },
        yajl_string: { ctx, s, n in YajlValueParser.with(ctx) { $0.string(s, n) } },
        yajl_start_map: { ctx in YajlValueParser.with(ctx) { $0.open(object: true) } },
        yajl_map_key: { ctx, s, n in YajlValueParser.with(ctx) { $0.key(s, n) } },
        yajl_end_map: { ctx in YajlValueParser.with(ctx) { $0.closeObject() } },
        yajl_start_array: { ctx in YajlValueParser.with(ctx) { $0.open(object: false) } },
        yajl_end_array: { ctx in YajlValueParser.with(ctx) { $0.closeArray() } }
    ))
    return table
}()
