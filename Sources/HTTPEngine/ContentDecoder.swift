import CBrotli
import CShims
import CZlib
import CZstd

/// Undoes a response body's content codings (RFC 9110 §8.4: `Content-Encoding`), in
/// the engine rather than in libcurl, so that a body is whole or it is an error.
///
/// libcurl 7.88 decodes too, but never checks that a decoder reached the end of its
/// stream: a gzip body cut short inside valid framing (a `Content-Length` that counts
/// only the bytes sent, or a chunked body whose last chunk comes early) ended as a
/// success with the part decoded. So libcurl hands the engine the body as it came
/// (`CURLOPT_ACCEPT_ENCODING` is never set, which keeps libcurl's decoders off), and
/// this decoder, made from the final head (`Transfer.deliverHead`), decodes it; at
/// completion `unfinished` says whether every coding's stream ended, and if not the
/// transfer fails (`TransferEngine.complete`).
///
/// The codings: `gzip` (and `x-gzip`), `deflate` — the zlib format RFC 9110 names, or a
/// raw deflate stream, which servers send and browsers accept (told apart by the first
/// two bytes) — `br` and `zstd`; `identity` is none. Several are undone in reverse
/// order of listing, as libcurl does, at most `maxStages`. A gzip body may hold several
/// members (RFC 1952), decoded one after another; after the end of the last gzip member,
/// or of a deflate or br stream, further bytes are ignored, as libcurl ignores them
/// (and gzip(1) ignores trailing garbage); zstd decodes frame after frame.
///
/// Back-pressure: decoded bytes go to a sink (the delegate) one output buffer at a
/// time, and the sink may refuse one. Then each stage keeps the output its next stage
/// did not take (`pending`) and `decode` answers `.refused`: the transfer pauses with
/// `CURL_WRITEFUNC_PAUSE`, and libcurl offers the same raw bytes again after the
/// unpause. The decoder counts the raw bytes it fed (`rawFed`) and those libcurl saw
/// taken (`rawTaken`), so the offer again starts by handing over what is pending and
/// skips the raw bytes already fed. Nothing is ever decoded ahead of what the sink
/// takes, so a highly compressed body never piles up in memory here: at most one
/// output buffer per stage.
///
/// Confined to its transfer, on the loop's thread.
final class ContentDecoder {
    /// A content coding the engine decodes.
    enum Coding: Equatable {
        case gzip, deflate, brotli, zstd

        /// The name it goes by in `Content-Encoding` and in failure texts.
        var name: String {
            switch self {
            case .gzip: "gzip"
            case .deflate: "deflate"
            case .brotli: "br"
            case .zstd: "zstd"
            }
        }
    }

    /// What `Accept-Encoding` offers: every coding the decoder knows, in libcurl's order
    /// (the list libcurl would send for `CURLOPT_ACCEPT_ENCODING ""`).
    static let offered = "deflate, gzip, br, zstd"

    /// The most codings one response may stack (libcurl 8 has the same limit).
    static let maxStages = 5

    /// What `decode` did with the bytes offered.
    enum Outcome: Equatable {
        /// Every byte taken and every decoded byte delivered.
        case taken
        /// The sink refused decoded bytes: pause, and offer the same bytes again later.
        case refused
        /// The body cannot be decoded; the text says why.
        case failed(String)
    }

    /// The codings of a `Content-Encoding` value (all its fields, joined with commas),
    /// in the order they were applied; `identity` and empty items are dropped. Throws
    /// the failure text for a coding the engine does not know, or too many.
    static func codings(of contentEncoding: String) throws(DecodingError) -> [Coding] {
        var out: [Coding] = []
        for item in contentEncoding.split(separator: ",") {
            let word = item.trimmingASCIISpaces().lowercased()
            switch word {
            case "", "identity": continue
            case "gzip", "x-gzip": out.append(.gzip)
            case "deflate": out.append(.deflate)
            case "br": out.append(.brotli)
            case "zstd": out.append(.zstd)
            default:
                throw DecodingError("Unrecognized content encoding type \"\(word)\": the engine decodes \(offered)")
            }
        }
        guard out.count <= maxStages else {
            throw DecodingError("Content-Encoding stacks \(out.count) codings, more than the \(maxStages) the engine decodes")
        }
        return out
    }

