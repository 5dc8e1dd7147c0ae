import Foundation

/// Build tool: writes a Swift file declaring `let NAME: String` with the text of a file,
/// as a raw string literal whose delimiter cannot occur in the text.
///
/// An `@main` type rather than top-level code in main.swift: the fuzz build
/// (`swift build --sanitize fuzzer`, `make fuzz`) compiles every executable it builds,
/// this build tool included, as a library (libFuzzer brings its own `main`), and
/// top-level statements do not compile that way.
@main
enum EmbedFile {
    static func main() throws {
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
    }
}
