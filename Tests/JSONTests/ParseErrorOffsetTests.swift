import Testing
import JSON

/// Invalid input is reported once, with yajl's short message and the absolute offset at
/// which yajl gave up.
struct ParseErrorOffsetTests {
    @Test func offsetsWithinOneValue() {
        #expect(events([utf8("[1,]")]) == [parseError(4, unallowedToken)])
        #expect(events([utf8("  }")]) == [parseError(3, unallowedToken)])
        #expect(events([utf8("@")]) == [parseError(1, invalidChar)])
        #expect(events([utf8("{\"a\" 1}")])
            == [parseError(6, "parse error: object key and value must be separated by a colon (':')")])
        #expect(events([[0x22, 0xFF, 0x22]]) == [parseError(2, invalidUTF8)])
    }

    @Test func offsetsCountTheWholeStream() {
        let decoder = JSONStreamDecoder()
        #expect(decoder.feed(utf8("{\"ok\":1}\n")) == [.value(["ok": 1])])
        #expect(decoder.feed(utf8("[1,2]")) == [.value([1, 2])])
        #expect(decoder.feed(utf8(" [1,]")) == [parseError(19, unallowedToken)])
    }

    /// The JSON-RPC 2.0 specification's "rpc call with invalid JSON".
    @Test func specInvalidJSONExample() {
        let text = #"{"jsonrpc": "2.0", "method": "foobar, "params": "bar", "baz]"#
        #expect(events([utf8(text)]) == [parseError(40, invalidChar)])
        #expect(events([utf8(text + "\n")]) == [parseError(40, invalidChar)])
    }

    /// The brief's unterminated array, reported when the stream ends.
    @Test func unterminatedArrayExample() {
        #expect(events([utf8("[1,2,3")]) == [parseError(6, prematureEOF)])
    }

    /// The specification's "rpc call Batch, invalid JSON".
    @Test func specInvalidBatchExample() {
        let text = """
            [
              {"jsonrpc": "2.0", "method": "sum", "params": [1,2,4], "id": "1"},
              {"jsonrpc": "2.0", "method"
            ]
            """
        #expect(events([utf8(text)])
            == [parseError(102, "parse error: object key and value must be separated by a colon (':')")])
    }

    @Test func commentsAreNotAllowed() {
        #expect(events([utf8("/* c */ 1")]) == [parseError(0, "lexical error: probable comment found in input text, comments are not enabled.")])
    }
}
