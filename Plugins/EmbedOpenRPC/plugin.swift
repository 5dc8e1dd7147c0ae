import PackagePlugin

/// Turns `api/openrpc.json`, and the dashboard page's files, into Swift sources of the
/// target it is applied to, so the contract file is the one source of `rpc.discover`,
/// the page is served from the binary, and neither needs a resource bundle beside it.
/// Each build command lists its file as its input: editing one rebuilds.
@main
struct EmbedOpenRPC: BuildToolPlugin {
    /// Each embedded file: its path in the package, and the name of its `String`.
    static let files = [
        ("api/openrpc.json", "openRPCDocumentText"),
        ("Sources/Service/Operations/Dashboard/index.html", "dashboardHTML"),
        ("Sources/Service/Operations/Dashboard/dashboard.js", "dashboardJS"),
        ("Sources/Service/Operations/Dashboard/dashboard.css", "dashboardCSS"),
    ]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let tool = try context.tool(named: "embed-file").url
        return Self.files.map { path, name in
            let input = context.package.directoryURL.appending(path: path)
            let output = context.pluginWorkDirectoryURL.appending(path: "Embedded-\(name).swift")
            return .buildCommand(
                displayName: "Embedding \(path)",
                executable: tool,
                arguments: [input.path(), output.path(), name],
                inputFiles: [input],
                outputFiles: [output]
            )
        }
    }
}
