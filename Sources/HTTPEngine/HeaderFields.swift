#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Header fields kept as the bytes they arrived as: one buffer, and for each field where
/// its name and its value are in it. A response's head is read into one of these without
/// making any `String`; names compare on their bytes (`HeaderName`), and the text a
/// client sees is written straight from them (`withNameUTF8`, `withValueUTF8`).
///
/// As a collection it is the fields in the order received, names spelled as sent,
/// repeated names kept, each read as `(name, value)` strings by `decodeHeaderText`'s
/// rule (UTF-8, else ISO-8859-1), for the callers that want strings.
public struct HeaderFields: Sendable, RandomAccessCollection, ExpressibleByArrayLiteral {
    /// The header lines the fields were read from (fields given as strings: each name
    /// and value, one after another); bytes between the fields' ranges are never read.
    @usableFromInline private(set) var bytes: [UInt8] = []
    /// Where each field's name and value are in `bytes`.
    @usableFromInline private(set) var fields: [(name: Range<Int>, value: Range<Int>)] = []

    public init() {}

    /// Fields given as strings (request headers, tests, heads made by the Service layer).
    public init(_ pairs: [(name: String, value: String)]) {
        for (name, value) in pairs { append(name: name.utf8, value: value.utf8) }
    }

    public init(arrayLiteral elements: (name: String, value: String)...) {
        self.init(elements)
    }

    /// Room for `fields` fields of `bytes` bytes in all.
    mutating func reserveCapacity(fields: Int, bytes: Int) {
        self.fields.reserveCapacity(fields)
        self.bytes.reserveCapacity(bytes)
    }

    /// Adds a field from a header line (the parser's): the line's bytes are copied in
    /// one piece, and the field is `name` and `value` of them (the value trimmed).
    mutating func append(line: UnsafeRawBufferPointer, name: Range<Int>, value: Range<Int>) {
        let start = bytes.count
        bytes.append(contentsOf: line)
        let valueRange = value.lowerBound + start..<value.upperBound + start
        fields.append((name.lowerBound + start..<name.upperBound + start, valueRange))
        if HeaderFields.hasControls(UnsafeRawBufferPointer(rebasing: line[value])) { blankControls(in: valueRange) }
    }

    /// Whether `text` holds a CR or a NUL, which RFC 9110 §5.5 lets a recipient keep in
    /// a field value only as SP (an LF cannot be there: libcurl ends a line at it). Two
    /// `memchr`s: a value nearly never has either.
    static func hasControls(_ text: UnsafeRawBufferPointer) -> Bool {
        guard let base = text.baseAddress, !text.isEmpty else { return false }
        return memchr(base, 0x0D, text.count) != nil || memchr(base, 0, text.count) != nil
    }

    /// Replaces every CR and NUL in `range` of `bytes` with SP: a bare CR in a value
    /// would otherwise reach a client that splits lines on it as a line of its own
    /// (`X-A: a\rSet-Cookie: b`).
    private mutating func blankControls(in range: Range<Int>) {
        for i in range { bytes[i] = HeaderFields.blanked(bytes[i]) }
    }

    /// A CR or NUL as SP, any other byte as it is: the rule for field values and the
    /// status line's phrase alike.
    static func blanked(_ b: UInt8) -> UInt8 { b == 0x0D || b == 0 ? 0x20 : b }

    /// Adds a field given as its name and value.
    mutating func append<Bytes: Collection<UInt8>>(name: Bytes, value: Bytes) {
        let nameStart = bytes.count
        bytes.append(contentsOf: name)
        let valueStart = bytes.count
        bytes.append(contentsOf: value)
        fields.append((nameStart..<valueStart, valueStart..<bytes.count))
    }

