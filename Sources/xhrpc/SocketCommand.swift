import ArgumentParser
import Foundation
import JSON
import XHRPCClient

/// `xhrpc socket HOST PORT`: netcat through xhrpcd. Opens a raw socket (TCP, or TLS with
/// `--ssl`) that the server makes with its egress policy and TLS checks, copies standard
/// input to it and what it receives to standard output, until the peer closes.
/// (`--ssl`, not `--tls`, which is the connection to the server.)
///
/// After standard input ends the socket stays open for the peer's answer: until the
/// peer closes, or `--quit-after` seconds after the end of input (netcat's `-q`).
struct SocketCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "socket",
        abstract: "Open a TCP or TLS socket through the server and connect it to standard input and output.",
        discussion: """
            Example: printf 'PING\\r\\n' | xhrpc socket --quit-after 1 127.0.0.1 6379
            Exit status 4 when the socket cannot be opened (refused, timed out, denied by the \
            egress policy, TLS failure…; the reason is printed).
            """)

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The host to connect to (a name or an IP literal).") var host: String
    @Argument(help: "The port.") var port: Int
    @Flag(name: .long, help: "TLS to the peer, verified as the server verifies https (--tls is the connection to the server).")
    var ssl = false
    @Flag(name: .long, help: "With --ssl: accept any certificate (disablePeerVerification).") var insecure = false
    @Option(name: .long, help: ArgumentHelp("Seconds the connect may take (default 30).", valueName: "s")) var timeout: Double?
    @Option(name: [.customShort("q"), .long],
            help: ArgumentHelp("After the end of standard input, close this many seconds later (default: when the peer closes).", valueName: "s"))
    var quitAfter: Double?

    func validate() throws {
        guard (1...65535).contains(port) else { throw ValidationError("the port must be 1 to 65535") }
        if insecure, !ssl { throw ValidationError("--insecure needs --ssl") }
    }

    func run() async throws {
        let client = try await connection.connect()
        defer { client.close() }
        let create: JSONValue = ["host": .string(host), "port": .int(Int64(port)), "ssl": .bool(ssl)]
        let handle = try await exitingOnErrors { try await client.call("socket.create", create)["socket"] ?? .null }
        let named: JSONObject = ["socket": handle]
        if insecure { _ = try await exitingOnErrors { try await client.call("socket.disablePeerVerification", .object(named)) } }
        var connect = named
        if let timeout { connect["timeout"] = .double(timeout) }
        _ = try await exitingOnErrors { try await client.call("socket.connect", .object(connect)) }

        let input = StandardInputPump()
        var opened = false
        for await n in client.notifications where n.params["socket"] == handle {
            switch n.method {
            case "socket.onOpen":
                opened = true
                input.start { chunk in
                    guard let chunk else {
                        guard let quitAfter else { return }
                        try? await Task.sleep(nanoseconds: UInt64(max(quitAfter, 0) * 1e9))
                        _ = try? await client.call("socket.disconnect", .object(named))
                        return
                    }
                    await Self.write(chunk, to: named, through: client)
                }
            case "socket.onRead":
                try await drain(named, client)
            case "socket.onErr":
                let word = n.params["error"]?.stringValue ?? "error"
                let message = n.params["message"]?.stringValue ?? ""
                FileHandle.standardError.write(Data("xhrpc socket: \(word): \(message)\n".utf8))
                if !opened { throw ExitCode(ExitStatus.noResponse) }
            case "socket.onClose":
                try await drain(named, client)
                throw ExitCode(opened ? 0 : ExitStatus.noResponse)
            default:
                continue
            }
        }
        exitWithError("the server closed the connection", status: ExitStatus.unreachable)
    }

    /// Copies everything received so far to standard output.
    private func drain(_ named: JSONObject, _ client: XHRPCClient) async throws {
        while true {
            let got = try await exitingOnErrors { try await client.call("socket.read", .object(named)) }
            guard let text = got["data"]?.stringValue, let bytes = Data(base64Encoded: text), !bytes.isEmpty else { return }
            FileHandle.standardOutput.write(bytes)
        }
    }

    /// Writes `chunk`, waiting while the socket's outbound queue is full.
    private static func write(_ chunk: Data, to named: JSONObject, through client: XHRPCClient) async {
        var params = named
        params["dataBase64"] = .string(chunk.base64EncodedString())
        while true {
            do {
                _ = try await client.call("socket.write", .object(params))
                return
            } catch let e as XHRPCError where e.reason == "limit_exceeded" {
                try? await Task.sleep(nanoseconds: 20_000_000)
            } catch {
                // Not Open any more: the notifications say why and end the command.
                return
            }
        }
    }
}

/// Reads standard input on a thread of its own (a read blocks) and hands each chunk, in
/// order, to an async consumer; nil once at the end of input.
final class StandardInputPump: @unchecked Sendable {
    private var started = false

    func start(_ consume: @escaping @Sendable (Data?) async -> Void) {
        guard !started else { return }
        started = true
        let (chunks, sink) = AsyncStream<Data?>.makeStream()
        Thread.detachNewThread {
            while true {
                let data = FileHandle.standardInput.availableData
                if data.isEmpty {
                    sink.yield(nil)
                    sink.finish()
                    return
                }
                sink.yield(data)
            }
        }
        Task {
            for await chunk in chunks { await consume(chunk) }
        }
    }
}
