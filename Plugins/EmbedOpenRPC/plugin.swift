import PackagePlugin

/// Turns `api/openrpc.json` into a Swift source of the target it is applied to, so the
/// contract file is the one source of `rpc.discover` and the binary needs no resource
/// bundle beside it. The build command lists the file as its input: editing it rebuilds.
@main
struct EmbedOpenRPC: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let input = context.package.directoryURL.appending(path: "api/openrpc.json")
        let output = context.pluginWorkDirectoryURL.appending(path: "OpenRPCDocument.swift")
        return [
            .buildCommand(
                displayName: "Embedding api/openrpc.json",
                executable: try context.tool(named: "embed-file").url,
                arguments: [input.path(), output.path(), "openRPCDocumentText"],
                inputFiles: [input],
                outputFiles: [output]
            )
        ]
    }
}
