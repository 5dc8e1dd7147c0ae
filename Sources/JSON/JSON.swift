/// Whole-document JSON: decoding one complete value and encoding a value to bytes.
///
/// The server's connections read through `JSONStreamDecoder`; these entry points serve
/// everything that holds a whole document at once (configuration files, the OpenRPC
/// document, upstream bodies a client asks to have parsed, tests) and the write path of
/// every message (`encode(_:into:)`).
public enum JSON {
    /// Decodes exactly one value. Whitespace around it is allowed; anything else (nothing
    /// at all, a second value, garbage) is an error, because a document with two values is
    /// not the document its sender meant. Text rules are the stream decoder's: ill-formed
    /// UTF-8 is an error, so is an unpaired surrogate escape (`"\ud800"`), and nesting is
    /// limited to 512 levels.
    public static func decode(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        let result = bytes.withContiguousStorageIfAvailable { decode(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { decode($0) }
        return try result.get()
    }

    /// Decodes exactly one value from text; see `decode(_:)` for bytes. Offsets in errors
    /// count UTF-8 bytes, not characters.
    public static func decode(_ text: String) throws(JSONParseError) -> JSONValue {
        var text = text
        return try text.withUTF8 { decode(UnsafeRawBufferPointer($0)) }.get()
    }

    static func decode(_ buffer: UnsafeRawBufferPointer) -> Result<JSONValue, JSONParseError> {
        let check = SurrogateEscapeCheck.check(buffer, final: true)
        guard let marked = check.marked else { return decodeChecked(buffer, stops: []) }
        return marked.withUnsafeBytes { decodeChecked($0, stops: check.stops) }
    }

    /// Decodes `buffer`, in which yajl stops at each of `stops` (marked unpaired
    /// surrogate escapes, `SurrogateEscapeCheck`).
    private static func decodeChecked(_ buffer: UnsafeRawBufferPointer, stops: [Int]) -> Result<JSONValue, JSONParseError> {
        // Without `yajl_allow_multiple_values` yajl itself reports a second value as
        // "trailing garbage".
        let parser = YajlValueParser(allowMultipleValues: false)
        if let base = buffer.baseAddress, buffer.count > 0,
            case .failed(let consumed, let message) = parser.parse(base, count: buffer.count)
        {
            return .failure(JSONParseError(offset: consumed, message: stops.contains(consumed) ? SurrogateEscapeCheck.message : message))
        }
        if case .failed(_, let message) = parser.complete() {
            return .failure(JSONParseError(offset: buffer.count, message: message))
        }
        guard parser.completed.count == 1, case .value(let value)? = parser.completed.first?.event else {
            // yajl reports both cases itself; this only guards the invariant.
            return .failure(JSONParseError(offset: buffer.count, message: "parse error: premature EOF"))
        }
        return .success(value)
    }
}
