import ArgumentParser
import Foundation
import JSON
import XHRPCClient

/// `xhrpc fetch URL`: one HTTP request through the server, the body streamed to stdout
/// or a file as it arrives (so its size is not limited by the server's buffer), with a
/// progress bar on a terminal. The options are curl's where curl has them.
struct FetchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fetch", abstract: "Fetch URL through the server and write the body to stdout (or -o FILE).")

    @OptionGroup var connection: ConnectionOptions
    @Argument(help: "An absolute http or https URL.") var url: String
    @Option(name: .customShort("X"), help: ArgumentHelp("The method (default GET, or POST with a body).", valueName: "method"))
    var method: String?
    @Option(name: .customShort("H"), help: ArgumentHelp("A request header, 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []
    @Option(name: .customShort("d"), help: ArgumentHelp("The body, or @FILE for a file's bytes (Content-Type: application/x-www-form-urlencoded unless -H says otherwise).", valueName: "data"))
    var data: String?
    @Option(name: .long, help: ArgumentHelp("A JSON body (Content-Type and Accept: application/json).", valueName: "json"))
    var json: String?
    @Option(name: .customShort("F"), help: ArgumentHelp("A multipart form field, name=value or name=@FILE (repeatable).", valueName: "field"))
    var form: [String] = []
    @Option(name: .customShort("o"), help: ArgumentHelp("Write the body to FILE instead of stdout.", valueName: "file"))
    var output: String?
    @Flag(name: .customShort("i"), help: "Print the status line and the response headers before the body.")
    var include = false
    @Option(name: .long, help: ArgumentHelp("Seconds for the whole request (default: none).", valueName: "seconds"))
    var timeout: Double?
    @Flag(name: .customShort("s"), help: "No progress bar.") var silent = false
    @Flag(name: [.customShort("f"), .long], help: "When the response's status is 400 or more, write no body and exit with status 22.")
    var fail = false

    func validate() throws {
        if [data != nil, json != nil, !form.isEmpty].filter({ $0 }).count > 1 {
            throw ValidationError("give one body: -d, --json or -F")
        }
        for h in headers where !h.contains(":") { throw ValidationError("-H wants 'Name: value', not '\(h)'") }
        for f in form where !f.contains("=") { throw ValidationError("-F wants name=value or name=@file, not '\(f)'") }
        if let json, (try? JSON.decode(json)) == nil { throw ValidationError("--json is not JSON") }
    }

    func run() async throws {
        var requestHeaders = headers.map { h -> (String, String) in
            let i = h.firstIndex(of: ":")!
            return (String(h[..<i]).trimmingCharacters(in: .whitespaces),
                    String(h[h.index(after: i)...]).trimmingCharacters(in: .whitespaces))
        }
        func setDefault(_ name: String, _ value: String) {
            if !requestHeaders.contains(where: { $0.0.lowercased() == name.lowercased() }) { requestHeaders.append((name, value)) }
        }
        var body: [UInt8]?
        if let data {
            body = try data.hasPrefix("@") ? Self.read(String(data.dropFirst())) : Array(data.utf8)
            setDefault("Content-Type", "application/x-www-form-urlencoded")
        } else if let json {
            body = Array(json.utf8)
            setDefault("Content-Type", "application/json")
            setDefault("Accept", "application/json")
        } else if !form.isEmpty {
            let (bytes, boundary) = try Self.multipart(form)
            body = bytes
            setDefault("Content-Type", "multipart/form-data; boundary=\(boundary)")
        }
        let client = try await connection.connect()
        defer { client.close() }
        _ = try await exitingOnErrors {
            try await transfer(client, method: method ?? (body == nil ? "GET" : "POST"), headers: requestHeaders, body: body)
        }
    }

    /// The request (`startRequest`), then its body, written as it comes (`readBody`).
    private func transfer(_ client: XHRPCClient, method: String, headers: [(String, String)], body: [UInt8]?) async throws -> Int {
        let handle = try await client.startRequest(url, method: method, headers: headers, body: body, timeout: timeout)
        let out: FileHandle
        if let output {
            guard FileManager.default.createFile(atPath: output, contents: nil), let f = FileHandle(forWritingAtPath: output) else {
                exitWithError("cannot write \(output)", status: ExitStatus.serverError)
            }
            out = f
        } else {
            out = FileHandle.standardOutput
        }
        var bar = ProgressBar(enabled: !silent)
        var received: Int64 = 0
        var total: Int64 = -1
        try await client.readBody(handle, maxBytesPerCall: 1 << 20, head: {
            total = try await client.expectedLength(handle) ?? -1
            if fail {
                // As curl's --fail: no body of an error response, and status 22.
                let status = try await client.call("getStatus", ["request": .string(handle)]).int64Value ?? 0
                if status >= 400 {
                    let text = try await client.call("getStatusText", ["request": .string(handle)]).stringValue ?? ""
                    exitWithError("the server answered \(status) \(text)", status: ExitStatus.httpError)
                }
            }
            if include { try await printHead(client, handle, to: out) }
        }) { bytes in
            try out.write(contentsOf: Data(bytes))
            received += Int64(bytes.count)
            bar.update(received: received, total: total)
        }
        bar.finish(received: received, total: total)
        if output != nil { try out.close() }
        let status = Int(try await client.call("getStatus", ["request": .string(handle)]).int64Value ?? 0)
        if status == 0 {
            let why = try await client.call("getStatusText", ["request": .string(handle)]).stringValue ?? ""
            exitWithError("no response: \(why)", status: ExitStatus.noResponse)
        }
        client.notify("release", ["request": .string(handle)])
        return status
    }

    private func printHead(_ client: XHRPCClient, _ handle: String, to out: FileHandle) async throws {
        let status = try await client.call("getStatus", ["request": .string(handle)]).int64Value ?? 0
        let text = try await client.call("getStatusText", ["request": .string(handle)]).stringValue ?? ""
        let headers = try await client.call("getAllResponseHeaders", ["request": .string(handle)]).stringValue ?? ""
        var head = "HTTP \(status) \(text)\r\n"
        for line in headers.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }) where !line.isEmpty {
            head += line.trimmingCharacters(in: .init(charactersIn: "\r")) + "\r\n"
        }
        try out.write(contentsOf: Data((head + "\r\n").utf8))
    }

    static func read(_ path: String) throws -> [UInt8] {
        guard let d = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
        return [UInt8](d)
    }

    /// A multipart/form-data body (RFC 7578) from `name=value` and `name=@file` fields,
    /// and its boundary (random, and checked not to occur in any part).
    static func multipart(_ fields: [String]) throws -> ([UInt8], String) {
        var parts: [(name: String, filename: String?, bytes: [UInt8])] = []
        for f in fields {
            let i = f.firstIndex(of: "=")!
            let name = String(f[..<i])
            let value = String(f[f.index(after: i)...])
            if value.hasPrefix("@") {
                let path = String(value.dropFirst())
                parts.append((name, (path as NSString).lastPathComponent, try read(path)))
            } else {
                parts.append((name, nil, Array(value.utf8)))
            }
        }
        var boundary: String
        repeat {
            boundary = "xhrpc-" + (0..<4).map { _ in String(UInt32.random(in: .min ... .max), radix: 16) }.joined()
        } while parts.contains { $0.bytes.firstRange(of: Array(boundary.utf8)) != nil }
        func quoted(_ s: String) -> String {
            s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "%22")
                .replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(of: "\n", with: "%0A")
        }
        var body: [UInt8] = []
        for p in parts {
            var head = "--\(boundary)\r\nContent-Disposition: form-data; name=\"\(quoted(p.name))\""
            if let filename = p.filename {
                head += "; filename=\"\(quoted(filename))\"\r\nContent-Type: application/octet-stream"
            }
            body += Array((head + "\r\n\r\n").utf8) + p.bytes + Array("\r\n".utf8)
        }
        body += Array("--\(boundary)--\r\n".utf8)
        return (body, boundary)
    }
}
