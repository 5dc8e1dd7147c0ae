import Foundation

// Build tool: writes a Swift file declaring `let NAME: String` with the text of a file,
// as a raw string literal whose delimiter cannot occur in the text.
let args = CommandLine.arguments
guard args.count == 4 else {
    FileHandle.standardError.write(Data("usage: embed-file INPUT OUTPUT NAME\n".utf8))
    exit(2)
}
let text = try String(contentsOfFile: args[1], encoding: .utf8)
var hashes = "#"
while text.contains("\"" + hashes) { hashes += "#" }
let source = """
// Generated at build time from \(URL(fileURLWithPath: args[1]).lastPathComponent); do not edit.
let \(args[3]): String = \(hashes)\"\"\"
\(text)
\"\"\"\(hashes)

"""
try source.write(toFile: args[2], atomically: true, encoding: .utf8)
