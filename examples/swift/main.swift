// Fetch a URL through xhrpcd with the Swift client library (XHRPCClient).
//
//     swift run xhrpc-example http://127.0.0.1:8080/hello.txt
//
// The server is found on its default socket, or at $XHRPC_SOCKET.
import Foundation
import XHRPCClient

let url = CommandLine.arguments.dropFirst().first ?? "http://127.0.0.1:8080/hello.txt"
let socket = ProcessInfo.processInfo.environment["XHRPC_SOCKET"]
do {
    let client = try await XHRPCClient.connect(.unix(path: socket))
    defer { client.close() }
    let response = try await client.fetch(url)
    print("fetch:", response.status, response.statusText, response.body.count, "bytes")
    let info = try await client.call("server.info")
    print("server:", info["name"]?.stringValue ?? "?", info["version"]?.stringValue ?? "?")
} catch {
    FileHandle.standardError.write(Data("error: \(error)\n".utf8))
    exit(1)
}
