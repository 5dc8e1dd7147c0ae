import Testing
import JSON

/// A key written twice keeps one member: the last value, at the first one's place.
struct DuplicateKeyTests {
    @Test func lastValueWinsAtFirstPlace() throws {
        let value = try JSON.decode(#"{"a":1,"b":2,"a":3}"#)
        #expect(value.objectValue?.keys == ["a", "b"])
        #expect(value["a"] == .int(3))
        #expect(JSON.encodeString(value) == #"{"a":3,"b":2}"#)
    }

    @Test func largeObjectWithDuplicates() throws {
        var text = "{"
        for i in 0..<2000 { text += "\"k\(i % 1000)\":\(i)," }
        text += "\"end\":true}"
        let object = try #require(try JSON.decode(text).objectValue)
        #expect(object.count == 1001)
        #expect(object.keys.first == "k0")
        #expect(object["k0"] == .int(1000))
        #expect(object["k999"] == .int(1999))
    }
}
