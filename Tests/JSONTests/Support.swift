import JSON

/// Helpers shared by the JSON test files.

func utf8(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Feeds the chunks to one decoder, then finishes the stream, and returns every event.
func events(_ chunks: [[UInt8]], limit: Int = 16 << 20) -> [JSONStreamEvent] {
    let decoder = JSONStreamDecoder(maxValueBytes: limit)
    var all: [JSONStreamEvent] = []
    for chunk in chunks { all += decoder.feed(chunk) }
    all += decoder.finish()
    return all
}

/// The input fed whole, split in two at every byte, and one byte at a time.
func everySplit(_ input: [UInt8]) -> [[[UInt8]]] {
    var ways: [[[UInt8]]] = [[input]]
    for i in 0...input.count { ways.append([Array(input[..<i]), Array(input[i...])]) }
    ways.append(input.map { [$0] })
    return ways
}

func parseError(_ offset: Int, _ message: String) -> JSONStreamEvent {
    .error(JSONParseError(offset: offset, message: message))
}

/// The error `JSON.decode` throws, or nil when it succeeds.
func decodeError(_ text: String) -> JSONParseError? {
    do {
        _ = try JSON.decode(text)
        return nil
    } catch {
        return error
    }
}

func decodeError(_ bytes: [UInt8]) -> JSONParseError? {
    do {
        _ = try JSON.decode(bytes)
        return nil
    } catch {
        return error
    }
}

let unallowedToken = "parse error: unallowed token at this point in JSON text"
let prematureEOF = "parse error: premature EOF"
let invalidChar = "lexical error: invalid char in json text."
let invalidUTF8 = "lexical error: invalid bytes in UTF8 string."
let unpairedSurrogate = "lexical error: unpaired UTF-16 surrogate escape (\\uD800-\\uDFFF without its pair) in string."