    /// Why a body cannot be decoded.
    struct DecodingError: Error, Equatable {
        let text: String
        init(_ text: String) { self.text = text }
    }

    /// The stages in decoding order: the last coding applied is undone first.
    private let stages: [Stage]
    /// Why this body cannot be decoded at all (a coding the engine does not know, a
    /// decoder that could not be made): its first byte fails it. A response without
    /// a body (HEAD, 204, 304) is not failed for the head it has.
    private let refusal: String?
    /// Raw bytes fed to the first stage, and raw bytes libcurl was told were taken,
    /// since the body began. They differ only while a refusal is outstanding.
    private var rawFed = 0
    private var rawTaken = 0

    /// A decoder for a `Content-Encoding` value; nil when it names no coding to undo.
    /// For a coding it does not know, or a decoder that cannot be made, one that fails
    /// the body's first byte with the reason.
    init?(contentEncoding: String) {
        do throws(DecodingError) {
            let codings = try Self.codings(of: contentEncoding)
            guard !codings.isEmpty else { return nil }
            var made: [Stage] = []
            for c in codings.reversed() { made.append(try Stage(c)) }
            stages = made
            refusal = nil
        } catch {
            stages = []
            refusal = error.text
        }
    }

    /// Takes raw body bytes as libcurl offers them and hands what they decode to
    /// `sink`, which answers whether it took them. See the type's comment for what a
    /// refusal means and how the same bytes are offered again.
    func decode(_ raw: UnsafeRawBufferPointer, into sink: (UnsafeRawBufferPointer) -> Bool) -> Outcome {
        if let refusal { return raw.isEmpty ? .taken : .failed(refusal) }
        // What a refusal left behind goes first, the stage nearest the sink first.
        for i in stages.indices.reversed() where stages[i].hasPending || stages[i].outputFull {
            switch flush(stage: i, sink) {
            case .taken: continue
            case let other: return other
            }
        }
        let skip = min(max(0, rawFed - rawTaken), raw.count)
        let fresh = UnsafeRawBufferPointer(rebasing: raw[skip...])
        let (used, outcome) = push(fresh, into: 0, sink)
        switch outcome {
        case .taken:
            rawTaken += raw.count
            rawFed = max(rawFed, rawTaken)
        case .refused:
            rawFed = rawTaken + skip + used
        case .failed:
            break
        }
        return outcome
    }

    /// At the end of the body: nil when every stage that received bytes reached the
    /// end of its stream (a body with no bytes at all, as for HEAD, 204 or 304, is
    /// whole), else why the body is incomplete.
    var unfinished: String? {
        for s in stages where s.fedAny && !s.complete {
            return "Truncated \(s.coding.name) body: the response ended before its \(s.coding.name) stream did"
        }
        return nil
    }

    /// Hands stage `i`'s pending output on, then drains whatever its decoder still
    /// holds (a refusal may have come when its output buffer was full, or when the
    /// next stage had taken a full buffer and was refused further on).
    private func flush(stage i: Int, _ sink: (UnsafeRawBufferPointer) -> Bool) -> Outcome {
        let s = stages[i]
        let range = s.pending
        if !range.isEmpty {  // the sink never sees an empty buffer
            let (used, outcome) = handOn(UnsafeRawBufferPointer(rebasing: s.output[range]), from: i, sink)
            s.pending = range.lowerBound + used..<range.upperBound
            guard outcome == .taken else { return outcome }
            s.pending = 0..<0
        }
        return push(UnsafeRawBufferPointer(start: nil, count: 0), into: i, sink).outcome
    }

    /// Gives decoded bytes of stage `i` to the next stage, or to the sink after the last.
    private func handOn(_ bytes: UnsafeRawBufferPointer, from i: Int,
                        _ sink: (UnsafeRawBufferPointer) -> Bool) -> (used: Int, outcome: Outcome) {
        if i + 1 < stages.count { return push(bytes, into: i + 1, sink) }
        return sink(bytes) ? (bytes.count, .taken) : (0, .refused)
    }

