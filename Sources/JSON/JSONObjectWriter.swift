/// The compact JSON text of one value, already written: what `JSONObjectWriter` makes,
/// and what a peer is sent instead of a `JSONValue` tree (`RPCPeer.send(encoded:)`).
/// The bytes are exactly those `JSON.encode` writes for the same value.
public struct EncodedJSON: Sendable {
    public let bytes: [UInt8]

    /// The text of `value`, as `JSON.encode` writes it.
    public init(_ value: JSONValue) {
        bytes = JSON.encode(value)
    }

    /// Bytes that are one compact JSON value; the writer's promise, not checked.
    init(writtenBytes: [UInt8]) {
        bytes = writtenBytes
    }

    /// The array of `elements`, as `JSON.encode` writes `.array` of their values.
    public static func array(_ elements: [EncodedJSON]) -> EncodedJSON {
        var array = JSONArrayWriter()
        for element in elements { array.append(element) }
        return array.finish()
    }

    /// The value again, for callers that need the tree (a test's peer, an error's data).
    public func decoded() -> JSONValue {
        // Bytes written by `JSONWriter` are JSON; `null` only if that promise is broken.
        (try? JSON.decode(bytes)) ?? .null
    }
}

/// A member name written once, as `JSONObjectWriter` writes it before the member's value
/// (quoted, escaped, with its colon): for the keys of messages written on every call (a
/// response's `jsonrpc`, `result` and `id`, `server.info`'s members), which are then
/// copied instead of scanned for characters to escape each time (about 300 instructions
/// a key).
public struct JSONKey: Sendable {
    /// `,"name":`: the comma that separates it from a previous member, then the key.
    fileprivate let text: [UInt8]

    public init(_ name: String) {
        var text = [UInt8(ascii: ",")]
        JSONWriter.writeString(name, into: &text)
        text.append(UInt8(ascii: ":"))
        self.text = text
    }
}

/// Members whose keys and values never change, written once: `server.info`'s name and
/// version, a response's `"jsonrpc":"2.0"`. The writer copies them in one piece.
public struct JSONConstantMembers: Sendable {
    /// `,"key":value,"key":value`, as `JSONObjectWriter` writes these members after others.
    fileprivate let text: [UInt8]

    /// `members` in this order; the caller gives each key once.
    public init(_ members: KeyValuePairs<String, JSONValue>) {
        var text: [UInt8] = []
        for (key, value) in members {
            text.append(contentsOf: JSONKey(key).text)
            JSONWriter.write(value, into: &text)
        }
        self.text = text
    }
}

/// Writes a JSON object member by member, straight as bytes, with the same writer and
/// the same output as `JSON.encode` on the equal `JSONObject`: for results built on every
/// request (fetch's answer, a JSON-RPC response around its result), so that no tree of
/// values is built only to be encoded and freed.
///
/// Members are written in the order they are added; the caller adds each key once (an
/// object built this way has no `JSONObject` to merge a repeated key).
public struct JSONObjectWriter {
    private var bytes: [UInt8]
    private var isEmpty = true

    /// Starts an object; `capacity` is a guess of its size in bytes.
    public init(capacity: Int = 128) {
        bytes = []
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Starts an object in the memory of `buffer`, which is emptied and taken over (left
    /// empty): for a caller that writes one object after another and gets each one's
    /// bytes back once they have been copied on (`RPCCall`'s responses).
    public init(reusing buffer: inout [UInt8], capacity: Int = 128) {
        bytes = []
        swap(&bytes, &buffer)
        bytes.removeAll(keepingCapacity: true)
        bytes.reserveCapacity(capacity)
        bytes.append(UInt8(ascii: "{"))
    }

    /// Room for `count` more bytes at once, for a member whose size is known before it is
    /// written (fetch's body), instead of the buffer growing several times while it is.
    public mutating func reserveCapacity(forMore count: Int) {
        bytes.reserveCapacity(bytes.count + count)
    }

    /// Room for a string member's text of `count` bytes (its least, before any escaping)
    /// and what usually follows it, made at once: a long text (a body read in one call,
    /// megabytes) then neither grows the buffer while it is written nor makes it grow,
    /// and copy it all, for the few members and the end of the message after it (a
    /// read's `encoding`, `bytes` and `done`; the response's `id`).
    private mutating func reserve(forText count: Int) {
        bytes.reserveCapacity(bytes.count + count + Self.roomAfterText)
    }

    private static let roomAfterText = 256

    /// A writer with no buffer yet: a nested object takes over its parent's.
    private init(noBuffer: ()) {
        bytes = []
    }

    private mutating func key(_ key: String) {
        if !isEmpty { bytes.append(UInt8(ascii: ",")) }
        isEmpty = false
        JSONWriter.writeString(key, into: &bytes)
        bytes.append(UInt8(ascii: ":"))
    }

    /// The same text as `key(_:)` with the key's name, copied whole.
    private mutating func key(_ key: JSONKey) {
        appendSkippingFirstComma(key.text)
    }

    /// Text written once that starts with the comma before a member (`JSONKey`,
    /// `JSONConstantMembers`), without that comma for the object's first member.
    private mutating func appendSkippingFirstComma(_ text: [UInt8]) {
        let skipComma = isEmpty ? 1 : 0
        isEmpty = false
        text.withUnsafeBufferPointer { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: $0[skipComma...])) }
    }

    // Members keyed by a `JSONKey`: the same text as the methods below that take the
    // key's name as a `String`.

    public mutating func add(_ members: JSONConstantMembers) {
        guard !members.text.isEmpty else { return }
        appendSkippingFirstComma(members.text)
    }

