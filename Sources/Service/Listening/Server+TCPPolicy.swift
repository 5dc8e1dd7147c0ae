/// Where TCP, TLS and WebSocket may listen: the one rule that keeps an unauthenticated TCP
/// listener off the network.
extension Server {
    /// Whether a TCP, TLS, ws: or wss: listener at `address` may open: with principals holding tokens, always
    /// (clients must `auth`); without, only on loopback and only with `--insecure-tcp`.
    func checkTCPAllowed(_ address: ListenAddress) throws {
        guard principalTable.tokens.isEmpty else { return }
        let host: String
        switch address {
        case .unix: return
        case .tcp(let h, _), .tls(let h, _), .ws(let h, _), .wss(let h, _): host = h
        }
        guard ListenAddress.isLoopback(host) else {
            throw StartupError.tcpNeedsTokens(address)
        }
        guard config.insecureTCP else {
            throw StartupError.tcpNeedsPrincipals(address)
        }
    }
}
