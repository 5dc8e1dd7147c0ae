import EventLoop
import Foundation
import JSON
import JSONRPC
import SecureStream
import WebSocket

/// Listening and admitting connections: the listeners open only after every address
/// and certificate is checked, each accepted stream becomes an `RPCConnection`, and the
/// connection limits are applied (after reaping connections whose clients have gone).
extension Server {
    /// Opens every configured listener. Returns their addresses as bound (a TCP port 0
    /// becomes the port the system chose).
    @discardableResult
    public func start() throws -> [ListenAddress] {
        var bound: [ListenAddress] = []
        // Before any listener opens, so a refused address or a bad certificate leaves
        // nothing behind and no client ever reaches a server that is about to exit.
        let tls = try makeTLSContext()
        for address in config.listen { try checkTCPAllowed(address) }
        try checkOperationsListenAllowed()
        // First, so that /readyz answers 503 until the JSON-RPC listeners are open.
        operationsAddress = try startOperationsListener()
        for address in config.listen {
            let listener: Listener
            let actual: ListenAddress
            var context: TLSContext?
            switch address {
            case .unix(let path):
                listener = try UnixSocketFile.listen(loop: loop, path: path, mode: config.unixSocketMode)
                actual = address
            case .tcp(let host, let port), .tls(let host, let port), .ws(let host, let port), .wss(let host, let port):
                listener = try Listener.tcp(loop: loop, host: host, port: port)
                let boundPort = listener.boundPort ?? port
                if address.usesTLS { context = tls }
                switch address {
                case .tls: actual = .tls(host: host, port: boundPort)
                case .ws: actual = .ws(host: host, port: boundPort)
                case .wss: actual = .wss(host: host, port: boundPort)
                default: actual = .tcp(host: host, port: boundPort)
                }
            }
            let webSocket = address.isWebSocket
            try listener.listen { [unowned self] result in accepted(result, tls: context, webSocket: webSocket) }
            listeners.append((address, listener))
            bound.append(actual)
            logger.info("listening on \(actual)")
        }
        lifetime.start()
        return bound
    }

    /// The TLS settings of the `tls:` and `wss:` listeners, loaded once; nil when there is none.
    /// Every failure is a start-up error that names the flag or the file at fault.
    private func makeTLSContext() throws -> TLSContext? {
        guard let first = config.listen.first(where: { $0.usesTLS }) else { return nil }
        guard let certificate = config.tlsCertificateFile, let key = config.tlsKeyFile else {
            throw StartupError.tlsNeedsCertificate(first)
        }
        do {
            return try TLSContext(certificateFile: certificate, keyFile: key)
        } catch {
            throw StartupError.tlsUnusable(first, reason: error.description)
        }
    }

    private func accepted(_ result: Result<EventLoop.Stream, UVError>, tls: TLSContext?, webSocket: Bool) {
        let stream: EventLoop.Stream
        switch result {
        case .failure(let e):
            logger.warning("accept failed: \(e)")
            return
        case .success(let s):
            stream = s
        }
        stream.setKeepAlive(idleSeconds: config.tcpKeepalive)
        // The handshake runs inside the TLS stream; the connection sees plaintext.
        var transport: any ByteStream = stream
        if let tls {
            do {
                transport = try TLSStream(wrapping: stream, context: tls, handshakeTimeout: config.tlsHandshakeTimeout)
            } catch {
                logger.warning("cannot start TLS with \(stream.peerDescription): \(error)")
                stream.close()
                return
            }
        }
        guard webSocket else { return adopt(transport) }
        serveWebSocket(transport)
    }

