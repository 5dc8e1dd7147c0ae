import ArgumentParser
import Foundation
import JSON
import XHRPCClient

/// `xhrpc watch`: subscribes to the principal's requests (all of them, or one) and
/// prints each state change and progress report as it happens, one line each, until
/// interrupted or the server closes the connection.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch", abstract: "Print the state changes and progress of requests as they happen.")

    @OptionGroup var connection: ConnectionOptions
    @Option(name: .long, help: ArgumentHelp("Watch this request only.", valueName: "handle")) var request: String?
    @Flag(name: .long, help: "Watch every request of the principal (the default).") var all = false
    @Flag(name: .long, help: "Print each notification as its JSON-RPC message.") var json = false

    func validate() throws {
        if request != nil, all { throw ValidationError("give --request or --all, not both") }
    }

    func run() async throws {
        let client = try await connection.connect()
        defer { client.close() }
        var params: JSONObject = ["events": ["stateChange", "progress"]]
        if let request { params["request"] = .string(request) } else { params["all"] = true }
        let sub = try await exitingOnErrors { try await client.call("subscribe", .object(params)) }
        FileHandle.standardError.write(Data("watching \(request ?? "every request") (subscription \(sub["subscription"]?.stringValue ?? "?"))\n".utf8))
        for await n in client.notifications {
            if json {
                printJSON(["jsonrpc": "2.0", "method": .string(n.method), "params": n.params])
            } else {
                FileHandle.standardOutput.write(Data((Self.line(n) + "\n").utf8))
            }
        }
    }

    /// `r1 DONE 200 OK`, `r1 SENT (attempt 2)` for a retry, `r1 progress 1.0 MiB / 4.0 MiB`
    /// (`/ unknown` when the size is not known), or the method and its params.
    static func line(_ n: ServerNotification) -> String {
        let p = n.params
        let handle = p["request"]?.stringValue ?? "-"
        switch n.method {
        case "onStateChange":
            var s = "\(handle) \(p["stateName"]?.stringValue ?? "?")"
            if let status = p["status"]?.int64Value, status != 0 { s += " \(status)" }
            if let text = p["statusText"]?.stringValue, !text.isEmpty { s += " \(text)" }
            if let attempt = p["attempt"]?.int64Value, attempt > 1 { s += " (attempt \(attempt))" }
            return s
        case "onProgress":
            let got = p["totalBytesReceived"]?.int64Value ?? 0
            // -1: the server does not know the size (no Content-Length, a chunked body).
            let total = p["totalBytesExpectedToReceive"]?.int64Value ?? -1
            var s = "\(handle) progress \(ProgressBar.size(got))"
            s += total < 0 ? " / unknown" : " / \(ProgressBar.size(total))"
            if let up = p["totalBytesWritten"]?.int64Value, up > 0 { s += " (sent \(ProgressBar.size(up)))" }
            return s
        default:
            return "\(n.method) \(String(decoding: JSON.encode(p), as: UTF8.self))"
        }
    }
}
