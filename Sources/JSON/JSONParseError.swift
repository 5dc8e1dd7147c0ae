/// Why some input is not JSON, and where that was noticed.
///
/// The RPC layer answers a parse error with -32700 and may show `description` to the
/// client, so the message is yajl's own short text (for example
/// `lexical error: invalid char in json text.`), one line, never yajl's verbose form with
/// its ASCII-art excerpt of the input, which could echo a client's bytes into logs.
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The absolute byte offset in the whole stream (for `JSON.decode`, in the one
    /// document) at which the error was detected: the number of bytes yajl had consumed
    /// when it gave up. yajl stops either just past the offending byte (`[1,]` stops at 4)
    /// or on it (`tru\n` stops at 3, on the newline); at end of input it is the input's
    /// length.
    public let offset: Int
    /// yajl's message, or one in the same style for the checks this layer adds (nesting
    /// depth, strict UTF-8, numbers).
    public let message: String

    /// Makes an error; public so that layers above can build expected values in tests.
    public init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    /// The message with its offset, as a log line or an error's `data` would show it.
    public var description: String { "\(message) (at byte \(offset))" }
}
