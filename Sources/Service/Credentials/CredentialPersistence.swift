import Foundation
import HTTPEngine
import JSON
import JSONRPC
import Logging

/// Keeps each principal's credentials (`CredentialTable`) on disk when the server has a
/// state directory: `credentials-<principal>.json`, mode 0600, written atomically and
/// trusted on load only as `StateDirectory` says (regular file, the server's own,
/// nobody else may read it). Loaded when the principal appears; saved at once after
/// every change, before the call that changed it is answered, so a credential the
/// client was told is stored (or removed) is so on disk too.
///
/// The passwords are in the file in clear, as in a netrc file: the server must send
/// them to origins that ask, so it must be able to read them back, and a key kept
/// beside the file would protect nothing the file's mode does not. docs/security/SECURITY.md
/// says so. Without a state directory the credentials live in memory only.
///
/// Confined to the loop's thread.
final class CredentialPersistence {
    private let state: StateDirectory?
    private let logger: Logger

    /// Largest store read at start; a bigger file is refused as not ours. A full table
    /// (`CredentialTable.maxEntries`) of the longest entries `credentials.set` takes
    /// (`maxFieldBytes`), every byte written as a `\u` escape, stays under 80 MB.
    static let maxBytes = 128 << 20

    /// `stateDirectory` nil: memory only. Throws when the directory cannot be made.
    init(stateDirectory: String?, logger: Logger) throws(StartupError) {
        self.logger = logger
        state = try stateDirectory.map { dir throws(StartupError) in try StateDirectory(dir) }
    }

    func path(for principal: String) -> String? {
        state?.file(.credentials, principal: principal, ext: "json")
    }

    /// Loads `p`'s store into its table. A store that cannot be read or trusted, or an
    /// entry that cannot be read, is logged (never with a password) and skipped.
    func attach(_ p: Principal) {
        guard let state, let path = path(for: p.name) else { return }
        switch state.load(path, maxBytes: CredentialPersistence.maxBytes) {
        case .missing:
            return
        case .refused(let why):
            logger.warning("credential store not loaded: \(why)")
        case .bytes(let bytes):
            guard let doc = try? JSON.decode(bytes), let entries = doc.objectValue?["credentials"]?.arrayValue else {
                logger.warning("credential store \(path) is not a JSON object with a \"credentials\" array; not loaded (the next change replaces it)")
                return
            }
            var skipped = 0
            for e in entries {
                if let c = CredentialPersistence.credential(from: e), p.credentials.set(c) { continue }
                skipped += 1
            }
            if skipped > 0 { logger.warning("credential store \(path): \(skipped) entries could not be read and were skipped") }
            logger.info("loaded \(entries.count - skipped) credentials of principal \(p.name) from \(path)")
        }
    }

    /// Writes `p`'s table now. Throws an internal error (the change is made in memory
    /// but not on disk) that names the file, never a password.
    func save(_ p: Principal) throws(RPCError) {
        guard let state, let path = path(for: p.name) else { return }
        let doc: JSONValue = [
            "comment": .string("The stored credentials of xhrpcd principal \"\(p.name)\". Edit only while xhrpcd is stopped."),
            "version": 1,
            "credentials": .array(p.credentials.sorted.map(CredentialPersistence.entry)),
        ]
        do {
            try state.save(JSON.encode(doc) + [0x0A], to: path, kind: .credentials, what: "credentials")
        } catch {
            logger.error("\(error)")
            throw RPCError.internalError("the credentials were changed in memory but not saved: \(error)")
        }
    }

    /// One entry of the file: the list entry and the password.
    static func entry(_ c: StoredCredential) -> JSONValue {
        guard var o = c.listEntry.objectValue else { return .null }
        o["password"] = .string(c.password)
        return .object(o)
    }

    /// An entry read back, checked as `credentials.set` checks its parameters.
    static func credential(from v: JSONValue) -> StoredCredential? {
        guard let o = v.objectValue, let scheme = o["scheme"]?.stringValue, scheme == "http" || scheme == "https",
              let host = o["host"]?.stringValue, !host.isEmpty, let port = o["port"]?.int64Value, (1...65535).contains(port),
              let user = o["user"]?.stringValue, let password = o["password"]?.stringValue,
              HTTPSyntax.isFieldValue(user), HTTPSyntax.isFieldValue(password) else { return nil }
        let realm = o["realm"]?.stringValue
        var auth: AuthScheme?
        if let a = o["auth"], !a.isNull {
            guard let word = a.stringValue, let scheme = AuthScheme(rawValue: word) else { return nil }
            auth = scheme
        }
        return StoredCredential(space: ProtectionSpace(scheme: scheme, host: host, port: Int(port), realm: realm),
                                auth: auth, user: user, password: password)
    }
}
