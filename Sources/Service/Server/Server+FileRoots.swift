import JSONRPC

/// Where each principal's files are (docs/FILES.md, "Roots per principal"): one
/// principal never reads, replaces or uploads another's.
extension Server {
    /// The root below which `p` names files for `purpose`: its own from the config file,
    /// else its folder (named by it, made 0700 on first use) below the server's root;
    /// the socket owner (`local`) keeps the server's root itself, less the folders of the
    /// principals that share it. Nil when neither is configured.
    func fileRoot(_ purpose: FileRoot.Purpose, for p: Principal) -> FileRoot? {
        func own(_ c: PrincipalConfig) -> String? { purpose == .upload ? c.uploadRoot : c.downloadRoot }
        if let entry = config.principals.first(where: { $0.name == p.name }), let directory = own(entry) {
            return FileRoot(purpose: purpose, directory: directory, subfolder: nil)
        }
        guard let shared = purpose == .upload ? config.uploadRoot : config.downloadRoot else { return nil }
        guard p.name == PrincipalTable.ownerName else {
            return FileRoot(purpose: purpose, directory: shared, subfolder: p.name)
        }
        let sharing = config.principals.filter { own($0) == nil }.map(\.name)
        return FileRoot(purpose: purpose, directory: shared, subfolder: nil, reserved: Set(sharing))
    }

    /// As `fileRoot`, or `forbidden` saying what `what` needs.
    func requireFileRoot(_ purpose: FileRoot.Purpose, for p: Principal, _ what: String) throws(RPCError) -> FileRoot {
        guard let root = fileRoot(purpose, for: p) else {
            throw ServiceError.needsConfiguration("\(what) needs the server to be started with \(purpose.flag)")
        }
        return root
    }
}
