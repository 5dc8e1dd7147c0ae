import EventLoop
import Foundation
import HTTPEngine
import JSON
import Logging
import SeededRandom
import Service

/// The fuzz harness: one input is one client connection to a fresh `Server` with the
/// real method table, over a Unix socket pair, with no network at all — or, in origin
/// mode, with one upstream of the harness's own on loopback (`Origin`).
///
/// Input format: the first byte is the control byte, the rest the payload.
/// - Low nibble: how many extra chunk boundaries to cut the client's bytes at (0–15).
///   Each chunk is written and then read by the server in a loop turn of its own, so
///   the NDJSON framing sees messages split anywhere.
/// - High nibble: the mode (`Mode`). Its top bit (0x80 in the byte) is origin mode:
///   the payload is TLV records (`TLVInput`) holding the client's bytes and what an
///   upstream on loopback answers (`Origin`); without it the payload is the client's
///   bytes and nothing may reach the network. Its other bits: 1 is a client presented
///   as TCP (`Client.tokenTCP`), any other value the socket owner, so existing seeds
///   keep their meaning when a mode is added.
///
/// A fresh server per input (rather than one for the whole run) keeps inputs
/// independent: the principal's state (its requests, proxy, cookies) would otherwise
/// carry over, and a crash would depend on inputs run long before it, which libFuzzer
/// cannot reproduce from the one input it saves.
///
/// What counts as a finding, besides a crash or a sanitizer report: a reply line that is
/// not a JSON-RPC 2.0 message, a connection the server does not close after the client's
/// EOF and the last reply, and a handle left open after the server's shutdown. (In
/// origin mode a server that only waits for its own timers past `Pacing`'s budget is
/// stopped instead of waited for.)
final class Harness {
    /// What the control byte's high nibble selects.
    struct Mode: Equatable {
        /// How the client reaches the server. Adding one: give it a value of the
        /// nibble's low three bits in `init(control:)` and adopt the stream accordingly
        /// in `serve`.
        enum Client {
            /// A client of the Unix socket, acting for the local principal.
            case localUnix
            /// A client that must `auth` first, as on TCP: the principal "fuzz" has the
            /// token `fuzz-token`, and a failure is answered on the next turn, not after
            /// a second, so that guesses stay cheap to run.
            case tokenTCP
        }

        var client: Client
        /// The payload is TLV records and an `Origin` answers on loopback.
        var hasOrigin: Bool

        init(control: UInt8) {
            client = (control >> 4) & 7 == 1 ? .tokenTCP : .localUnix
            hasOrigin = control & 0x80 != 0
        }
    }

    /// The harness is set up once per process: libFuzzer calls the entry point for every
    /// input on the same thread.
    nonisolated(unsafe) static let shared = Harness()