    /// Feeds `input` to stage `i` and hands every output buffer on as it fills.
    /// Returns how much of `input` the stage took: all of it unless refused (then
    /// the stage keeps its undelivered output as `pending`).
    private func push(_ input: UnsafeRawBufferPointer, into i: Int,
                      _ sink: (UnsafeRawBufferPointer) -> Bool) -> (used: Int, outcome: Outcome) {
        let s = stages[i]
        var rest = input
        while !s.ended, rest.count > 0 || s.outputFull {
            let step = s.step(rest)
            rest = UnsafeRawBufferPointer(rebasing: rest[step.used...])
            if case .failed(let why) = step.status { return (input.count - rest.count, .failed(why)) }
            if step.produced > 0 {
                let (used, outcome) = handOn(UnsafeRawBufferPointer(rebasing: s.output[..<step.produced]), from: i, sink)
                switch outcome {
                case .taken: break
                case .refused:
                    s.pending = used..<step.produced
                    return (input.count - rest.count, .refused)
                case .failed: return (input.count - rest.count, outcome)
                }
            } else if step.used == 0, rest.count > 0, !s.ended {
                return (input.count - rest.count, .failed("The \(s.coding.name) decoder took no input and gave no output"))
            }
        }
        // Bytes after the end of a gzip, deflate or br stream are ignored.
        return (input.count, .taken)
    }
}

extension ContentDecoder {
    /// One coding's decoder: the C library's state and one output buffer.
    final class Stage {
        let coding: Coding
        /// Where decoded bytes are written, `bufferSize` of them at a time.
        let output: UnsafeMutableRawBufferPointer
        static let bufferSize = 16 << 10
        /// Output the next stage (or the sink) has not taken yet.
        var pending = 0..<0
        var hasPending: Bool { !pending.isEmpty }
        /// The last step filled the output buffer: the decoder may hold more output,
        /// to be drained without more input.
        private(set) var outputFull = false
        /// Whether any input came, and whether what came so far is a whole stream (for
        /// zstd: ends at a frame's end).
        private(set) var fedAny = false
        private(set) var complete = false
        /// The stream ended (gzip, deflate, br): further input is ignored.
        private(set) var ended = false
        /// A gzip member ended with the input: the next bytes tell whether another
        /// member follows (`startsAnotherMember`) or the stream has ended.
        private var betweenMembers = false

        private enum State {
            /// deflate before its first two bytes told the zlib format from raw deflate;
            /// holds the first byte once it came.
            case deflateUndecided(UInt8?)
            case zlib(UnsafeMutablePointer<z_stream>)
            case brotli(OpaquePointer)
            case zstd(OpaquePointer)
        }
        private var state: State

        init(_ coding: Coding) throws(DecodingError) {
            self.coding = coding
            switch coding {
            case .gzip:
                // 15 + 32: a window of 32 KiB, gzip or zlib header detected (as libcurl).
                state = .zlib(try Self.inflateStream(windowBits: 15 + 32))
            case .deflate:
                state = .deflateUndecided(nil)
            case .brotli:
                guard let b = BrotliDecoderCreateInstance(nil, nil, nil) else {
                    throw DecodingError("Cannot make a brotli decoder: out of memory")
                }
                state = .brotli(b)
            case .zstd:
                guard let z = ZSTD_createDStream() else { throw DecodingError("Cannot make a zstd decoder: out of memory") }
                // RFC 8878 §3.1.1.1.2: an HTTP decoder needs windows up to 8 MiB only; a
                // larger one is refused rather than allocated.
                _ = ZSTD_DCtx_setParameter(z, ZSTD_d_windowLogMax, 23)
                state = .zstd(z)
            }
            output = .allocate(byteCount: Self.bufferSize, alignment: 16)
        }

        deinit {
            switch state {
            case .deflateUndecided: break
            case .zlib(let z):
                inflateEnd(z)
                z.deallocate()
            case .brotli(let b): BrotliDecoderDestroyInstance(b)
            case .zstd(let z): ZSTD_freeDStream(z)
            }
            output.deallocate()
        }

