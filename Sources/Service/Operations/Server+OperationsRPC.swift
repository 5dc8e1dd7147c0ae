import EventLoop
import WebSocket

/// The operations listener's `/rpc`: the WebSocket upgrade that lets a browser (the
/// dashboard page at `/`) speak JSON-RPC on the listener's own port. From the upgrade on
/// it is the ws: listener's code path (`serveWebSocket`): the same handshake and framing,
/// principals and `auth`, limits, notifications and close codes.
///
/// Who may connect (docs/security/SECURITY.md, invariant 77):
/// - It serves only where a ws: listener at the same address could listen
///   (`checkTCPAllowed`): with principals holding tokens (clients must `auth`), or on
///   loopback with `--insecure-tcp`. Otherwise it answers 403, and the page says why.
/// - A browser's upgrade carries `Origin`. Accepted are the origins listed with
///   `--ws-origin` and the page's own origins, which are derived from the listener's
///   configured address and bound port (`pageOrigins`), never from the request's `Host`
///   header: with DNS rebinding, a page of `http://evil.example:PORT` whose name now
///   resolves to this listener sends `Host: evil.example:PORT` and
///   `Origin: http://evil.example:PORT`, which agree with each other but name no origin
///   of ours, so it is refused. An upgrade without `Origin` (a program) is accepted as on
///   a ws: listener.
extension Server {
    /// Hands `c`'s stream to the WebSocket path, or says why not (nil: taken over).
    func upgradeToRPC(_ c: OperationsConnection, _ head: HTTPRequestHead) -> OperationsConnection.Response? {
        guard operationsRPCAllowed else {
            return .init(status: 403, body: Array(("/rpc needs principals with tokens in the config file, "
                + "or --insecure-tcp on a loopback address (the rule of a ws: listener)\n").utf8))
        }
        guard shutdownMachine.phase == .serving else {
            return .init(status: 503, body: Array("draining: no new connections\n".utf8))
        }
        let (stream, bytes) = c.handOver()
        serveWebSocket(stream, alreadyRead: bytes, pageOrigins: dashboardOrigins)
        return nil
    }

    /// Whether `/rpc` serves: where a ws: listener at the same address could listen.
    var operationsRPCAllowed: Bool {
        guard case .tcp(let host, let port) = config.httpListen else { return false }
        return (try? checkTCPAllowed(.ws(host: host, port: port))) != nil
    }

    /// The origins of pages loaded from the operations listener, as bound.
    var dashboardOrigins: [String] {
        guard case .tcp(let host, let port) = operationsAddress else { return [] }
        return Self.pageOrigins(host: host, port: port)
    }

    /// The origins (RFC 6454 serialisation: `http://HOST[:PORT]`, the port left out when
    /// it is 80) under which a browser shows a page it loaded from an HTTP listener at
    /// `host`:`port`. The configured host names one; a listener on 127.0.0.1 or ::1 is
    /// also reached as `localhost`, and one on localhost as 127.0.0.1 and [::1] (browsers resolve `localhost` to
    /// loopback without asking DNS, so no one else can answer for it), and a listener on
    /// every address (0.0.0.0, ::) is known here only by those loopback forms. Any other
    /// name under which operators reach it goes in `--ws-origin`.
    static func pageOrigins(host: String, port: Int) -> [String] {
        var hosts: [String]
        switch host {
        case "0.0.0.0": hosts = ["localhost", "127.0.0.1"]
        case "::": hosts = ["localhost", "127.0.0.1", "::1"]
        default:
            hosts = [host]
            // Only the addresses `localhost` stands for: 127.0.0.2 is another listener's.
            switch host {
            case "127.0.0.1", "::1": hosts.append("localhost")
            case "localhost": hosts += ["127.0.0.1", "::1"]
            default: break
            }
        }
        var origins: [String] = []
        for h in hosts {
            let name = h.contains(":") ? "[\(h)]" : h
            let origin = "http://" + name.lowercased() + (port == 80 ? "" : ":\(port)")
            if !origins.contains(origin) { origins.append(origin) }
        }
        return origins
    }
}