    /// An obs-fold continuation (RFC 9112 §5.2): the last value becomes both parts'
    /// text joined with a space, each part read by `decodeHeaderText` on its own, stored
    /// as that text's UTF-8 (which reads back as the same text) at the end of the buffer.
    mutating func foldIntoLast(_ more: UnsafeRawBufferPointer) {
        guard let last = fields.indices.last else { return }
        let joined = value(at: last) + " " + decodeHeaderText(more)
        let start = bytes.count
        bytes.append(contentsOf: joined.utf8)
        fields[last].value = start..<bytes.count
        blankControls(in: start..<bytes.count)
    }

    // MARK: Reading

    public var startIndex: Int { 0 }
    public var endIndex: Int { fields.endIndex }

    public subscript(position: Int) -> (name: String, value: String) {
        (name(at: position), value(at: position))
    }

    public func name(at i: Int) -> String { text(fields[i].name) }
    public func value(at i: Int) -> String { text(fields[i].value) }

    @usableFromInline func text(_ range: Range<Int>) -> String {
        bytes.withUnsafeBytes { decodeHeaderText(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// Calls `body` with the UTF-8 text of field `i`'s name: its bytes as they came when
    /// they are ASCII (nearly always), else the text `name(at:)` reads. Inlinable, as
    /// the two below, so that the Service layer's writers get them specialised.
    @inlinable public func withNameUTF8<R>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        withUTF8(fields[i].name, body)
    }

    /// The same for field `i`'s value.
    @inlinable public func withValueUTF8<R>(_ i: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        withUTF8(fields[i].value, body)
    }

    /// Calls `body` with the bytes of field `i`'s name and value and returns true when
    /// both are ASCII (nearly always), so that the bytes are their UTF-8 text; returns
    /// false without calling it otherwise (`withNameUTF8` and `withValueUTF8` read those).
    @inlinable public func withASCIIField(_ i: Int, _ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> Void) -> Bool {
        bytes.withUnsafeBufferPointer { all in
            let name = UnsafeBufferPointer(rebasing: all[fields[i].name])
            let value = UnsafeBufferPointer(rebasing: all[fields[i].value])
            guard isASCII(name), isASCII(value) else { return false }
            body(name, value)
            return true
        }
    }

    @inlinable func withUTF8<R>(_ range: Range<Int>, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        let ascii = bytes.withUnsafeBufferPointer { all in
            isASCII(UnsafeBufferPointer(rebasing: all[range])) ? body(UnsafeBufferPointer(rebasing: all[range])) : nil
        }
        if let ascii { return ascii }
        var s = text(range)
        return s.withUTF8(body)
    }

    /// Whether field `i`'s name is `name`, case-insensitively (`HeaderName`).
    public func nameIs(_ i: Int, _ name: String) -> Bool {
        var name = name
        return name.withUTF8 { wanted in
            bytes.withUnsafeBufferPointer { all in
                HeaderName.equal(UnsafeBufferPointer(rebasing: all[fields[i].name]), wanted)
            }
        }
    }

    /// The value of the first field named `name`.
    public func firstValue(of name: String) -> String? {
        indices.first { nameIs($0, name) }.map(value(at:))
    }

    /// The value of the last field named `name`.
    public func lastValue(of name: String) -> String? {
        indices.last { nameIs($0, name) }.map(value(at:))
    }

    /// The values of the fields named `name` joined with ", " as RFC 9110 §5.3 allows;
    /// nil when there are none.
    public func joinedValues(of name: String) -> String? {
        let values = indices.filter { nameIs($0, name) }.map(value(at:))
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    /// Whether field `i`'s value is empty.
    func valueIsEmpty(_ i: Int) -> Bool { fields[i].value.isEmpty }

    /// The length of field `i`'s name: compared first, it settles nearly every field a
    /// search for one name meets without comparing bytes.
    func nameLength(_ i: Int) -> Int { fields[i].name.count }

    /// Calls `body` with the bytes of field `i`'s name and value, as they came.
    func withBytes<R>(_ i: Int, _ body: (_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) -> R) -> R {
        bytes.withUnsafeBufferPointer { all in
            body(UnsafeBufferPointer(rebasing: all[fields[i].name]), UnsafeBufferPointer(rebasing: all[fields[i].value]))
        }
    }

    // MARK: Merging repeated names

    /// The fields grouped by name: one group per name (in any case), in the order the
    /// names first came, each with the index of its first field (whose spelling is the
    /// group's) and, through `next(after:)`, its other fields in order. The one rule for
    /// every header object a client sees: repeated names joined under the first spelling.
    public struct Groups {
        @usableFromInline struct Group {
            @usableFromInline var first: Int
            var last: Int
            /// The byte length of its name when that is ASCII, else -1.
            var asciiLength: Int
        }
        @usableFromInline var groups: [Group] = []
        /// For each field, the next field of its group; -1 after the last.
        @usableFromInline var nextField: [Int]

        init(fieldCount: Int) {
            nextField = Array(repeating: -1, count: fieldCount)
            groups.reserveCapacity(fieldCount)
        }

        @inlinable public var count: Int { groups.count }

        /// The first field of group `g`.
        @inlinable public func first(ofGroup g: Int) -> Int { groups[g].first }

        /// The field after `field` in its group, if any.
        @inlinable public func next(after field: Int) -> Int? {
            nextField[field] < 0 ? nil : nextField[field]
        }

        /// Calls `body` with each field of group `g`, in the order they came.
        @inlinable public func forEachField(ofGroup g: Int, _ body: (Int) -> Void) {
            var field: Int? = first(ofGroup: g)
            while let f = field {
                body(f)
                field = next(after: f)
            }
        }
    }

    /// Past this many names, a group is found by an index of lower-cased names instead of
    /// comparing with every name seen, so that thousands of headers do not cost n².
    public static let indexedNameCount = 32

    /// The fields grouped by name (`Groups`). A response has a dozen or two fields: a
    /// name is looked for among those already seen, no hashing; two ASCII names of
    /// different lengths differ in any case, which settles nearly every comparison.
    public func groupedByName() -> Groups {
        var result = Groups(fieldCount: fields.count)
        var index: [String: Int]?
        // Raw pointers and plain loops: this runs for every response a client sees, and
        // the closures and bounds checks of `firstIndex` over arrays cost more than the
        // comparisons themselves.
        bytes.withUnsafeBufferPointer { all in
            fields.withUnsafeBufferPointer { fields in
                for i in 0..<fields.count {
                    let name = UnsafeBufferPointer(rebasing: all[fields[i].name])
                    if index == nil, result.groups.count > Self.indexedNameCount {
                        index = Dictionary(uniqueKeysWithValues: result.groups.enumerated().map { (self.name(at: $1.first).lowercased(), $0) })
                    }
                    let asciiLength = isASCII(name) ? name.count : -1
                    var found: Int?
                    if let index {
                        found = index[self.name(at: i).lowercased()]
                    } else {
                        var g = 0
                        while g < result.groups.count {
                            let group = result.groups[g]
                            if group.asciiLength < 0 || asciiLength < 0 || group.asciiLength == asciiLength,
                               HeaderName.equal(UnsafeBufferPointer(rebasing: all[fields[group.first].name]), name) {
                                found = g
                                break
                            }
                            g += 1
                        }
                    }
                    if let found {
                        result.nextField[result.groups[found].last] = i
                        result.groups[found].last = i
                    } else {
                        index?[self.name(at: i).lowercased()] = result.groups.count
                        result.groups.append(Groups.Group(first: i, last: i, asciiLength: asciiLength))
                    }
                }
            }
        }
        return result
    }
}

/// Whether every byte is below 0x80; eight at a time.
@inlinable func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
    guard let base = bytes.baseAddress else { return true }
    var i = 0
    while i + 8 <= bytes.count {
        let word = UnsafeRawPointer(base + i).loadUnaligned(as: UInt64.self)
        if word & 0x8080_8080_8080_8080 != 0 { return false }
        i += 8
    }
    while i < bytes.count {
        if base[i] >= 0x80 { return false }
        i += 1
    }
    return true
}
