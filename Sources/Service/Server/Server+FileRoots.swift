import JSONRPC

/// Where each principal's files are (docs/guide/files.md, "Roots per principal"): one
/// principal never reads, replaces or uploads another's.
extension Server {
    /// The root below which `p` names files for `purpose` (`FileRoot.of`); nil when
    /// none is configured.
    func fileRoot(_ purpose: FileRoot.Purpose, for p: Principal) -> FileRoot? {
        FileRoot.of(purpose, principal: p.name, config: config)
    }

    /// As `fileRoot`, or `forbidden` saying what `what` needs.
    func requireFileRoot(_ purpose: FileRoot.Purpose, for p: Principal, _ what: String) throws(RPCError) -> FileRoot {
        guard let root = fileRoot(purpose, for: p) else {
            throw ServiceError.needsConfiguration("\(what) needs the server to be started with \(purpose.flag)"
                                                  + " (or a \"\(purpose.configKey)\" of the principal in the config file)")
        }
        return root
    }
}
