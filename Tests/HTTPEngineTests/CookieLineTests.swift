import Testing
@testable import HTTPEngine

/// The Netscape cookie line, as libcurl writes and reads it: parsed and written back
/// unchanged; anything else is refused rather than guessed at.
@Suite struct CookieLineTests {
    @Test func linesRoundTrip() throws {
        let lines = [
            "127.0.0.1\tFALSE\t/\tFALSE\t0\tsession\tabc",
            ".example.com\tTRUE\t/app\tTRUE\t1999999999\tid\tv=1; x",
            "#HttpOnly_example.com\tFALSE\t/\tFALSE\t1999999999\th\t",
        ]
        for line in lines {
            let c = try #require(Cookie(netscapeLine: Substring(line)))
            #expect(c.netscapeLine == line)
        }
        let h = try #require(Cookie(netscapeLine: Substring(lines[2])))
        #expect(h.httpOnly && h.domain == "example.com" && h.value.isEmpty && !h.isSession)
        #expect(Cookie(netscapeLine: Substring(lines[0]))?.isSession == true)
        #expect(Cookie(netscapeLine: ".Example.com\tTRUE\t/\tFALSE\t0\ta\tb")?.identity
            == Cookie(netscapeLine: "example.com\tTRUE\t/\tFALSE\t0\ta\tc")?.identity)
    }

    @Test func otherLinesAreRefused() {
        for line in [
            "", "# Netscape HTTP Cookie File", "a\tFALSE\t/\tFALSE\t0\tname",  // six fields
            "a\tMAYBE\t/\tFALSE\t0\tn\tv", "a\tFALSE\t/\tFALSE\tsoon\tn\tv", "a\tFALSE\t/\tFALSE\t-1\tn\tv",
            "a\tFALSE\t/\tFALSE\t0\t\tv", "a\tFALSE\t/\tFALSE\t0\tn\tv\r", "\u{0}\tFALSE\t/\tFALSE\t0\tn\tv",
        ] {
            #expect(Cookie(netscapeLine: Substring(line)) == nil, "\(line.debugDescription)")
        }
    }
}
