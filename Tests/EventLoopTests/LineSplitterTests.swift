import Testing
import EventLoop

/// Lines come out whole and in order however the stream is cut, without their newline;
/// an unfinished line waits for the bytes that end it.
@Suite struct LineSplitterTests {
    func lines(of pieces: [String]) -> ([String], String) {
        var splitter = LineSplitter()
        var out: [String] = []
        for piece in pieces {
            Array(piece.utf8).withUnsafeBytes { bytes in
                splitter.split(bytes) { out.append(String(decoding: $0, as: UTF8.self)) }
            }
        }
        return (out, String(decoding: splitter.partial, as: UTF8.self))
    }

    @Test func everyCutGivesTheSameLines() {
        let text = "one\n\ntwo three\nfour\nfive"
        #expect(lines(of: [text]) == (["one", "", "two three", "four"], "five"))
        let bytes = Array(text)
        for cut in 0...bytes.count {
            for cut2 in cut...bytes.count {
                let pieces = [String(bytes[..<cut]), String(bytes[cut..<cut2]), String(bytes[cut2...])]
                #expect(lines(of: pieces) == (["one", "", "two three", "four"], "five"), "cut at \(cut), \(cut2)")
            }
        }
    }

    @Test func resetForgetsTheUnfinishedLine() {
        var splitter = LineSplitter()
        var out: [String] = []
        Array("half".utf8).withUnsafeBytes { splitter.split($0) { out.append(String(decoding: $0, as: UTF8.self)) } }
        splitter.reset()
        Array("whole\n".utf8).withUnsafeBytes { splitter.split($0) { out.append(String(decoding: $0, as: UTF8.self)) } }
        #expect(out == ["whole"] && splitter.partial.isEmpty)
    }
}