    /// Serves `transport` as a WebSocket client connection: the ws: and wss: listeners'
    /// clients, and the operations listener's `/rpc` (which passes the head it read as
    /// `alreadyRead`, and its page's own origins as `pageOrigins`). The upgrade and the
    /// framing run inside the WebSocket stream; the connection sees the messages' bytes,
    /// one per line, and is adopted like any other.
    func serveWebSocket(_ transport: any ByteStream, alreadyRead: [UInt8] = [], pageOrigins: [String] = []) {
        let settings = WebSocketStream.Settings(allowedOrigins: config.wsOrigins + pageOrigins,
                                                maxMessageBytes: config.connection.maxMessageBytes,
                                                handshakeTimeout: config.tlsHandshakeTimeout)
        do {
            adopt(try WebSocketStream(wrapping: transport, loop: loop, settings: settings, alreadyRead: alreadyRead))
        } catch {
            logger.warning("cannot start WebSocket with \(transport.peerDescription): \(error)")
            transport.close()
        }
    }

    /// The transport's name in the connection metrics.
    private static func transportName(_ stream: any ByteStream) -> String {
        if let ws = stream as? WebSocketStream { return ws.overTLS ? "wss" : "ws" }
        return stream is TLSStream ? "tls" : stream.isTCP ? "tcp" : "unix"
    }

    /// Serves a connected stream as a client connection, as if a listener had accepted
    /// it: the listeners use it (with a TLS stream for a tls: listener), and so does the
    /// fuzzer, which feeds one end of a socket pair with no network at all.
    public func adopt(_ stream: any ByteStream) {
        guard shutdownMachine.phase == .serving else { stream.close(); return }
        let id = nextConnectionID
        nextConnectionID += 1
        let conn = RPCConnection(id: id, stream: stream, dispatcher: dispatcher, limits: config.connection, logger: logger,
                                 coalescer: coalescer)
        if connections.count >= config.maxConnections { reapClosedConnections { _ in true } }
        if connections.count >= config.maxConnections {
            refuse(conn, ServiceError.limitExceeded("maxConnections", max: config.maxConnections,
                                                    "Too many connections (limit \(config.maxConnections)); try again later"))
            return
        }
        if let p = identify(stream) {
            do {
                try makeRoomForConnection(p)
            } catch {
                refuse(conn, error)
                return
            }
            conn.context = ClientSession(connection: conn, principal: p)
        } else {
            awaitAuthentication(conn)
        }
        conn.onClose = { [unowned self] c in connectionClosed(c) }
        connections[id] = conn
        totalConnections += 1
        metrics.connectionOpened(id: id, transport: Self.transportName(stream))
        do {
            try conn.start()
            logger.debug("connection \(id) from \(conn.peerDescription)")
        } catch {
            logger.warning("cannot read from \(conn.peerDescription): \(error)")
            conn.close(reason: nil)
        }
    }

    /// Checks that principal `p` may have one more connection, first ending those of
    /// its connections whose clients have already gone: a connection is counted from
    /// accept until its end of input is read, and the loop accepts a whole backlog
    /// before it reads, so after a burst of connect-and-close the count holds clients
    /// that no longer exist (`RPCConnection.endIfPeerClosed`).
    func makeRoomForConnection(_ p: Principal) throws(RPCError) {
        if p.connections >= p.limits.connections {
            reapClosedConnections { ($0.context as? ClientSession)?.principal === p }
        }
        try p.checkRoomForConnection()
    }

    /// Ends the connections chosen by `which` whose peer has closed with nothing left
    /// unread (one non-blocking peek each).
    private func reapClosedConnections(_ which: (RPCConnection) -> Bool) {
        var reaped = 0
        for c in Array(connections.values) where which(c) {
            if c.endIfPeerClosed() { reaped += 1 }
        }
        if reaped > 0 { logger.debug("reaped \(reaped) connections whose clients had gone") }
    }

    /// Answers a connection that cannot be served with `error` and closes it.
    private func refuse(_ conn: RPCConnection, _ error: RPCError) {
        conn.send(["jsonrpc": "2.0", "error": error.json, "id": .null])
        logger.warning("refusing connection from \(conn.peerDescription): \(error.message)")
        refused[conn.id] = conn
        conn.onClose = { [unowned self] c in refused[c.id] = nil }
        conn.closeAfterFlush()
    }
}