    let loop: Loop
    let logger: Logger
    let config: ServerConfig
    /// Whether to print what the server replied (`XHRPC_FUZZ_ECHO=1`), to see what an
    /// input does when replaying it.
    let echoReplies = ProcessInfo.processInfo.environment["XHRPC_FUZZ_ECHO"] != nil
    /// Where replies are read into; reused across reads.
    private var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)

    /// No client input may lead to a DNS lookup or a connect: `--allow fuzz.invalid`
    /// makes every other name and every address literal fail check 1 (no allow pattern
    /// matches), and `--deny fuzz.invalid` refuses that one name too (deny wins). Check 1
    /// runs before a transfer reaches libcurl, so nothing is resolved or connected,
    /// whatever proxy the client names. The deny ranges `0.0.0.0/0` and `::/0` would
    /// also refuse every address at connect time (check 2), should anything get there.
    /// (Checked: `strace -f -e trace=socket,connect,sendto,sendmsg,bind` over a fuzz run
    /// sees none of these calls; run it with `-detect_leaks=0`, LeakSanitizer cannot
    /// work under ptrace.) In origin mode the input's policy is `Origin.egressPolicy`:
    /// this one's allow and deny patterns with the origin's `127.0.0.1:port` added, and
    /// the same strace over the seeds sees binds and connects to 127.0.0.1 only.
    static let egressPolicy: EgressPolicy = {
        do {
            return try EgressPolicy(allow: ["fuzz.invalid"], deny: ["fuzz.invalid", "0.0.0.0/0", "::/0"])
        } catch {
            preconditionFailure("the fuzz policy's patterns are valid: \(error)")
        }
    }()

    private init() {
        // A client that goes away while replies are written must give EPIPE, not kill
        // the process (xhrpcd does the same at start).
        signal(SIGPIPE, SIG_IGN)
        guard TransferEngine.globalInit() else { preconditionFailure("curl_global_init failed") }
        do {
            loop = try Loop()
        } catch {
            preconditionFailure("cannot make the loop: \(error)")
        }
        // The engine makes its own loggers (`Logger(label:)`): they discard too.
        LoggingSystem.bootstrap { _ in DiscardingLogHandler() }
        var logger = Logger(label: "xhrpc-fuzz")
        // Every log statement is formatted (and then dropped), so its interpolations
        // run too.
        logger.logLevel = .trace
        self.logger = logger
        var config = ServerConfig()
        config.listen = []
        config.engine.egressPolicy = Harness.egressPolicy
        // Local files only, so the confinement of client-given paths is fuzzed too:
        // `sendWithFile` and `setClientCertificate` read below a directory of the
        // harness's own, which holds one small file.
        let root = Harness.makeFileRoot()
        config.uploadRoot = root
        config.certRoot = root
        // Small enough that the fuzzer reaches the "message too large" path with
        // inputs of its usual length (`make fuzz` sets -max_len above it).
        config.connection.maxMessageBytes = 8 << 10
        config.principals = [PrincipalConfig(name: "fuzz", tokenHash: TokenDigest.sha256("fuzz-token"), uid: nil,
                                             isAdmin: true, limits: PrincipalLimits())]
        config.authFailureDelay = 0
        self.config = config
    }

    /// A fresh directory with `body.txt` in it, removed when the process exits normally
    /// (a crash leaves it in the temporary directory, which is where it is).
    private static func makeFileRoot() -> String {
        var template = Array((NSTemporaryDirectory() + "/xhrpc-fuzz-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { preconditionFailure("mkdtemp: errno \(errno)") }
        let root = String(cString: made)
        guard FileManager.default.createFile(atPath: root + "/body.txt", contents: Data("hello\n".utf8)) else {
            preconditionFailure("cannot write \(root)/body.txt")
        }
        fileRoot = root
        atexit { if let root = Harness.fileRoot { try? FileManager.default.removeItem(atPath: root) } }
        return root
    }

    /// The directory of `makeFileRoot`, for the exit handler (a C function pointer,
    /// which cannot capture).
    nonisolated(unsafe) private static var fileRoot: String?

    /// Runs one input; see the type's documentation for the format.
    func run(_ data: UnsafeRawBufferPointer) {
        guard let control = data.first else { return }
        let payload = UnsafeRawBufferPointer(rebasing: data[1...])
        let mode = Mode(control: control)
        guard mode.hasOrigin else {
            serve(payload, mode: mode, boundaries: Harness.chunkBoundaries(count: payload.count, control: control),
                  origin: nil)
            return
        }
        let origin = Origin(loop: loop)
        let input = TLVInput(parsing: payload).substituting(port: origin.port)
        origin.start(input)
        let (bytes, stepEnds) = input.clientBytes
        // The steps' ends and the control byte's cuts.
        let boundaries = Set(stepEnds).union(Harness.chunkBoundaries(count: bytes.count, control: control)).sorted()
        bytes.withUnsafeBytes { serve($0, mode: mode, boundaries: boundaries, origin: origin) }
    }

    /// The ends of the chunks the payload is written in: up to `control & 15` extra cut
    /// points, spread by a generator seeded with the control byte and the length, so
    /// the same input always splits the same way. Strictly increasing and ending with
    /// `count` (empty for an empty payload): every chunk holds at least one byte, since
    /// the harness waits for the server to read each one.
    static func chunkBoundaries(count: Int, control: UInt8) -> [Int] {
        guard count > 0 else { return [] }
        var random = SplitMix64(seed: UInt64(control) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(count))
        var ends: Set<Int> = [count]
        for _ in 0..<Int(control & 15) {
            let cut = random.below(count)
            if cut > 0 { ends.insert(cut) }
        }
        return ends.sorted()
    }

    /// One connection: the server adopts one end of a socket pair; the harness writes
    /// the payload chunk by chunk into the other, half-closes it, reads every reply and
    /// waits for the server to close. Then the origin, if any, closes, and the server
    /// shuts down.
    private func serve(_ payload: UnsafeRawBufferPointer, mode: Mode, boundaries: [Int], origin: Origin?) {
        var config = config
        if let origin { config.engine.egressPolicy = origin.egressPolicy() }
        let server: Server
        do {
            server = try Server(config: config, loop: loop, logger: logger)
        } catch {
            preconditionFailure("cannot make the server: \(error)")
        }
        var fds: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            preconditionFailure("socketpair: errno \(errno)")
        }
        let client = fds[1]
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        do {
            let stream = try EventLoop.Stream.openPipe(loop: loop, fd: fds[0])
            switch mode.client {
            case .localUnix: server.adopt(stream)
            case .tokenTCP: server.adopt(PresentedAsTCP(stream))
            }
        } catch {
            preconditionFailure("cannot open the server's end: \(error)")
        }

        var replies: [UInt8] = []
        var written = 0
        var chunk = 0
        var halfClosed = false
        var serverClosed = false
        // With an origin, the next chunk (or the EOF) waits for the loop to go quiet
        // (`Pacing`): whatever the last one started has then run as far as it can.
        var mayWrite = true
        var pacing = Pacing()
        var stopped = false, stopping = false
        // Bounded: every turn either writes, reads or lets the server make progress;
        // a server that makes none until this runs out has hung on the input.
        for _ in 0..<1_000_000 {
            if !mayWrite {
                // Waiting for the quiet (below).
            } else if chunk < boundaries.count {
                let end = boundaries[chunk]
                if written < end {
                    let n = Glibc.write(client, payload.baseAddress! + written, end - written)
                    if n > 0 {
                        written += n
                    } else if n < 0, errno != EAGAIN, errno != EINTR {
                        // The server closed its end early (a message too large, say):
                        // the rest of the input is not sent.
                        chunk = boundaries.count
                    }
                }
                if chunk < boundaries.count, written == end {
                    chunk += 1
                    if origin != nil { mayWrite = false }
                }
            } else if !halfClosed {
                shutdown(client, Int32(SHUT_WR))
                halfClosed = true
            }
            serverClosed = readReplies(client, into: &replies)
            if serverClosed { break }
            guard let origin else {
                loop.runOnce()
                continue
            }
            switch pacing.next(Pacing.LoopState(loop), waitingToSend: !mayWrite, originHoldsOpen: origin.holdsConnectionOpen) {
            case .runNoWait: loop.runNoWait()
            case .runOnce: loop.runOnce()
            case .send: mayWrite = true
            case .breakStall: origin.breakStall()
            case .stopServer:
                // The second stop ends the drain at once; the server closes the connection.
                stopping = true
                server.shutdown { stopped = true }
                server.shutdown {}
            }
        }
        precondition(serverClosed, "the server did not close the connection after EOF and its last reply")
        close(client)
        origin?.close()
        if echoReplies { print(String(decoding: replies, as: UTF8.self), terminator: "") }
        Harness.checkReplies(replies)

        if !stopping { server.shutdown { stopped = true } }
        // Runs until nothing is left: every handle the server opened must be closed.
        loop.run()
        precondition(stopped, "the server's shutdown did not finish")
        let left = loop.handleNames()
        precondition(left.isEmpty, "handles left open after shutdown: \(left)")
    }

    /// Reads what the server has written so far. Returns true once the server has
    /// closed its end (EOF or reset).
    private func readReplies(_ fd: Int32, into replies: inout [UInt8]) -> Bool {
        while true {
            let n = readBuffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                replies.append(contentsOf: readBuffer[0..<n])
            } else if n == 0 {
                return true
            } else if errno == EINTR {
                continue
            } else {
                return errno != EAGAIN
            }
        }
    }

    /// Every line the server wrote must be one JSON-RPC 2.0 message or the non-empty
    /// array answering a batch; see `checkMessage`.
    static func checkReplies(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        precondition(bytes.last == UInt8(ascii: "\n"), "the last reply line is not terminated")
        for line in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast() {
            let text = String(decoding: line, as: UTF8.self)
            let value: JSONValue
            do {
                value = try JSON.decode(line)
            } catch {
                preconditionFailure("a reply line is not JSON (\(error)): \(text)")
            }
            if case .array(let responses) = value {
                precondition(!responses.isEmpty, "an empty batch reply: \(text)")
                for response in responses { checkMessage(response, isInBatch: true, line: text) }
            } else {
                checkMessage(value, isInBatch: false, line: text)
            }
        }
    }

    /// A response (`id`, and exactly one of `result` and `error`, an error having an
    /// integer `code` and a string `message`) or, outside a batch, a notification
    /// (`method`, no `id`).
    static func checkMessage(_ value: JSONValue, isInBatch: Bool, line: String) {
        guard case .object(let message) = value, message["jsonrpc"] == .string("2.0") else {
            preconditionFailure("a reply is not a JSON-RPC 2.0 object: \(line)")
        }
        if message["id"] != nil {
            let hasResult = message["result"] != nil
            let error = message["error"]
            precondition(hasResult != (error != nil), "a response needs exactly one of result and error: \(line)")
            if let error {
                guard case .object(let e) = error, case .int = e["code"], case .string = e["message"] else {
                    preconditionFailure("an error needs an integer code and a string message: \(line)")
                }
            }
        } else {
            guard !isInBatch, case .string = message["method"] else {
                preconditionFailure("a message without id must be a notification with a method: \(line)")
            }
        }
    }
}