        private static func inflateStream(windowBits: Int32) throws(DecodingError) -> UnsafeMutablePointer<z_stream> {
            let z = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
            z.initialize(to: z_stream())
            guard xh_inflate_init2(z, windowBits) == Z_OK else {
                z.deallocate()
                throw DecodingError("Cannot make a zlib decoder: out of memory")
            }
            return z
        }

        enum Status: Equatable { case more, end, failed(String) }

        /// One call into the decoder with `input` (possibly empty) and the whole output
        /// buffer; what it took and made.
        func step(_ input: UnsafeRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            if input.count > 0 { fedAny = true }
            let result: (used: Int, produced: Int, status: Status)
            switch state {
            case .deflateUndecided(let first):
                return decideDeflate(first, input)
            case .zlib(let z):
                if betweenMembers {
                    // A gzip member ended with the last input: these bytes say whether
                    // another follows.
                    guard !input.isEmpty else {
                        outputFull = false
                        return (0, 0, .more)
                    }
                    betweenMembers = false
                    guard startsAnotherMember(input[...]) else {
                        ended = true
                        return (input.count, 0, .end)
                    }
                    startNextMember(z)
                }
                result = Self.inflateStep(z, input, output)
            case .brotli(let b):
                result = Self.brotliStep(b, input, output)
            case .zstd(let z):
                result = Self.zstdStep(z, input, output)
                if input.count > 0 || result.produced > 0 { complete = result.status == .end }
                outputFull = result.produced == output.count
                return (result.used, result.produced, result.status == .end ? .more : result.status)
            }
            if result.status == .end {
                complete = true
                if coding == .gzip, case .zlib(let z) = state {
                    // RFC 1952 §2.2: a gzip file is a series of members. The next
                    // one starts afresh; the body is whole again only at its end.
                    let rest = input[result.used...]
                    if rest.isEmpty {
                        // The member's end flushed all its output: nothing is held back.
                        betweenMembers = true
                        outputFull = false
                        return (result.used, result.produced, .more)
                    }
                    if startsAnotherMember(rest) {
                        startNextMember(z)
                        outputFull = result.produced == output.count
                        return (result.used, result.produced, .more)
                    }
                }
                ended = true
            }
            outputFull = !ended && result.produced == output.count
            return result
        }

        /// A fresh inflate state for the next gzip member; the body is whole again only
        /// at that member's end.
        private func startNextMember(_ z: UnsafeMutablePointer<z_stream>) {
            inflateReset(z)
            complete = false
        }

        /// Whether the bytes after a gzip member begin another (its magic, 1f 8b, or the
        /// first of it when that is all that came); anything else after the last member
        /// is ignored, as gzip(1) ignores trailing garbage.
        private func startsAnotherMember(_ rest: Slice<UnsafeRawBufferPointer>) -> Bool {
            guard let first = rest.first, first == 0x1F else { return false }
            return rest.count < 2 || rest[rest.startIndex + 1] == 0x8B
        }

        /// deflate's first bytes: a zlib header (RFC 1950 §2.2: compression method 8, a
        /// window of at most 32 KiB, a check that makes the first two bytes a multiple
        /// of 31) starts the zlib format, anything else is raw deflate (RFC 1951).
        private func decideDeflate(_ first: UInt8?, _ input: UnsafeRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            guard !input.isEmpty else { return (0, 0, .more) }
            guard let b0 = first ?? (input.count >= 2 ? input[0] : nil) else {
                state = .deflateUndecided(input[0])
                return (1, 0, .more)
            }
            let b1 = first == nil ? input[1] : input[0]
            let zlibHeader = b0 & 0x0F == 8 && b0 >> 4 <= 7 && (UInt16(b0) << 8 | UInt16(b1)) % 31 == 0
            let z: UnsafeMutablePointer<z_stream>
            do { z = try Self.inflateStream(windowBits: zlibHeader ? 15 : -15) } catch { return (0, 0, .failed(error.text)) }
            state = .zlib(z)
            if first != nil {
                // The byte kept from an earlier offer goes in first; alone it makes no
                // output and cannot end the stream, but it can be refused.
                let head = withUnsafeBytes(of: b0) { Self.inflateStep(z, $0, output) }
                if case .failed = head.status { return (0, 0, head.status) }
            }
            return step(input)
        }

