import ArgumentParser
import Foundation
import JSON
import XHRPCClient

/// `xhrpc`: the command-line client of xhrpcd.
///
/// Exit status (the same for every subcommand):
/// - 0: done (for `fetch`, a response arrived, whatever its status, unless `--fail`);
/// - 1: the server answered the call with an error (printed on stderr);
/// - 64: the command line is wrong (EX_USAGE, argument-parser's usage error);
/// - 3: the server could not be reached, or the connection ended early;
/// - 4: `fetch`: the request got no response; `socket`: the socket could not be
///   opened (refused, timed out, denied…; the reason is printed);
/// - 22: `fetch --fail`: the response's status is 400 or more (curl's code).
@main
struct XHRPCCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xhrpc",
        abstract: "Talk to xhrpcd: call any method, fetch URLs with a progress bar, watch requests, open sockets.",
        discussion: """
            The server is found on its default Unix socket ($XDG_RUNTIME_DIR/xhrpc.sock, else \
            /tmp/xhrpc-<uid>.sock) unless --socket or --tcp says otherwise.
            Exit status: 0 done; 1 the server answered with an error; 64 bad command line; 3 the \
            server cannot be reached; 4 fetch got no response or socket could not connect; 22 fetch --fail and status >= 400.
            """,
        subcommands: [CallCommand.self, FetchCommand.self, WatchCommand.self, DiscoverCommand.self, SocketCommand.self])
}

/// The exit statuses, in one place.
enum ExitStatus {
    static let serverError: Int32 = 1
    static let unreachable: Int32 = 3
    static let noResponse: Int32 = 4
    static let httpError: Int32 = 22
}

/// How to reach the server: every subcommand takes these.
struct ConnectionOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The server's Unix socket (default: the server's default path).", valueName: "path"))
    var socket: String?

    @Option(name: .long, help: ArgumentHelp("Connect over TCP instead: HOST:PORT ([v6]:PORT for IPv6).", valueName: "host:port"))
    var tcp: String?

    @Option(name: .customLong("token-file"), help: ArgumentHelp("A file holding the token to call auth with (TCP and TLS).", valueName: "file"))
    var tokenFile: String?

    @Flag(name: .long, help: "Use TLS on the TCP connection (verified against --ca-file, else the system's CAs).")
    var tls = false

    @Option(name: .customLong("ca-file"), help: ArgumentHelp("PEM file of the CAs that sign the server's certificate.", valueName: "file"))
    var caFile: String?

    func validate() throws {
        if socket != nil, tcp != nil { throw ValidationError("give --socket or --tcp, not both") }
        if tls, tcp == nil { throw ValidationError("--tls needs --tcp HOST:PORT") }
        if caFile != nil, !tls { throw ValidationError("--ca-file goes with --tls") }
    }

    var endpoint: Endpoint {
        get throws {
            guard let tcp else { return .unix(path: socket) }
            var token: String?
            if let tokenFile {
                guard let text = try? String(contentsOfFile: tokenFile, encoding: .utf8) else {
                    throw ValidationError("cannot read the token file \(tokenFile)")
                }
                token = text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            guard let e = Endpoint.parse((tls ? "tls:" : "tcp:") + tcp, token: token, caFile: caFile) else {
                throw ValidationError("--tcp wants HOST:PORT, not \(tcp)")
            }
            return e
        }
    }

    /// Connects, or exits with status 3 and the reason.
    func connect() async throws -> XHRPCClient {
        do {
            return try await XHRPCClient.connect(try endpoint)
        } catch let e as XHRPCError {
            if e.code != nil { exitWithError(e, status: ExitStatus.serverError) }
            exitWithError(e, status: ExitStatus.unreachable)
        }
    }
}

/// Prints `error` on stderr and exits with `status`.
func exitWithError(_ error: Any, status: Int32) -> Never {
    FileHandle.standardError.write(Data("xhrpc: \(error)\n".utf8))
    exit(status)
}

/// Runs `body`, mapping client errors to the documented exit statuses.
func exitingOnErrors<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let e as XHRPCError {
        exitWithError(e, status: e.code != nil ? ExitStatus.serverError : ExitStatus.unreachable)
    }
}

/// Compact JSON and a newline on stdout.
func printJSON(_ value: JSONValue) {
    FileHandle.standardOutput.write(Data(JSON.encode(value) + [UInt8(ascii: "\n")]))
}

struct CallCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "call", abstract: "Call METHOD with PARAMS (a JSON object or array) and print the result as JSON.")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "The method, e.g. server.info.") var method: String
    @Argument(help: "Its parameters as JSON, e.g. '{\"request\":\"r1\"}'.") var params: String?

    func run() async throws {
        var parsed: JSONValue?
        if let params {
            guard let v = try? JSON.decode(params), v.objectValue != nil || v.arrayValue != nil else {
                throw ValidationError("PARAMS must be a JSON object or array")
            }
            parsed = v
        }
        let client = try await connection.connect()
        defer { client.close() }
        printJSON(try await exitingOnErrors { try await client.call(method, parsed) })
    }
}

struct DiscoverCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "discover", abstract: "List the server's methods (rpc.discover), one per line with its summary.")

    @OptionGroup var connection: ConnectionOptions
    @Flag(name: .long, help: "Print the whole OpenRPC document as JSON.") var json = false

    func run() async throws {
        let client = try await connection.connect()
        defer { client.close() }
        let doc = try await exitingOnErrors { try await client.call("rpc.discover") }
        if json { return printJSON(doc) }
        for m in doc["methods"]?.arrayValue ?? [] {
            let name = m["name"]?.stringValue ?? "?"
            let summary = m["summary"]?.stringValue ?? ""
            print(name.padding(toLength: max(name.count, 26), withPad: " ", startingAt: 0) + " " + summary)
        }
    }
}
