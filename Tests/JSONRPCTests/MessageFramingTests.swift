import EventLoop
import JSON
@testable import JSONRPC
import Logging
import Testing

/// Over a stream whose reads are whole messages (`ByteStream.deliversMessages`, a
/// WebSocket's text frames), each read is decoded alone: a message of incomplete JSON is
/// a -32700 of its own and the next message starts afresh (issue 41: the two were read as
/// one, and the second's call failed with the first). Cut at every byte.
@Suite struct MessageFramingTests {
    /// A stream that hands the connection the reads a test gives it, and keeps what the
    /// connection writes. No loop: the connection reads and writes synchronously.
    final class MessageStream: ByteStream {
        let deliversMessages: Bool
        var onRead: ((EventLoop.Stream.ReadEvent) -> Void)?
        var written: [UInt8] = []
        var onDrain: (() -> Void)?
        var onWriteError: ((UVError) -> Void)?

        init(deliversMessages: Bool) { self.deliversMessages = deliversMessages }

        func startReading(_ onRead: @escaping (EventLoop.Stream.ReadEvent) -> Void) throws { self.onRead = onRead }
        func stopReading() { onRead = nil }
        func write(_ bytes: UnsafeRawBufferPointer) { written += bytes }
        var pendingWriteBytes: Int { 0 }
        func close(_ completion: (() -> Void)?) { completion?() }
        var peerDescription: String { "test" }
        var isTCP: Bool { false }
        var peerUID: UInt32? { nil }

        /// Delivers one read, as `WebSocketStream` does a text frame: its payload and "\n".
        func deliver(_ message: [UInt8]) {
            (message + [0x0A]).withUnsafeBytes { onRead?(.data($0)) }
        }

        /// The replies written so far, one per line.
        var replies: [JSONValue] {
            written.split(separator: 0x0A).compactMap { try? JSON.decode($0) }
        }
    }

    private func connection(_ stream: MessageStream) throws -> RPCConnection {
        let registry = MethodRegistry()
        registry.register("get_data", params: []) { _ in .result(["hello", 5]) }
        let c = RPCConnection(id: 1, stream: stream, dispatcher: Dispatcher(registry: registry),
                              limits: ConnectionLimits(), logger: Logger(label: "test"))
        try c.start()
        return c
    }

    static let call = Array(#"{"jsonrpc":"2.0","method":"get_data","id":7}"#.utf8)

    @Test func aMessageCutShortIsAParseErrorOfItsOwnAtEveryCut() throws {
        for cut in 1..<Self.call.count {
            let stream = MessageStream(deliversMessages: true)
            let c = try connection(stream)
            stream.deliver(Array(Self.call[..<cut]))
            stream.deliver(Array(Self.call[cut...]))
            stream.deliver(Self.call)
            let replies = stream.replies
            let codes = replies.map { $0["error"]?["code"]?.int64Value }
            // The first half: a parse error, id null. The second alone: whatever it is
            // by itself (an error, or a value that is no request), never the call.
            #expect(codes.first == -32700 && replies.first?["id"] == .null, "cut at \(cut): \(replies)")
            #expect(replies.last == ["jsonrpc": "2.0", "result": ["hello", 5], "id": 7], "cut at \(cut): \(replies)")
            #expect(!replies.dropLast().contains { $0["result"] != nil }, "cut at \(cut): the halves were joined")
            c.close(reason: nil)
        }
    }

    /// A byte stream's reads fall anywhere: the same two halves are one call there.
    @Test func aByteStreamJoinsWhatItReads() throws {
        for cut in 1..<Self.call.count {
            let stream = MessageStream(deliversMessages: false)
            let c = try connection(stream)
            Array(Self.call[..<cut]).withUnsafeBytes { stream.onRead?(.data($0)) }
            (Array(Self.call[cut...]) + [0x0A]).withUnsafeBytes { stream.onRead?(.data($0)) }
            #expect(stream.replies == [["jsonrpc": "2.0", "result": ["hello", 5], "id": 7]], "cut at \(cut)")
            c.close(reason: nil)
        }
    }

    /// A bare number is complete at the end of its message (it waited for a delimiter).
    @Test func aBareNumberEndsWithItsMessage() throws {
        let stream = MessageStream(deliversMessages: true)
        let c = try connection(stream)
        stream.deliver(Array("42".utf8))
        #expect(stream.replies.map { $0["error"]?["code"]?.int64Value } == [-32600])
        c.close(reason: nil)
    }
}