        private static func inflateStep(_ z: UnsafeMutablePointer<z_stream>, _ input: UnsafeRawBufferPointer,
                                        _ output: UnsafeMutableRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            let offered = min(input.count, Int(UInt32.max))
            z.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
            z.pointee.avail_in = UInt32(offered)
            z.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
            z.pointee.avail_out = UInt32(output.count)
            let rc = inflate(z, Z_NO_FLUSH)
            let used = offered - Int(z.pointee.avail_in)
            let produced = output.count - Int(z.pointee.avail_out)
            z.pointee.next_in = nil
            switch rc {
            case Z_STREAM_END: return (used, produced, .end)
            case Z_OK, Z_BUF_ERROR: return (used, produced, .more)
            default:
                let why = z.pointee.msg.map { String(cString: $0) } ?? "zlib error \(rc)"
                return (used, produced, .failed("Error while processing content unencoding: \(why)"))
            }
        }

        private static func brotliStep(_ b: OpaquePointer, _ input: UnsafeRawBufferPointer,
                                       _ output: UnsafeMutableRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            withAddress(input) { brotliStep(b, $0.baseAddress!, $0.count, output) }
        }

        private static func brotliStep(_ b: OpaquePointer, _ start: UnsafeRawPointer, _ count: Int,
                                       _ output: UnsafeMutableRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            var availIn = count
            var nextIn: UnsafePointer<UInt8>? = start.assumingMemoryBound(to: UInt8.self)
            var availOut = output.count
            var nextOut: UnsafeMutablePointer<UInt8>? = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
            let rc = BrotliDecoderDecompressStream(b, &availIn, &nextIn, &availOut, &nextOut, nil)
            let used = count - availIn
            let produced = output.count - availOut
            switch rc {
            case BROTLI_DECODER_RESULT_SUCCESS: return (used, produced, .end)
            case BROTLI_DECODER_RESULT_ERROR:
                let why = String(cString: BrotliDecoderErrorString(BrotliDecoderGetErrorCode(b)))
                return (used, produced, .failed("Error while processing content unencoding: brotli \(why)"))
            default: return (used, produced, .more)
            }
        }

        private static func zstdStep(_ z: OpaquePointer, _ input: UnsafeRawBufferPointer,
                                     _ output: UnsafeMutableRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            withAddress(input) { zstdStep(z, $0.baseAddress!, $0.count, output) }
        }

        private static func zstdStep(_ z: OpaquePointer, _ start: UnsafeRawPointer, _ count: Int,
                                     _ output: UnsafeMutableRawBufferPointer) -> (used: Int, produced: Int, status: Status) {
            var inBuffer = ZSTD_inBuffer(src: start, size: count, pos: 0)
            var outBuffer = ZSTD_outBuffer(dst: output.baseAddress, size: output.count, pos: 0)
            let rc = ZSTD_decompressStream(z, &outBuffer, &inBuffer)
            if ZSTD_isError(rc) != 0 {
                let why = String(cString: ZSTD_getErrorName(rc))
                return (inBuffer.pos, outBuffer.pos, .failed("Error while processing content unencoding: zstd \(why)"))
            }
            return (inBuffer.pos, outBuffer.pos, rc == 0 ? .end : .more)
        }

        /// Calls `body` with `input`, or with an empty buffer at a valid address when
        /// `input` has none (brotli and zstd want a pointer even for no bytes).
        private static func withAddress<R>(_ input: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R) -> R {
            guard input.baseAddress == nil else { return body(input) }
            var none: UInt8 = 0
            return withUnsafeBytes(of: &none) { body(UnsafeRawBufferPointer(start: $0.baseAddress, count: 0)) }
        }
    }
}

private extension Substring {
    func trimmingASCIISpaces() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s.removeFirst() }
        while let c = s.last, c == " " || c == "\t" { s.removeLast() }
        return s
    }
}
