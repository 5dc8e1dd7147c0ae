/// Why the server refuses to start, one case per reason, each said (`description`) so
/// that the operator knows what to change. Every check that can refuse runs before
/// any listener opens (`Server.start`), so a refused start never accepts anyone.
public enum StartupError: Error, CustomStringConvertible {
    // The principals of the config file (`PrincipalTable`).
    case invalidPrincipalName(String)
    case reservedPrincipalName(serverUID: UInt32)
    case duplicatePrincipal(String)
    case unreachablePrincipal(String)
    case duplicateUID(UInt32)
    case duplicateToken(principal: String)
    // TCP and TLS listeners.
    case tcpNeedsTokens(ListenAddress)
    case tcpNeedsPrincipals(ListenAddress)
    case tlsNeedsCertificate(ListenAddress)
    case tlsUnusable(ListenAddress, reason: String)
    // The operations listener (--http-listen).
    case httpListenNotTCP(ListenAddress)
    case httpListenNeedsTokens(ListenAddress)
    case httpCannotListen(ListenAddress, reason: String)
    // Unix socket files.
    case cannotListen(path: String, reason: String)
    case notASocket(path: String)
    case socketInUse(path: String)
    // --state-dir.
    case stateDirNotADirectory(String)
    case stateDirUnusable(String, reason: String)

    public var description: String {
        switch self {
        case .invalidPrincipalName(let name):
            "principal '\(name)': a name is 1 to 64 of A-Z a-z 0-9 . _ - and does not start with a dot"
        case .reservedPrincipalName(let uid):
            "principal 'local' is the built-in socket owner's; give it another name and \"uid\": \(uid)"
        case .duplicatePrincipal(let name): "principal '\(name)' is declared twice"
        case .unreachablePrincipal(let name): "principal '\(name)' needs a \"tokenSha256\" or a \"uid\" to be reachable"
        case .duplicateUID(let uid): "uid \(uid) is given to two principals"
        case .duplicateToken(let name): "principal '\(name)' has the same token as another principal"
        case .tcpNeedsTokens(let address):
            "refusing to listen on \(address): TCP on a non-loopback address needs principals with tokens (the config file's \"principals\"); see docs/operations/listeners-and-principals.md"
        case .tcpNeedsPrincipals(let address):
            "refusing to listen on \(address) without principals: declare principals with tokens in the config file (\"principals\"), or pass --insecure-tcp to let every local TCP client act as the socket owner"
        case .tlsNeedsCertificate(let address):
            "refusing to listen on \(address): TLS needs a certificate and its key (--tls-cert FILE and --tls-key FILE, or the config keys \"tlsCert\" and \"tlsKey\")"
        case .tlsUnusable(let address, let reason): "cannot listen on \(address): \(reason)"
        case .httpListenNotTCP(let address):
            "refusing --http-listen \(address): the operations listener is HTTP on tcp:HOST:PORT"
        case .httpListenNeedsTokens(let address):
            "refusing --http-listen \(address): on a non-loopback address the operations listener needs principals with tokens (the config file's \"principals\"), and /metrics then asks for an admin's token; or listen on loopback"
        case .httpCannotListen(let address, let reason): "cannot listen on --http-listen \(address): \(reason)"
        case .cannotListen(let path, let reason): "cannot listen on unix:\(path): \(reason)"
        case .notASocket(let path): "unix:\(path) exists and is not a socket; remove it or choose another path"
        case .socketInUse(let path): "another server is listening on unix:\(path); stop it or choose another path"
        case .stateDirNotADirectory(let dir):
            "--state-dir \(dir) is not a directory; name a directory (it is created 0700 if missing)"
        case .stateDirUnusable(let dir, let reason): "cannot create --state-dir \(dir): \(reason)"
        }
    }
}