    public mutating func add(_ key: JSONKey, _ value: JSONValue) {
        self.key(key)
        JSONWriter.write(value, into: &bytes)
    }

    public mutating func add(_ key: JSONKey, int value: Int64) {
        self.key(key)
        JSONWriter.writeInteger(value, into: &bytes)
    }

    public mutating func add(_ key: JSONKey, encoded value: EncodedJSON) {
        self.key(key)
        bytes.append(contentsOf: value.bytes)
    }

    public mutating func add(_ key: JSONKey, string value: String) {
        self.key(key)
        JSONWriter.writeString(value, into: &bytes)
    }

    public mutating func add(_ key: JSONKey, utf8String value: UnsafeBufferPointer<UInt8>) {
        self.key(key)
        reserve(forText: value.count)
        bytes.append(UInt8(ascii: "\""))
        JSONWriter.writeEscaped(value, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// A string member of `count` bytes that need no escaping (base64 text), which `write`
    /// hands over in pieces, one after another, to the function it is given: room for all
    /// of it is made at once, and each piece is copied in while it is still in the cache,
    /// instead of the whole text being made apart first (megabytes, for a body read in
    /// one call). The pieces add up to `count` bytes: the caller's promise.
    public mutating func add(_ key: JSONKey, unescapedStringOfCount count: Int,
                             _ write: ((UnsafeBufferPointer<UInt8>) -> Void) -> Void) {
        self.key(key)
        reserve(forText: count)
        bytes.append(UInt8(ascii: "\""))
        write { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func add(_ key: String, _ value: JSONValue) {
        self.key(key)
        JSONWriter.write(value, into: &bytes)
    }

    public mutating func add(_ key: String, string value: String) {
        self.key(key)
        JSONWriter.writeString(value, into: &bytes)
    }

    public mutating func add(_ key: String, int value: Int64) {
        self.key(key)
        JSONWriter.writeInteger(value, into: &bytes)
    }

    /// A string member from UTF-8 text that is not a `String` (a header field's bytes):
    /// the key, and the value in pieces that `value` hands to the function it is given,
    /// one after another. The same text as `add(_:string:)` with the strings these bytes
    /// are; the caller promises valid UTF-8.
    public mutating func addString(utf8Key key: UnsafeBufferPointer<UInt8>,
                                   _ value: ((UnsafeBufferPointer<UInt8>) -> Void) -> Void) {
        if !isEmpty { bytes.append(UInt8(ascii: ",")) }
        isEmpty = false
        bytes.append(UInt8(ascii: "\""))
        JSONWriter.writeEscaped(key, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        bytes.append(UInt8(ascii: "\""))
        value { JSONWriter.writeEscaped($0, into: &bytes) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The same with the value in one piece (a header field that came once).
    public mutating func addString(utf8Key key: UnsafeBufferPointer<UInt8>, utf8Value value: UnsafeBufferPointer<UInt8>) {
        addString(utf8Key: key) { append in append(value) }
    }

    /// A string member whose text is the valid UTF-8 `value` (the caller's promise), as
    /// `add(_:string:)` would write the string of it, without making the string.
    public mutating func add(_ key: String, utf8String value: UnsafeBufferPointer<UInt8>) {
        self.key(key)
        bytes.append(UInt8(ascii: "\""))
        JSONWriter.writeEscaped(value, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// A member whose value was written already.
    public mutating func add(_ key: String, encoded value: EncodedJSON) {
        self.key(key)
        bytes.append(contentsOf: value.bytes)
    }

    /// A member whose value is an object, written by `build` in place.
    public mutating func addObject(_ key: String, _ build: (inout JSONObjectWriter) -> Void) {
        self.key(key)
        addObject(build)
    }

    /// The same with a key written once. When `build` throws, what was written is not a
    /// whole object any more: the caller drops the writer (`RPCCall.reply(object:)`).
    public mutating func addObject(_ key: JSONKey, _ build: (inout JSONObjectWriter) throws -> Void) rethrows {
        self.key(key)
        try addObject(build)
    }

    /// The value of the member whose key was just written: an object, written in place.
    private mutating func addObject(_ build: (inout JSONObjectWriter) throws -> Void) rethrows {
        var inner = JSONObjectWriter(noBuffer: ())
        swap(&inner.bytes, &bytes)  // the nested object writes on in this buffer
        defer { swap(&inner.bytes, &bytes) }
        inner.bytes.append(UInt8(ascii: "{"))
        try build(&inner)
        inner.bytes.append(UInt8(ascii: "}"))
    }

    /// Closes the object and hands over its text.
    public consuming func finish() -> EncodedJSON {
        bytes.append(UInt8(ascii: "}"))
        return EncodedJSON(writtenBytes: bytes)
    }
}

/// Writes a JSON array of values encoded already, one after another into one buffer (a
/// batch's responses as they are answered), as `JSON.encode` writes `.array`.
public struct JSONArrayWriter {
    private var bytes: [UInt8] = [UInt8(ascii: "[")]
    public private(set) var count = 0
    /// The length of the text so far (without the closing bracket).
    public var byteCount: Int { bytes.count }

    public init() {}

    public mutating func append(_ element: EncodedJSON) {
        if count > 0 { bytes.append(UInt8(ascii: ",")) }
        bytes.append(contentsOf: element.bytes)
        count += 1
    }

    /// Closes the array and hands over its text.
    public consuming func finish() -> EncodedJSON {
        bytes.append(UInt8(ascii: "]"))
        return EncodedJSON(writtenBytes: bytes)
    }
}