/// Formats nothing and writes nothing: the harness wants the log statements to run
/// (their messages are built) without paying for output.
struct DiscardingLogHandler: LogHandler {
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {}
}

/// The server's end of the socket pair, presented as a TCP connection, so that the
/// server treats its client as it treats one from the network: unauthenticated until
/// `auth`. Everything else is the pipe's.
final class PresentedAsTCP: ByteStream {
    private let pipe: EventLoop.Stream

    init(_ pipe: EventLoop.Stream) { self.pipe = pipe }

    func startReading(_ onRead: @escaping (EventLoop.Stream.ReadEvent) -> Void) throws { try pipe.startReading(onRead) }
    func stopReading() { pipe.stopReading() }
    func write(_ bytes: UnsafeRawBufferPointer) { pipe.write(bytes) }
    var pendingWriteBytes: Int { pipe.pendingWriteBytes }
    var onDrain: (() -> Void)? {
        get { pipe.onDrain }
        set { pipe.onDrain = newValue }
    }
    var onWriteError: ((UVError) -> Void)? {
        get { pipe.onWriteError }
        set { pipe.onWriteError = newValue }
    }
    func close(_ completion: (() -> Void)?) { pipe.close(completion) }
    var peerDescription: String { "fuzz (as TCP)" }
    var isTCP: Bool { true }
    var peerUID: UInt32? { nil }
}
