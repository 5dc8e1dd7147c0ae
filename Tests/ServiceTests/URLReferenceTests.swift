import JSON
import Testing
@testable import Service

/// `fetch`'s `baseURL` resolution: RFC 3986 §5.4's normal and abnormal examples, exact.
@Test func referencesResolveAsRFC3986Section5Point4Says() {
    let base = "http://a/b/c/d;p?q"
    let examples: [(String, String)] = [
        ("g:h", "g:h"), ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"),
        ("/g", "http://a/g"), ("//g", "http://g"), ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"),
        ("#s", "http://a/b/c/d;p?q#s"), ("g#s", "http://a/b/c/g#s"), ("g?y#s", "http://a/b/c/g?y#s"),
        (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"), ("g;x?y#s", "http://a/b/c/g;x?y#s"),
        ("", "http://a/b/c/d;p?q"), (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"),
        ("../", "http://a/b/"), ("../g", "http://a/b/g"), ("../..", "http://a/"), ("../../", "http://a/"),
        ("../../g", "http://a/g"),
        // Abnormal examples (§5.4.2).
        ("../../../g", "http://a/g"), ("../../../../g", "http://a/g"), ("/./g", "http://a/g"),
        ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."), (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."),
        ("..g", "http://a/b/c/..g"), ("./../g", "http://a/b/g"), ("./g/.", "http://a/b/c/g/"),
        ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"), ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"), ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g#s/./x"), ("g#s/../x", "http://a/b/c/g#s/../x"), ("http:g", "http:g"),
    ]
    for (ref, want) in examples {
        #expect(URLReference.resolve(ref, against: base) == want, "\(ref)")
    }
    // A base with an authority and no path.
    #expect(URLReference.resolve("x", against: "https://h:8443") == "https://h:8443/x")
}

@Test func queryParametersAppendInOrderFormEncoded() throws {
    let q: JSONObject = ["a b": "1&2", "k": .array(["x", .int(2), .bool(false)])]
    #expect(try URLReference.appendingQuery(q, to: "http://h/p") == "http://h/p?a+b=1%262&k=x&k=2&k=false")
    #expect(try URLReference.appendingQuery(q, to: "http://h/p?z#f") == "http://h/p?z&a+b=1%262&k=x&k=2&k=false#f")
    #expect(try URLReference.appendingQuery([:], to: "http://h/p?") == "http://h/p?")
}
